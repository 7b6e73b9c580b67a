"""Custom slash commands: prompts saved as Markdown files.

``$DSH_HOME/commands/NAME.md`` (and a trusted project's ``.dsh/commands/``) is the
command ``/NAME``; a folder makes a namespace (``/frontend:review``). Running one
fills in the arguments, runs its ``!`` lines through the ``bash`` tool (asked about as
any call is) and sends the result as the person's message, with the file's ``model``
for that turn if it names one. The files are read again when they change (looked at
every :data:`WATCH_S` seconds, and before each prompt and ``/commands``), so a command
written meanwhile is there in the ``/`` completion and ``/commands`` at once. Modules: ``files`` (where they are,
what a file holds), ``expand`` (arguments and ``!`` lines). docs/commands.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from dsh.agent import AgentHandle, PreRequest, PromptAllow, PromptDecision, PromptSubmit
from dsh.claude_code import claude_reading, user_folder
from dsh.commands import Command, CommandContext, CommandError, CommandView
from dsh.control_chars import visible
from dsh.hooks import AGENT_PROMPT_SUBMIT, AGENT_REQUEST, AGENT_STATUS
from dsh.kernel import Context, Disposer, Next, NoConfig, Plugin
from dsh.llm import CallId, LlmCallConfig, MessageId, ToolCallBlock, joined_text, user_text
from dsh.paths import dsh_home
from dsh.services import COMMANDS, SETTINGS, TOOLS
from dsh.tools import Rule, RuleError, ToolContext, parse_rules
from dsh_plugins._shared.definitions import Skipped
from dsh_plugins.custom_commands.expand import arguments, commands
from dsh_plugins.custom_commands.files import (
    CommandFile,
    fingerprint,
    roots,
    scan,
    untrusted_names,
)

BASH = "bash"
"""The tool ``!`` lines run with."""
MAX_OUTPUT = 20_000
"""Characters of a ``!`` line's output kept in the prompt."""
WATCH_S = 1.0
"""How often the command folders are looked at for a file added, removed or changed
(their listing and the files' times and sizes: nothing is read unless one changed)."""


@dataclass
class Commands:
    """The command files found, the commands registered for them, and the model a
    command's turn asked for."""

    home: Path
    project: Path | None
    claude: Path | None = None
    """The user's Claude Code folder, when its commands are read."""
    files: dict[str, CommandFile] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    registered: dict[str, Disposer] = field(default_factory=dict)
    models: dict[MessageId, str] = field(default_factory=dict)
    """A command's message, and the model its turn is to use."""
    allowed: dict[MessageId, tuple[Rule, ...]] = field(default_factory=dict)
    """A command's message, and the rules its turn may use without asking."""
    turn_models: dict[str, str] = field(default_factory=dict)
    """An agent (by id) running a command's turn, and that turn's model."""
    rescan: asyncio.Task[None] | None = None
    seen: tuple[tuple[str, int, int], ...] = ()
    """The folders' :func:`fingerprint` when they were last read."""
    scanned: tuple[dict[str, CommandFile], list[Skipped]] | None = None
    """What that read found: read again only when the fingerprint changes."""


async def apply(ctx: Context, config: NoConfig) -> None:
    settings = ctx.get(SETTINGS, None)
    trusted_root = settings.root if settings is not None and settings.trusted else None
    # Claude Code's commands, unless the user's own settings say not to read its files.
    claude_files = settings is None or claude_reading(settings.own)
    claude = user_folder(os.environ) if claude_files else None
    state = Commands(home=dsh_home(), project=trusted_root, claude=claude)
    registry = ctx.get(COMMANDS)
    tools = ctx.get(TOOLS)

    reading = asyncio.Lock()  # one look at a time: an older one must not land last

    async def refresh() -> None:
        async with reading:
            await read_files()

    async def read_files() -> None:
        seen = await asyncio.to_thread(fingerprint, state.home, state.project, state.claude)
        if state.scanned is None or seen != state.seen:  # a file added, removed or written
            state.scanned = await asyncio.to_thread(scan, state.home, state.project, state.claude)
        state.seen = seen
        files, skipped = state.scanned
        state.skipped = list(skipped)
        for name in [n for n in state.files if files.get(n) != state.files[n]]:
            dispose = state.registered.pop(name, None)
            if dispose is not None:
                dispose()
            del state.files[name]
        for name, file in files.items():
            if name in state.files:
                continue
            if registry.get(name) is not None:
                state.skipped.append(Skipped(file.path, f"/{name} is a command of dsh's own"))
                continue
            state.files[name] = file
            state.registered[name] = registry.register(name, command_for(file))

    async def run_line(
        context: CommandContext, command: str, name: str, allow: tuple[Rule, ...]
    ) -> str:
        agent = context.agent
        call = ToolCallBlock(
            id=CallId(f"command-{uuid.uuid4().hex[:12]}"),
            name=BASH,
            arguments=json.dumps({"command": command, "description": f"/{name}: {command}"}),
        )
        tool_context = ToolContext(
            call_id=call.id,
            agent=agent,
            cwd=agent.cwd,
            signal=asyncio.Event(),
            session_id=agent.session.id,
            services=agent.ctx,
            allow=allow,
            # Its effects are the turn's that the command's prompt starts (or the one
            # running): covered by that turn's checkpoint, undone with it.
            turn=agent.session.open_turn or agent.session.last_turn + 1,
        )
        outcome = await tools.service.run(call, tool_context, agent)
        text = joined_text(outcome.message.result.content)
        if len(text) > MAX_OUTPUT:
            text = text[:MAX_OUTPUT] + "\n[cut: the output was longer]"
        if outcome.error_code is not None:
            return f"(not run: {text})"
        return text

    def command_for(file: CommandFile) -> Command:
        async def run(context: CommandContext, args: str) -> None:
            current = state.files.get(file.name, file)
            text = arguments(current.body, args)
            rules = allowed_rules(current.allowed_tools)
            text = await commands(text, lambda line: run_line(context, line, current.name, rules))
            if not text.strip():
                raise CommandError(f"/{current.name} made an empty prompt")
            message = user_text(text)
            if current.model:
                state.models[message.id] = current.model
            if rules:
                state.allowed[message.id] = rules
            context.agent.followup(message)

        where = "project" if file.origin == "project" else "user"
        description = visible(file.description, one_line=True) or f"{where} command"
        return Command(
            name=file.name,
            description=f"{description} ({where})",
            run=run,
            arguments=visible(file.hint, one_line=True),
        )

    async def on_prompt(
        submit: PromptSubmit, next_: Next[PromptSubmit, PromptDecision]
    ) -> PromptDecision:
        model = state.models.pop(submit.message.id, None)
        if model is not None:
            state.turn_models[submit.agent.id] = model
        rules = state.allowed.pop(submit.message.id, ())
        # A command file written meanwhile is there for the next prompt: looked for
        # beside the turn, not before it.
        if state.rescan is None or state.rescan.done():
            state.rescan = ctx.spawn(refresh(), name="custom-commands:scan")
        decision = await next_()
        if rules and isinstance(decision, PromptAllow):
            return replace(decision, allow=(*decision.allow, *rules))
        return decision

    async def on_request(pre: PreRequest, next_: Next[PreRequest, LlmCallConfig]) -> LlmCallConfig:
        model = state.turn_models.get(pre.agent.id)
        if model is None:
            return await next_()
        return await next_(PreRequest(pre.agent, pre.config.model_copy(update={"model": model})))

    def on_status(agent: AgentHandle, status: str) -> None:
        if status == "idle":
            state.turn_models.pop(agent.id, None)

    async def watch() -> None:
        """A file written while dsh runs shows in the ``/`` completion (and every
        front end's list of commands) without waiting for a prompt."""
        while True:
            await asyncio.sleep(WATCH_S)
            now = await asyncio.to_thread(fingerprint, state.home, state.project, state.claude)
            if now != state.seen:
                await refresh()

    ctx.on(AGENT_PROMPT_SUBMIT, on_prompt)
    ctx.on(AGENT_REQUEST, on_request)
    ctx.on(AGENT_STATUS, on_status)
    registry.register("commands", listing_command(state, refresh))
    await refresh()
    if settings is not None and not settings.trusted and settings.root is not None:
        await skip_untrusted(registry, settings.root)
    ctx.spawn(watch(), name="custom-commands:watch")


async def skip_untrusted(registry: CommandView, root: Path) -> None:
    """An untrusted project's commands do not run, and say so: each ``/name`` its
    folders would make is a hidden command that refuses, rather than an unknown word
    (which is refused too, without the reason)."""

    def refusal(name: str) -> Command:
        async def run(context: CommandContext, args: str) -> None:
            raise CommandError(
                f"/{name} is this project's command and was skipped: the folder is not "
                f"trusted (`dsh trust` trusts it; docs/security.md)"
            )

        return Command(name=name, description="", run=run, hidden=True, recorded=False)

    for name in await asyncio.to_thread(untrusted_names, root):
        if registry.get(name) is None:
            registry.register(name, refusal(name))


# Other agents' tool names in allowed-tools, as dsh's rules name the same actions.
RULE_NAMES = {
    "bash": "bash",
    "read": "read",
    "grep": "read",
    "glob": "read",
    "ls": "read",
    "edit": "edit",
    "multiedit": "edit",
    "write": "edit",
    "notebookedit": "edit",
    "webfetch": "web_fetch",
    "websearch": "web_search",
}


def allowed_rules(text: str | None) -> tuple[Rule, ...]:
    """``allowed-tools`` (``Bash(git add:*), Read``) as dsh's rules
    (``bash(git add:*)``, ``read``); a list that cannot be read allows nothing."""
    if not text:
        return ()
    if text.lstrip().startswith("- "):  # a YAML list, folded onto one line
        text = ", ".join(item.strip() for item in text.split(" - ")).lstrip("- ")
    try:
        rules = parse_rules(text)
    except RuleError:
        return ()
    return tuple(Rule(RULE_NAMES.get(rule.tool.lower(), rule.tool), rule.pattern) for rule in rules)


def listing_command(state: Commands, refresh: Callable[[], Awaitable[None]]) -> Command:
    async def run(context: CommandContext, args: str) -> None:
        await refresh()  # what is in the folders now, not at the last look
        lines = []
        for file in sorted(state.files.values(), key=lambda file: file.name):
            lines.append(
                f"/{file.name}  {file.path}" + (f"  model {file.model}" if file.model else "")
            )
            rules = allowed_rules(file.allowed_tools)
            if rules:
                lines.append(f"    runs without asking: {', '.join(map(str, rules))}")
        if not lines:
            places = [str(root) for _, root in roots(state.home, state.project, state.claude)]
            lines.append("No custom commands. Put NAME.md files in " + " or ".join(places))
        if state.skipped:
            lines.append("Left out:")
            lines += [f"  {skip.path}: {skip.reason}" for skip in state.skipped]
        context.host.show("\n".join(visible(line) for line in lines))

    return Command(
        name="commands", description="List the custom commands and where they come from", run=run
    )


plugin = Plugin(
    name="custom-commands",
    description="custom slash commands from Markdown files in commands/ folders",
    inject=(COMMANDS, TOOLS),
    optional=(SETTINGS,),
    apply=apply,
)
