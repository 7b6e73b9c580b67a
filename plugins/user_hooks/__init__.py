"""User hooks: the person's own commands, run at fixed points of a session.

Configured in settings as ``[[hooks.EVENT]]`` tables (:mod:`dsh_plugins.user_hooks.config`),
compatible with the JSON other agents' hooks read and write, so existing scripts work:

- ``SessionStart``: a session opens (``source``: startup or resume); what it prints
  (plain text, or ``additionalContext``) goes to the model before the first prompt.
- ``UserPromptSubmit``: before a prompt opens a turn; exit 2 or ``"decision":
  "block"`` blocks it (the reason shown), else what it prints is added as context.
- ``PreToolUse``: before a call is checked against the permissions; exit 2 or a
  ``permissionDecision`` of ``deny`` denies it (the model reads why), ``ask`` makes the
  person approve it even where rules allow it, ``allow`` vouches for it as an allow
  rule would (for this call), and ``updatedInput`` replaces its arguments (judged
  again as rewritten).
- ``PostToolUse``: after a call; exit 2 or ``"decision": "block"`` turns its result
  into an error the model reads, with the reason.
- ``Stop``: the turn is about to end; exit 2 or ``"decision": "block"`` with a reason
  keeps the agent going with the reason as its next instruction (once per turn: the
  payload's ``stop_hook_active`` says when it already did).
- ``SubagentStop``: as ``Stop``, for a subagent's turn (the ``task`` tool's child; also
  ``agent_id``, ``agent_type`` (its profile) and ``parent_session_id``); ``Stop`` does
  not run for it, nor ``SessionStart`` for its session.
- ``Notification``: dsh needs the person (a call waits for approval); its answer is
  not read.
- ``PreCompact``: the older history is about to be summarised (``trigger``: manual
  or auto; ``custom_instructions``: the ``/compact`` argument); exit 2 or
  ``"decision": "block"`` refuses that compaction.
- ``SessionEnd``: the session's agent is disposed (``reason``: ``clear`` for /new,
  ``prompt_input_exit`` when the person quits, else ``other``); awaited, within its
  timeout, before dsh goes on (or exits); its answer is not read. Not for a
  subagent's session, as ``SessionStart``.

Every payload carries ``transcript_path``: the session's JSONL log (with the SQLite
backend, the database file), written up to the moment the hook runs.

Every run is logged as a ``hooks/ran`` event (shown as a line in the transcript): the
event, the command, how it ended and what it said. A hook past its timeout is killed
with its process group. ``/hooks`` lists what is configured and where from.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from dsh.agent import (
    AgentHandle,
    PromptAllow,
    PromptBlock,
    PromptDecision,
    PromptSubmit,
    TurnSignal,
)
from dsh.commands import Command, CommandContext
from dsh.control_chars import visible
from dsh.hooks import (
    AGENT_PROMPT_SUBMIT,
    AGENT_SESSION_END,
    AGENT_SESSION_START,
    AGENT_TURN_STOPPING,
    HISTORY_SUMMARISE,
    TOOL_POST_EXECUTE,
    TOOL_PRE_EXECUTE,
)
from dsh.kernel import Context, Next, NoConfig, Plugin
from dsh.llm import PluginSource, UserMessage, joined_text, user_text
from dsh.sandbox import Sandbox
from dsh.services import COMMANDS, SANDBOX, SESSIONS, SETTINGS
from dsh.session import EventType, SessionEvent, register_events
from dsh.tools import (
    Action,
    Allow,
    Ask,
    BlockResult,
    CallOutcome,
    Deny,
    PreVerdict,
    Rewrite,
    ToolContext,
    ToolDefinition,
    user_passthrough,
)
from dsh.transcript import Transcript, register_entries
from dsh_plugins.user_hooks.config import Hook, read_hooks
from dsh_plugins.user_hooks.runner import BLOCKING, Ran, run_hook

NAME = "user-hooks"
SHOWN = 2000
"""Characters of a hook's output kept in its event."""


class HookRan(BaseModel):
    event: str
    command: str
    exit_code: int | None = None
    timed_out: bool = False
    duration_ms: int
    outcome: str
    """What dsh did with it: ``ok``, ``blocked``, ``denied``, ``ask``, ``allowed``,
    ``rewrote``, ``context``, ``continue``, ``error``."""
    said: str = ""
    """Its reason or output, cut to :data:`SHOWN` characters."""


HOOK_RAN = EventType("hooks/ran", HookRan)


def show_ran(event: SessionEvent, transcript: Transcript) -> None:
    data: HookRan = event.data
    level: Literal["info", "warning"] = (
        "warning" if data.outcome in ("blocked", "denied", "error") else "info"
    )
    ended = "timed out" if data.timed_out else f"exit {data.exit_code}"
    line = f"hook {data.event}: {data.command} ({ended}, {data.outcome})"
    said = data.said.strip().splitlines()
    transcript.notice(event, level, line + (f": {said[0][:200]}" if said else ""))


def vocabulary(ctx: Context) -> None:
    register_events(ctx, HOOK_RAN)
    register_entries(ctx, HOOK_RAN.name, show_ran)


END_REASONS = {"clear": "clear", "exit": "prompt_input_exit"}
"""The core's reasons a session ends, as other agents' SessionEnd hooks name them;
any other (a /resume, a script's end, an editor closing it) is ``other``."""


def _payload(agent: AgentHandle | None, event: str, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"hook_event_name": event}
    if agent is not None:
        base.update(session_id=agent.id, cwd=str(agent.cwd), transcript_path="")
    return {**base, **fields}


def _tool_fields(
    tool: ToolDefinition, tool_input: dict[str, Any], context: ToolContext
) -> dict[str, Any]:
    """What a tool event tells a hook of its call, in Claude Code's words (``Bash``,
    ``tool_input.file_path``: scripts written for it read those), and in dsh's own
    under ``dsh``."""
    named = tool.claude_code
    return {
        "tool_name": named.name if named is not None else tool.name,
        "tool_input": named.to_claude(tool_input) if named is not None else tool_input,
        "tool_use_id": context.call_id,
        "dsh": {"tool_name": tool.name, "tool_input": tool_input},
    }


_OLDER = {"approve": "allow", "block": "deny"}
"""PreToolUse's older top-level ``decision`` values, as Claude Code still reads them."""


def _reason(ran: Ran) -> str:
    answer = ran.answer
    for key in ("reason", "stopReason"):
        if isinstance(answer.get(key), str) and answer[key].strip():
            return str(answer[key])
    specific = answer.get("hookSpecificOutput")
    if isinstance(specific, dict):
        for key in ("permissionDecisionReason", "additionalContext"):
            if isinstance(specific.get(key), str) and specific[key].strip():
                return str(specific[key])
    return (ran.stderr if ran.exit_code == BLOCKING else ran.stdout).strip()


def _context(ran: Ran) -> str:
    """What an exit-0 hook adds for the model: ``additionalContext``, else plain text."""
    if ran.exit_code != 0:
        return ""
    specific = ran.answer.get("hookSpecificOutput")
    if isinstance(specific, dict) and isinstance(specific.get("additionalContext"), str):
        return str(specific["additionalContext"]).strip()
    return "" if ran.answer else ran.stdout.strip()


def _blocks(ran: Ran) -> bool:
    return ran.exit_code == BLOCKING or ran.answer.get("decision") == "block"


def _context_message(event: str, text: str) -> UserMessage:
    return user_text(
        f"<system-reminder>\nFrom the user's {event} hook:\n{text}\n</system-reminder>",
        source=PluginSource(plugin=NAME, form="context"),
    )


def apply(ctx: Context, config: NoConfig) -> None:
    settings = ctx.get(SETTINGS, None)
    hooks: list[Hook] = []
    problems: list[str] = []
    own: set[tuple[str, str, str]] = set()
    passthrough: tuple[str, ...] = ()
    if settings is not None:
        hooks, problems = read_hooks(settings.section("hooks"), settings.origin("hooks"))
        # A hook the user's own layers configure may get the user's passthrough
        # secrets; one a (trusted) project added gets none.
        mine, _ = read_hooks(settings.own_section("hooks"), "")
        own = {(h.event, h.matcher, h.command) for h in mine}
        passthrough = user_passthrough(settings)

    def earned(hook: Hook) -> tuple[str, ...] | None:
        return passthrough if (hook.event, hook.matcher, hook.command) in own else None

    def contained(hook: Hook) -> Sandbox | None:
        """The sandbox a project's hook runs in; the user's own run outside, as the
        user's own programs."""
        if (hook.event, hook.matcher, hook.command) in own:
            return None
        return ctx.get(SANDBOX, None)

    sessions = ctx.get(SESSIONS, None)

    async def run_all(
        event: str,
        agent: AgentHandle | None,
        payload: dict[str, Any],
        names: tuple[str, ...] | None = None,
    ) -> list[tuple[Hook, Ran]]:
        chosen = [h for h in hooks if h.event == event and h.matches(names)]
        if not chosen:
            return []
        cwd = agent.cwd if agent is not None else Path.cwd()
        if agent is not None and sessions is not None:
            payload["transcript_path"] = str(sessions.log_path(agent.session))
            # What a hook reads of the log is the session so far, not an older write.
            await agent.flush(sync=False)
        ran = await asyncio.gather(
            *(
                run_hook(
                    h.command,
                    payload,
                    cwd,
                    h.timeout,
                    passthrough=earned(h),
                    sandbox=contained(h),
                )
                for h in chosen
            )
        )
        return list(zip(chosen, ran, strict=True))

    def log(agent: AgentHandle | None, hook: Hook, ran: Ran, outcome: str, said: str) -> None:
        if agent is None:
            return
        if ran.exit_code not in (0, BLOCKING) and outcome == "ok":
            outcome, said = "error", said or ran.stderr
        agent.session.append(
            HOOK_RAN.name,
            HookRan(
                event=hook.event,
                command=hook.command,
                exit_code=ran.exit_code,
                timed_out=ran.timed_out,
                duration_ms=ran.duration_ms,
                outcome=outcome,
                said=said[:SHOWN],
            ),
        )

    async def session_start(agent: AgentHandle, source: str) -> None:
        payload = _payload(agent, "SessionStart", source=source)
        # The matcher is matched against how it started, as Claude Code's is.
        results = await run_all("SessionStart", agent, payload, (source,))
        for hook, ran in results:
            text = _context(ran)
            log(agent, hook, ran, "context" if text else "ok", text)
            if text:  # it goes with the first prompt, as context
                staged.setdefault(agent.id, []).append(_context_message("SessionStart", text))

    staged: dict[str, list[UserMessage]] = {}

    async def prompt_submit(
        submit: PromptSubmit, next_: Next[PromptSubmit, PromptDecision]
    ) -> PromptDecision:
        agent = submit.agent
        payload = _payload(agent, "UserPromptSubmit", prompt=submit.message.text())
        extra = staged.pop(agent.id, [])
        from_start = list(extra)
        for hook, ran in await run_all("UserPromptSubmit", agent, payload):
            if _blocks(ran):
                reason = _reason(ran) or "a UserPromptSubmit hook blocked it"
                log(agent, hook, ran, "blocked", reason)
                if from_start:  # it waits for the prompt that does go out
                    staged[agent.id] = from_start
                return PromptBlock(f"{reason} (hook: {hook.command})")
            text = _context(ran)
            log(agent, hook, ran, "context" if text else "ok", text)
            if text:
                extra.append(_context_message("UserPromptSubmit", text))
        decision = await next_()
        if extra and isinstance(decision, PromptAllow):
            return replace(decision, additional_contexts=(*decision.additional_contexts, *extra))
        return decision

    rewritten: dict[str, dict[str, Any]] = {}
    """A call these hooks rewrote, and what to: the pipeline shows it to every guard
    again, and the hooks have had their say about it."""

    async def pre_tool(
        tool: ToolDefinition, arguments: Any, action: Action, context: ToolContext
    ) -> PreVerdict:
        agent = context.agent
        tool_input = arguments.model_dump(mode="json")
        wrote = rewritten.pop(context.call_id, None)
        if wrote is not None and all(tool_input.get(k) == v for k, v in wrote.items()):
            return None  # the guards' second look at what these hooks rewrote it to
        payload = _payload(agent, "PreToolUse", **_tool_fields(tool, tool_input, context))
        denied: Deny | None = None
        rewrite: Rewrite | None = None
        ask: Ask | None = None
        allow: Allow | None = None
        for hook, ran in await run_all("PreToolUse", agent, payload, tool.names):
            specific = ran.answer.get("hookSpecificOutput")
            specific = specific if isinstance(specific, dict) else {}
            # The older top-level answer Claude Code still reads: approve, or block.
            decided = specific.get("permissionDecision") or _OLDER.get(
                str(ran.answer.get("decision"))
            )
            updated = specific.get("updatedInput")
            if isinstance(updated, dict) and tool.claude_code is not None:
                updated = tool.claude_code.from_claude(updated)  # its fields as dsh's
            reason = _reason(ran)
            where = f"(PreToolUse hook: {hook.command})"
            if _blocks(ran) or decided == "deny":
                log(agent, hook, ran, "denied", reason)
                denied = denied or Deny(f"{reason or 'denied'} {where}")
            elif isinstance(updated, dict):
                log(agent, hook, ran, "rewrote", json.dumps(updated)[:SHOWN])
                rewrite = rewrite or Rewrite(updated, reason)
            elif decided == "ask":
                log(agent, hook, ran, "ask", reason)
                ask = ask or Ask(f"{reason or 'a hook asks'} {where}")
            elif decided == "allow":
                log(agent, hook, ran, "allowed", reason)
                allow = allow or Allow(f"{reason or 'a hook allows it'} {where}")
            else:
                log(agent, hook, ran, "ok", reason if ran.exit_code != 0 else "")
        # One answer per listener: a denial, else a rewrite (judged again as any call),
        # else an ask, else an allow.
        if denied is None and rewrite is not None:
            rewritten[context.call_id] = rewrite.arguments
        return denied or rewrite or ask or allow

    async def post_tool(
        tool: ToolDefinition, arguments: Any, outcome: CallOutcome, context: ToolContext
    ) -> BlockResult | None:
        agent = context.agent
        response = joined_text(outcome.message.result.content)
        payload = _payload(
            agent,
            "PostToolUse",
            **_tool_fields(tool, arguments.model_dump(mode="json"), context),
            tool_response=response,
        )
        verdict: BlockResult | None = None
        for hook, ran in await run_all("PostToolUse", agent, payload, tool.names):
            if _blocks(ran):
                reason = _reason(ran) or "a PostToolUse hook objected"
                log(agent, hook, ran, "blocked", reason)
                verdict = verdict or BlockResult(f"{reason} (PostToolUse hook: {hook.command})")
            else:
                log(agent, hook, ran, "ok", "")
        return verdict

    continued: set[tuple[str, int]] = set()

    async def stopping(agent: AgentHandle, turn: int, signal: TurnSignal) -> bool:
        active = (agent.id, turn) in continued
        header = agent.session.header
        if header.origin == "subagent":  # a task's child agent: its own event
            event = "SubagentStop"
            payload = _payload(
                agent,
                event,
                stop_hook_active=active,
                agent_id=agent.id,
                agent_type=header.agent_preset or "general-purpose",
                parent_session_id=header.parent_session,
            )
        else:
            event = "Stop"
            payload = _payload(agent, event, stop_hook_active=active)
        for hook, ran in await run_all(event, agent, payload):
            if _blocks(ran) and not active:
                reason = _reason(ran) or f"a {event} hook asks you to go on"
                log(agent, hook, ran, "continue", reason)
                continued.add((agent.id, turn))
                if agent.try_steer(user_text(f"({event} hook: {hook.command}) {reason}")):
                    return True
            else:
                log(agent, hook, ran, "ok", "")
        continued.discard((agent.id, turn))
        return False

    def notify(agent: AgentHandle, event: SessionEvent) -> None:
        # A session subscriber may not log; the hook runs (and logs) beside it.
        if event.type == "approval/requested":
            tool, summary = (
                getattr(event.data, "tool", "a tool"),
                getattr(event.data, "summary", ""),
            )
            message = f"dsh needs your permission to use {tool}: {summary}"
            payload = _payload(agent, "Notification", message=message, title="dsh")
            task = ctx.spawn(notified(agent, payload), name="user-hooks:notification")
            running = notifying.setdefault(agent.id, set())
            running.add(task)
            task.add_done_callback(running.discard)

    notifying: dict[str, set[asyncio.Task[None]]] = {}
    """Notification hooks still running, by agent: the session's end waits for them
    (each within its timeout) so a short run does not cut them off."""

    async def notified(agent: AgentHandle, payload: dict[str, Any]) -> None:
        for hook, ran in await run_all("Notification", agent, payload):
            log(agent, hook, ran, "ok", "")

    async def session_opened(agent: AgentHandle, source: str) -> None:
        if any(h.event == "Notification" for h in hooks):
            # Given up with the agent (its context goes when it is disposed).
            agent.ctx.effect(lambda: agent.session.subscribe(lambda e: notify(agent, e)))
        if any(h.event == "SessionStart" for h in hooks) and source != "subagent":
            await session_start(agent, source)

    async def summarising(agent: AgentHandle, trigger: str, instructions: str) -> str | None:
        payload = _payload(agent, "PreCompact", trigger=trigger, custom_instructions=instructions)
        refusal: str | None = None
        for hook, ran in await run_all("PreCompact", agent, payload, (trigger,)):
            if _blocks(ran):
                reason = _reason(ran) or "a PreCompact hook refused it"
                log(agent, hook, ran, "blocked", reason)
                refusal = refusal or f"{reason} (PreCompact hook: {hook.command})"
            else:
                log(agent, hook, ran, "ok", "")
        return refusal

    async def session_end(agent: AgentHandle, reason: str) -> None:
        running = notifying.pop(agent.id, set())
        if running:
            await asyncio.wait(running)
        if agent.session.header.origin == "subagent":  # a task's child: SubagentStop's
            return
        why = END_REASONS.get(reason, "other")
        payload = _payload(agent, "SessionEnd", reason=why)
        for hook, ran in await run_all("SessionEnd", agent, payload, (why,)):
            log(agent, hook, ran, "ok", "")

    if any(h.event in ("SessionStart", "Notification") for h in hooks):
        ctx.on(AGENT_SESSION_START, session_opened)
    if any(h.event == "UserPromptSubmit" for h in hooks) or any(
        h.event == "SessionStart" for h in hooks
    ):
        ctx.on(AGENT_PROMPT_SUBMIT, prompt_submit)
    if any(h.event == "PreToolUse" for h in hooks):
        ctx.on(TOOL_PRE_EXECUTE, pre_tool)
    if any(h.event == "PostToolUse" for h in hooks):
        ctx.on(TOOL_POST_EXECUTE, post_tool)
    if any(h.event in ("Stop", "SubagentStop") for h in hooks):
        ctx.on(AGENT_TURN_STOPPING, stopping)
    if any(h.event == "PreCompact" for h in hooks):
        ctx.on(HISTORY_SUMMARISE, summarising)
    if any(h.event in ("SessionEnd", "Notification") for h in hooks):
        ctx.on(AGENT_SESSION_END, session_end)
    commands = ctx.get(COMMANDS, None)
    if commands is not None:
        commands.register("hooks", hooks_command(hooks, problems))


def hooks_command(hooks: list[Hook], problems: list[str]) -> Command:
    async def run(context: CommandContext, args: str) -> None:
        lines = [
            f"{h.event} [{h.matcher or '*'}]: {h.command} (timeout {h.timeout:g} s; {h.origin})"
            for h in hooks
        ]
        if not lines:
            lines.append("No hooks are configured ([[hooks.EVENT]] tables in settings).")
        lines += problems
        context.host.show("\n".join(visible(line) for line in lines))

    return Command(name="hooks", description="The hooks configured, and where from", run=run)


plugin = Plugin(
    name=NAME,
    description="user hooks: the person's commands at SessionStart, UserPromptSubmit, "
    "PreToolUse, PostToolUse, Stop, Notification, PreCompact and SessionEnd",
    optional=(SETTINGS, COMMANDS, SESSIONS),
    apply=apply,
    vocabulary=vocabulary,
)
