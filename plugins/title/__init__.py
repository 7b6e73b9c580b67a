"""Session titles: what the picker lists and the terminal title shows.

A title is a log-only ``session/title`` event (this plugin's own type, which declares
the title it sets: :mod:`dsh_plugins.title.events`), the latest one winning, with its
source: ``fallback`` (the first prompt's opening words), ``provider`` (written by a
model in a ``session-title`` call, after the first completed turn) or ``user`` (set
with ``/title TEXT``, and pinned: nothing automatic replaces it).

Which sessions are titled by themselves is ``[plugins.title] auto``: by default those
an interactive front end shows (the TUI, plain mode), so a script makes no model call
beyond its conversation unless it asks. A headless run that asked (``--title``)
awaits ``title_now(agent)`` of the ``session-titles`` service before it exits: that
titles the session and waits for the request, which runs in the background and goes
with the agent.
"""

from __future__ import annotations

from dsh.commands import Command, CommandContext
from dsh.hooks import AGENT_STATUS, SESSION_TITLE_NOW
from dsh.kernel import Context, Plugin
from dsh.services import COMMANDS
from dsh.session import register_events
from dsh_plugins.title.events import TITLE, TITLE_REQUEST, SessionTitle, SessionTitleRequest
from dsh_plugins.title.service import SERVICE, Config, TitleService
from dsh_plugins.title.text import clean_title, fallback_title, user_title

__all__ = [
    "SERVICE",
    "TITLE",
    "TITLE_REQUEST",
    "Config",
    "SessionTitle",
    "SessionTitleRequest",
    "TitleService",
    "clean_title",
    "fallback_title",
    "plugin",
    "user_title",
]


def title_command(titles: TitleService) -> Command:
    async def run(context: CommandContext, args: str) -> None:
        agent = context.agent
        if not args.strip():
            title = titles.current(agent)
            if title is None:
                context.host.show("This session has no title yet.")
            else:
                context.host.show(f"Title: {title.title} ({title.source})")
            return
        title = titles.set(agent, args)
        context.host.show(f"Title set: {title.title}")

    return Command(
        name="title",
        description="Show the session's title, or set it (a title you set is kept)",
        run=run,
        arguments="[title]",
    )


def vocabulary(ctx: Context) -> None:
    register_events(ctx, TITLE, TITLE_REQUEST)


def apply(ctx: Context, config: Config) -> None:
    titles = TitleService(ctx, config)
    ctx.provide(SERVICE, titles)
    ctx.on(AGENT_STATUS, titles.on_status)
    ctx.on(SESSION_TITLE_NOW, titles.answer_title_now)
    ctx.get(COMMANDS).register("title", title_command(titles))


plugin = Plugin(
    name="title",
    description="session titles: a fallback, then one written by the model; /title",
    inject=(COMMANDS,),
    provides=(SERVICE,),
    config=Config,
    apply=apply,
    vocabulary=vocabulary,
)
