"""The built-in slash commands every front end offers: ``/model``, ``/permissions``,
``/cost``, ``/sessions``, ``/init`` and ``/exit``.

They run without a model turn (``/init`` excepted: it asks the model to draft an
``AGENTS.md``), in the TUI, in plain mode and headless (``dsh -p "/cost" --resume
ID``). What only a UI can do (``/theme``, ``/copy``, ``/new``, ``/resume``) the UIs
register themselves; ``/compact`` and ``/title`` come with their plugins.
"""

from __future__ import annotations

import difflib
import time

from dsh.commands import Command, CommandContext, CommandError
from dsh.kernel import Context, NoConfig, Plugin
from dsh.llm import CatalogEntry, user_text
from dsh.prompt_cache import next_prompt_cost
from dsh.services import APPROVALS, COMMANDS, LLM, SESSIONS
from dsh.session import session_spend
from dsh.tools import MODES

INIT_PROMPT = """\
Write an AGENTS.md file at the root of this repository, for coding agents working \
here. Look around first: the README, the build and test configuration, the layout of \
the source. Then write, briefly and concretely: what the project is; how to set it up, \
build, test and lint (the exact commands); how the code is organised; the conventions \
a change must follow; anything surprising. If an AGENTS.md exists, improve it rather \
than replace what is still true. Keep it under about 150 lines."""


async def model(context: CommandContext, args: str) -> None:
    agent = context.agent
    options = agent.options
    if not args:
        effort = f", effort {options.reasoning_effort}" if options.reasoning_effort else ""
        context.host.show(f"Model: {options.provider}/{options.model}{effort}")
        await _pick_model(context, options.provider, options.model)
        return
    words = args.split()
    force = "--force" in words
    words = [word for word in words if word != "--force"]
    if len(words) != 1:
        raise CommandError("usage: /model [provider/]model [--force]")
    provider, _, name = words[0].rpartition("/")
    provider = provider or options.provider
    llm = context.root.get(LLM)
    try:
        llm.resolve(provider, name)
    except Exception as error:
        raise CommandError(f"cannot use {provider}/{name}: {error}") from None
    known = [info.id for info in await llm.list_models(provider)]
    if known and name not in known and not force:
        # A typo would otherwise fail only at the next request, with the provider's 4xx.
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.4)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; it has {', '.join(known)}"
        raise CommandError(
            f"{provider} does not list a model {name!r}{hint} (/model {name} --force uses it "
            "anyway)"
        )
    _switch(context, provider, name)


async def _pick_model(context: CommandContext, provider: str, current: str) -> None:
    """``/model`` alone, where someone can choose: the provider's models (its
    ``/models`` list merged with what dsh knows of them) to pick from."""
    catalog = await context.root.get(LLM).catalog(provider)
    if not catalog:
        return
    ids = [entry.model.id for entry in catalog]
    items = [_picker_label(entry) for entry in catalog]
    # Said before the choice: a switch starts the prompt cache over.
    cost = next_prompt_cost(context.agent.session, context.root.get(LLM).cost, provider, current)
    title = f"Model of {provider}"
    if cost is not None:
        title += (
            f" (switching starts the prompt cache over: the next request reads {cost.phrase()})"
        )
    picked = await context.host.choose(
        title, items, current=ids.index(current) if current in ids else None
    )
    if picked is not None and ids[picked] != current:
        _switch(context, provider, ids[picked])


def _picker_label(entry: CatalogEntry) -> str:
    """``id · name · 1M context · vision · $in/$out`` with what is known of it."""
    model, price = entry.model, entry.price
    parts = [model.id]
    if model.name != model.id:
        parts.append(model.name)
    if model.sent_as:
        parts.append(f"sent as {model.sent_as}")
    if model.context_window:
        window = model.context_window
        size = f"{window // 1_000_000}M" if window % 1_000_000 == 0 else f"{window // 1000}K"
        parts.append(f"{size} context")
    if model.vision:
        parts.append("vision")
    if price is not None:
        parts.append(f"${price.cache_miss:g}/${price.output:g} per M")
    return " · ".join(parts)


def _switch(context: CommandContext, provider: str, name: str) -> None:
    context.agent.set_options(provider=provider, model=name)
    said = f"Model: {provider}/{name} from the next request on"
    lost = _cache_lost(context, provider, name)
    context.host.show(f"{said}. {lost}" if lost else said)


def _cache_lost(context: CommandContext, provider: str, name: str) -> str | None:
    """What switching to ``provider/name`` costs the next request, once something is
    cached: a new model has nothing of this conversation in its cache."""
    cost = next_prompt_cost(context.agent.session, context.root.get(LLM).cost, provider, name)
    if cost is None:
        return None
    return f"The new model starts the prompt cache over: its first request reads {cost.phrase()}."


async def permissions(context: CommandContext, args: str) -> None:
    approvals = context.root.get(APPROVALS)
    if args:
        wanted = args.strip()
        mode = next((known for known in MODES if known == wanted), None)
        if mode is None:
            raise CommandError(f"unknown mode {wanted!r}: one of {', '.join(MODES)}")
        approvals.mode = mode
    lines = [f"Permission mode: {approvals.mode}"]
    lines += [f"  allow {rule}" for rule in approvals.allow]
    lines += [f"  deny  {rule}" for rule in approvals.deny]
    context.host.show("\n".join(lines))


async def cost(context: CommandContext, args: str) -> None:
    spent = session_spend(context.agent.session.events, context.root.get(LLM).cost)
    usage = spent.usage
    if usage is None and not spent.requests:
        context.host.show("No model calls in this session yet.")
        return
    lines = []
    if usage is not None:
        cached = usage.cache_read_tokens or 0
        billed = usage.billed_input_tokens
        ratio = f" ({cached / billed:.0%} of input from the cache)" if billed else ""
        lines.append(
            f"{spent.calls} model calls: {billed:,} input tokens{ratio}, "
            f"{usage.output_tokens:,} output tokens"
        )
        if spent.saved:
            lines.append(f"the prompt cache saved ${spent.saved:.4f}")
    for service, total in sorted(spent.requests.items()):
        plural = "" if total.count == 1 else "s"
        price = f" ${total.cost:.4f}" if total.cost is not None else " (price unknown)"
        lines.append(f"{service}: {total.count} request{plural}{price}")
    money = f"${spent.cost:.4f}" if spent.cost is not None else "unknown (no price for this model)"
    lines.append(f"cost {money}")
    context.host.show("\n".join(lines) if len(lines) > 2 else "; ".join(lines))


async def sessions(context: CommandContext, args: str) -> None:
    agent = context.agent
    catalog = context.root.get(SESSIONS).catalog
    if catalog is None:
        raise CommandError("the session index is off")
    # Up to date with storage: sessions the index lost listed again, vanished ones not.
    await context.root.get(SESSIONS).index_missing(str(agent.cwd))
    entries = await catalog.list(cwd=str(agent.cwd), limit=20)
    if not entries:
        context.host.show("No sessions here yet.")
        return
    now = time.time() * 1000
    lines = []
    for entry in entries:
        marker = "*" if entry.id == agent.id else " "
        money = f" ${entry.cost:.4f}" if entry.cost else ""
        lines.append(
            f"{marker} {entry.id[:8]}  {_age(now - entry.updated_at):>8}  "
            f"{entry.turns} turn{'' if entry.turns == 1 else 's'}{money}  {entry.display_title}"
        )
    context.host.show("\n".join(lines) + "\n(/resume ID opens one)")


def _age(ms: float) -> str:
    seconds = max(0, int(ms // 1000))
    for size, unit in ((86_400, "d"), (3_600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return "just now"


async def init(context: CommandContext, args: str) -> None:
    agent = context.agent
    focus = f"\n\nAlso: {args}" if args else ""
    agent.followup(user_text(INIT_PROMPT + focus))
    context.host.show("Asked the model to draft AGENTS.md.")


async def exit_(context: CommandContext, args: str) -> None:
    await context.host.quit()


BUILT_IN = (
    Command(
        "model", "Show or switch the model (provider/model)", model, "[provider/]model [--force]"
    ),
    Command("permissions", "Show or set the permission mode", permissions, "[mode]"),
    Command("cost", "Tokens, cache hits and cost of this session", cost, recorded=False),
    Command("sessions", "Recent sessions of this directory", sessions, recorded=False),
    Command("init", "Ask the model to draft an AGENTS.md for this repository", init, "[focus]"),
    Command("exit", "Quit dsh", exit_, recorded=False, quits=True),
)


def apply(ctx: Context, config: NoConfig) -> None:
    for command in BUILT_IN:
        ctx.get(COMMANDS).register(command.name, command)


plugin = Plugin(
    name="commands",
    description="Built-in slash commands: /model /permissions /cost /sessions /init /exit",
    inject=(COMMANDS,),
    apply=apply,
)
