"""Session events as ACP ``session/update`` notifications.

Each event goes through the same :class:`~dsh.ui.entries.TranscriptFold` the TUI and
plain mode fold it with, and each entry it adds or changes becomes updates: the new
part of an answer or of reasoning (``agent_message_chunk``, ``agent_thought_chunk``),
a tool call's first sight (``tool_call``) and each change of its status or content
(``tool_call_update``), a checklist panel as the ``plan``. What a tool call looks like
(its title, its diff, its command's output) is the tool's own presentation, as the
other front ends show it; its kind is what the tool declares. Since only the fold is
read, a session loaded from its log replays as it went live.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeAlias

from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    ContentToolCallContent,
    CurrentModeUpdate,
    FileEditToolCallContent,
    PlanEntry,
    TerminalToolCallContent,
    TextContentBlock,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    Usage,
    UsageUpdate,
    UserMessageChunk,
)

from dsh.llm import TokenUsage
from dsh.session import SessionEvent
from dsh.tools.presentation import (
    AgentView,
    ChecklistView,
    CommandView,
    DiffView,
    Presentation,
    ScreenView,
    TextView,
)
from dsh.ui.entries import (
    AnswerEntry,
    NoticeEntry,
    ReasoningEntry,
    ToolEntry,
    TranscriptFold,
    TurnFooter,
    UserEntry,
)
from dsh.ui.render import AGENT_LINES, ToolLookup, generic_title, parse_arguments, tool_presentation

Update: TypeAlias = (
    AgentMessageChunk
    | AgentThoughtChunk
    | UserMessageChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
    | AvailableCommandsUpdate
    | CurrentModeUpdate
    | UsageUpdate
    | ConfigOptionUpdate
)
ToolContent: TypeAlias = ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent

STATUSES = {
    "awaiting-approval": "pending",
    "running": "in_progress",
    "done": "completed",
    "failed": "failed",
    "denied": "failed",
    "cancelled": "failed",
}


class Updates:
    """One session's fold, and what of each entry the editor was sent already."""

    def __init__(
        self, fold: TranscriptFold, tools: ToolLookup | None, cwd: Path, *, echo_user: bool
    ) -> None:
        self.fold = fold
        self.tools = tools
        self.cwd = cwd
        self.echo_user = echo_user
        """Send the person's own messages too: a loaded session's history (live, the
        editor shows what it sent itself)."""
        self._sent: dict[str, int] = {}
        self._tools: dict[str, tuple[str, tuple[ToolContent, ...], str]] = {}
        self._plan: list[PlanEntry] | None = None
        self.terminals: dict[str, str] = {}
        """The editor's terminal each call's command ran in, shown instead of its output
        (live only: a loaded session's terminals are gone, and its calls show text)."""

    def apply(self, event: SessionEvent) -> list[Update]:
        updates: list[Update] = []
        for entry in self.fold.apply(event):
            updates.extend(self._entry(entry))
        plan = self._plan_entries()
        if plan != self._plan and (plan or self._plan is not None):
            self._plan = plan
            updates.append(AgentPlanUpdate(session_update="plan", entries=plan))
        return updates

    def _entry(self, entry: object) -> list[Update]:
        match entry:
            case UserEntry(text=text) if self.echo_user and text:
                return [UserMessageChunk(session_update="user_message_chunk", content=_text(text))]
            case AnswerEntry() | ReasoningEntry():
                return self._streamed(entry)
            case ToolEntry():
                return self._tool(entry)
            case NoticeEntry(level=level, text=text) if level in ("warning", "error"):
                return [said(f"\n\n> dsh: {text}\n\n")]
            case TurnFooter(outcome="failed" | "stopped", reason=reason) if reason:
                return [said(f"\n\n> dsh: {reason}\n\n")]
        return []

    def _streamed(self, entry: AnswerEntry | ReasoningEntry) -> list[Update]:
        text = entry.text
        sent = self._sent.get(entry.key, 0)
        if len(text) <= sent:
            return []
        self._sent[entry.key] = len(text)
        block = _text(text[sent:])
        if isinstance(entry, ReasoningEntry):
            return [AgentThoughtChunk(session_update="agent_thought_chunk", content=block)]
        return [AgentMessageChunk(session_update="agent_message_chunk", content=block)]

    def _tool(self, entry: ToolEntry) -> list[Update]:
        view = tool_presentation(self.tools, entry)
        title = _title(view) or generic_title(entry)
        status = STATUSES.get(entry.status, "in_progress")
        terminal = self.terminals.get(entry.call_id)
        content = (_terminal(terminal),) if terminal else tuple(self._content(view, entry))
        known = self._tools.get(entry.call_id)
        if known == (status, content, title):
            return []
        self._tools[entry.call_id] = (status, content, title)
        locations = self._locations(view)
        if known is None:
            tool = self.tools.get(entry.name) if self.tools is not None else None
            return [
                ToolCallStart(
                    session_update="tool_call",
                    tool_call_id=entry.call_id,
                    title=title,
                    kind=tool.kind if tool is not None else "other",
                    status=status,
                    content=list(content) or None,
                    locations=locations or None,
                    raw_input=parse_arguments(entry.arguments),
                )
            ]
        return [
            ToolCallProgress(
                session_update="tool_call_update",
                tool_call_id=entry.call_id,
                title=title,
                status=status,
                content=list(content) or None,
                locations=locations or None,
                raw_output=entry.result if entry.ended_ms is not None else None,
            )
        ]

    def terminal(self, call_id: str, terminal_id: str) -> list[Update]:
        """A call's command runs in the editor's terminal ``terminal_id``: the call shows
        it from now on, live."""
        self.terminals[call_id] = terminal_id
        known = self._tools.get(call_id)
        if known is None:
            return []  # not folded yet: its tool_call will carry the terminal
        _, _, title = known
        content = (_terminal(terminal_id),)
        self._tools[call_id] = ("in_progress", content, title)
        return [
            ToolCallProgress(
                session_update="tool_call_update",
                tool_call_id=call_id,
                status="in_progress",
                content=list(content),
            )
        ]

    def _content(self, view: Presentation, entry: ToolEntry) -> list[ToolContent]:
        match view:
            case DiffView(files=files) if files:
                return [
                    FileEditToolCallContent(
                        type="diff", path=self._absolute(f.path), **diff_texts(f.diff)
                    )
                    for f in files
                ]
            case CommandView(command=command, output=output, exit_code=code, signal=signal):
                if output is None and code is None:
                    return []
                lines = [f"$ {command}", *([output.rstrip("\n")] if output else [])]
                if signal:
                    lines.append(f"(killed by {signal})")
                elif code not in (None, 0):
                    lines.append(f"(exit code {code})")
                return [_block("```\n" + "\n".join(lines) + "\n```")]
            case ScreenView(rows=rows):
                return [_block("```\n" + "\n".join(rows).rstrip() + "\n```")] if rows else []
            case ChecklistView(items=items):
                marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
                return [_block("\n".join(f"- {marks[s]} {t}" for t, s in items))] if items else []
            case TextView(body=body) if body:
                return [_block(body)]
            case AgentView(session_id=session, status=status, lines=lines):
                said = [f"{status}" if status else "", *lines[-AGENT_LINES:]]
                said.append(f"session {session}")
                return [_block("\n".join(line for line in said if line))]
        if entry.denial:
            return [_block(entry.denial)]
        return []

    def _locations(self, view: Presentation) -> list[ToolCallLocation]:
        if isinstance(view, DiffView):
            return [ToolCallLocation(path=self._absolute(f.path)) for f in view.files]
        return []

    def _absolute(self, path: str) -> str:
        return str(self.cwd / Path(path).expanduser())

    def _plan_entries(self) -> list[PlanEntry]:
        entries: list[PlanEntry] = []
        for view in self.fold.panels.values():
            if isinstance(view, ChecklistView):
                entries.extend(
                    PlanEntry(content=text, priority="medium", status=status)
                    for text, status in view.items
                )
        return entries


def diff_texts(diff: str) -> dict[str, Any]:
    """The ``oldText``/``newText`` of a unified diff's hunks (what the editor diffs
    again to show it): the lines around each change, not the whole file. A diff that
    only adds (a new file) has no old text."""
    old: list[str] = []
    new: list[str] = []
    in_hunks = False
    removed_or_kept = False
    for line in diff.splitlines():
        if line.startswith("@@"):
            if in_hunks and (old or new):
                old.append("…")
                new.append("…")
            in_hunks = True
            continue
        if not in_hunks or line.startswith("\\"):
            continue  # the ---/+++ headers; "\ No newline at end of file"
        tag, text = line[:1], line[1:]
        if tag == "+":
            new.append(text)
        elif tag == "-":
            old.append(text)
            removed_or_kept = True
        else:
            old.append(text)
            new.append(text)
            removed_or_kept = True
    return {
        "old_text": "\n".join(old) if removed_or_kept else None,
        "new_text": "\n".join(new),
    }


def usage_of(usage: TokenUsage | None) -> Usage | None:
    if usage is None:
        return None
    return Usage(
        total_tokens=usage.total_tokens,
        input_tokens=usage.billed_input_tokens,
        output_tokens=usage.output_tokens,
        thought_tokens=usage.reasoning_tokens,
        cached_read_tokens=usage.cache_read_tokens,
        cached_write_tokens=usage.cache_write_tokens,
    )


def _title(view: Presentation) -> str:
    match view:
        case CommandView(command=command, description=description):
            return description or command
        case _:
            return view.title


def _text(text: str) -> TextContentBlock:
    return TextContentBlock(type="text", text=text)


def _block(text: str) -> ContentToolCallContent:
    return ContentToolCallContent(type="content", content=_text(text))


def _terminal(terminal_id: str) -> TerminalToolCallContent:
    return TerminalToolCallContent(type="terminal", terminal_id=terminal_id)


def said(text: str) -> AgentMessageChunk:
    return AgentMessageChunk(session_update="agent_message_chunk", content=_text(text))
