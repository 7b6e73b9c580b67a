"""Compaction: the older history of a long session replaced by a model's summary.

When the context would fill more than ``threshold`` (0.85 by default) of the model's
own window, the next request is preceded by a compaction; ``/compact [focus]`` runs
one between turns. The most recent turns stay verbatim, the todo list is carried over
next to the summary, and a compaction that fails leaves history as it was and says
why. Settings are ``[plugins.compaction]`` (see :class:`Config`); how one compaction
is logged is in :mod:`dsh_plugins.compaction.service`.
"""

from __future__ import annotations

from dsh.commands import Command, CommandContext, CommandError
from dsh.frontend import front_end
from dsh.hooks import AGENT_DISPOSED, AGENT_PRE_STEP, AGENT_REQUEST, AGENT_REQUEST_ERROR
from dsh.kernel import Context, Plugin
from dsh.prompt_cache import next_prompt_cost
from dsh.services import COMMANDS, LLM
from dsh.session import register_events
from dsh.transcript import register_entries
from dsh_plugins.compaction.config import Config
from dsh_plugins.compaction.events import EVENTS, FOLD_STEPS
from dsh_plugins.compaction.request import rebuild_request
from dsh_plugins.compaction.service import (
    SERVICE,
    CompactionBusy,
    CompactionError,
    CompactionRefused,
    CompactionResult,
    CompactionService,
)

__all__ = [
    "SERVICE",
    "CompactionBusy",
    "CompactionError",
    "CompactionRefused",
    "CompactionResult",
    "CompactionService",
    "Config",
    "plugin",
    "rebuild_request",
]


def _cache_restart(context: CommandContext) -> str:
    """The history changed before its end, so the cached prefix is of no use to the
    next request: what that request will read without it."""
    options = context.agent.options
    cost = next_prompt_cost(
        context.agent.session, context.root.get(LLM).cost, options.provider, options.model
    )
    if cost is None:
        return ""
    return f" The prompt cache starts over: the next request reads {cost.phrase()}."


def compact_command(service: CompactionService) -> Command:
    async def run(context: CommandContext, args: str) -> None:
        try:
            result = await service.compact_now(context.agent, args.strip() or None)
        except CompactionBusy as error:
            raise CommandError(str(error)) from None
        except CompactionRefused as error:
            raise CommandError(f"compaction refused: {error}") from None
        except CompactionError as error:
            raise CommandError(f"compaction failed: {error}") from None
        if result is None:
            context.host.show("Nothing to compact yet: the history is just the latest exchange.")
            return
        share = ""
        if result.context_window:
            share = f", {result.context_tokens / result.context_window:.0%} of the window"
        holds = f"the context holds about {result.context_tokens:,} tokens now{share}."
        holds += _cache_restart(context)
        shown = front_end(context.agent)
        if shown is not None and shown.shows_notices:
            # The summary's notice in the transcript says what was compacted: once.
            context.host.show(holds[0].upper() + holds[1:])
            return
        context.host.show(
            f"Compacted {result.shadowed_tokens:,} tokens of earlier conversation into a "
            f"summary; {holds}"
        )

    return Command(
        name="compact",
        description="Replace the earlier conversation with a summary, to free context",
        run=run,
        arguments="[focus]",
    )


def vocabulary(ctx: Context) -> None:
    register_events(ctx, *EVENTS)
    for event_type, step in FOLD_STEPS.items():
        register_entries(ctx, event_type, step)


def apply(ctx: Context, config: Config) -> None:
    service = CompactionService(ctx, config)
    ctx.provide(SERVICE, service)
    ctx.on(AGENT_PRE_STEP, service.on_pre_step)
    ctx.on(AGENT_REQUEST, service.on_request)
    ctx.on(AGENT_REQUEST_ERROR, service.on_request_error)
    ctx.on(AGENT_DISPOSED, service.forget)
    ctx.get(COMMANDS).register("compact", compact_command(service))


plugin = Plugin(
    name="compaction",
    description="compaction: a summary in place of the older history, automatic and /compact",
    inject=(COMMANDS,),
    provides=(SERVICE,),
    config=Config,
    apply=apply,
    vocabulary=vocabulary,
)
