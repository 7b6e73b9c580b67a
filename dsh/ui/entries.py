"""What a transcript shows, folded from session events alone.

Every UI (the Textual app, the plain line mode) feeds each session event, live or
replayed from the log, to one :class:`TranscriptFold`. The fold keeps a list of
entries (a user message, an answer streaming in, reasoning, a tool call and its
status, a notice, a turn's footer), the session's status (model, state, tokens,
cost, cache hits), the queued follow-ups and the panels plugins show beside the
prompt, and says which entries each event added or changed. Since nothing else feeds
it, a resumed session looks exactly like a live one. The core's own event types are
folded here; a plugin's type by what its type declares (a title, a paid call) and the
fold step it registered (:mod:`dsh.transcript`).

Every text the fold keeps is safe to show on a terminal: the control characters and
escape sequences in what the model, a tool or a stored log said are made visible by
:func:`dsh.control_chars.visible` as they come in. Only a tool call's ``arguments``
stay as sent (they are JSON to parse); whatever shows a value parsed from them passes
it through ``visible`` too (see :mod:`dsh.ui.render`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from dsh.control_chars import visible
from dsh.llm import (
    BlockEnd,
    BlockStart,
    PluginSource,
    ReasoningBlock,
    ReasoningDelta,
    ShellSource,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolResultBlock,
    UserMessage,
    joined_text,
)
from dsh.session import Pricing, SessionEvent, Spend, title_of
from dsh.session.cache_events import CacheIdle, PrefixChanged, money
from dsh.session.events import event_type, is_core_type
from dsh.session.payloads import (
    ApprovalRequested,
    ApprovalResolved,
    AssistantChunk,
    AssistantMessageData,
    CommandDone,
    CommandRun,
    Corrupt,
    GrantsIgnored,
    HistoryRewound,
    InboxClaimed,
    InboxDiscarded,
    InboxEnqueued,
    InboxUpdated,
    LlmRetry,
    ModelRenamed,
    RequestContext,
    SessionMoved,
    ToolCall,
    ToolProgress,
    ToolResult,
    TurnAborted,
    TurnBlocked,
    TurnCompleted,
    TurnEnd,
    TurnFailed,
    TurnInterrupted,
    TurnMaxSteps,
    TurnMaxTokens,
    TurnStart,
)
from dsh.tools.presentation import Presentation
from dsh.transcript import NoticeLevel, fold_step
from dsh.ui.session_status import RetryStatus, State, Status

PROGRESS_CHARS = 300
"""A progress line is cut here: a log may be written by hand."""

log = logging.getLogger(__name__)
E = TypeVar("E", bound="Entry")

ToolStatus = Literal["awaiting-approval", "running", "done", "failed", "denied", "cancelled"]
DSH_NOTE = ("dsh", "notice")
"""The source (plugin, form) of the messages dsh itself enters for the model
(:mod:`dsh.agent.interruption`)."""
DENIAL_CODES = frozenset({"DENIED", "BLOCKED"})
CANCEL_CODES = frozenset({"TOOL_CANCELLED", "ABORTED", "ABORTED_BEFORE_DISPATCH"})


@dataclass(eq=False)
class Entry:
    key: str
    seq: int
    """The seq of the event that started the entry: entries are in seq order."""


@dataclass(eq=False)
class UserEntry(Entry):
    text: str
    steering: bool = False


@dataclass(eq=False)
class ContextEntry(Entry):
    """Context a plugin entered for the model (instructions, a notice, a summary)."""

    plugin: str
    form: str | None
    text: str


@dataclass(eq=False)
class StreamedEntry(Entry):
    """Text arriving in pieces: an answer or a block of reasoning."""

    turn: int
    step: int
    parts: list[str] = field(default_factory=list)
    done: bool = False

    @property
    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""


@dataclass(eq=False)
class AnswerEntry(StreamedEntry):
    pass


@dataclass(eq=False)
class ReasoningEntry(StreamedEntry):
    pass


@dataclass(eq=False)
class ToolEntry(Entry):
    call_id: str
    name: str
    arguments: str
    status: ToolStatus = "running"
    started_ms: int = 0
    ended_ms: int | None = None
    result: str | None = None
    error_code: str | None = None
    meta: Any = None
    approval: str | None = None
    """The summary shown when it asked for approval."""
    denial: str | None = None
    progress: str | None = None
    """What the running call last said of its progress."""

    @property
    def is_error(self) -> bool:
        return self.status in ("failed", "denied", "cancelled")


@dataclass(eq=False)
class NoticeEntry(Entry):
    level: NoticeLevel
    text: str


@dataclass(eq=False)
class ViewEntry(Entry):
    """What a plugin's fold step shows for one of its events: rendered as a tool's
    presentation is, its texts made safe at rendering."""

    view: Presentation


@dataclass(eq=False)
class TurnFooter(Entry):
    turn: int
    outcome: Literal["completed", "cancelled", "failed", "stopped"]
    reason: str | None
    usage: TokenUsage | None
    cost: float | None
    duration_ms: int


@dataclass
class Queued:
    item_id: str
    text: str
    placement: Literal["queued", "steering"]


class TranscriptFold:
    """Session events in, entries out. ``apply`` returns the entries the event added
    or changed (in order); ``entries`` holds them all."""

    def __init__(self, *, cost: Pricing | None = None) -> None:
        self.entries: list[Entry] = []
        self.status = Status()
        self.queued: dict[str, Queued] = {}
        self.panels: dict[str, Presentation] = {}
        """What plugins show beside the prompt while a turn runs, by name."""
        self._cost = cost
        self._by_key: dict[str, Entry] = {}
        self._tools_by_request: dict[str, ToolEntry] = {}
        self._turn_started: dict[int, int] = {}
        self._spent = Spend()
        self._turn_spent = Spend()
        self._stepped: list[Entry] | None = None
        """The entries the running fold step added, while one runs."""
        self._starts: dict[int, int] = {}
        """Each turn's ``turn/start`` seq, while a rewind can go back to it."""
        self.rewinds = 0
        """How many rewinds dropped entries: a view that drew entries redraws when it
        changes (the dropped ones are no longer in :attr:`entries`)."""
        self._counted_from = 0
        """Paid events before this seq are in the session's totals already (:meth:`seed`)."""
        self.rewind_holds: Callable[[int], bool] | None = None
        """Whether the rewind logged at a seq holds, for a fold that started after the
        turn it goes back to (:meth:`dsh.session.Session.rewind_holds`)."""
        self.older: Callable[[], list[Entry]] | None = None
        """Where the entries of the events before the first folded one come from, a
        stretch at a time (newest first), when the fold started part way into a long
        log; None once there are none left (or it folded the whole log)."""

    def seed(self, spent: Spend, counted_from: int) -> None:
        """Start from totals already counted: what the first ``counted_from`` events of
        the session paid for. Those events may still be folded (for their entries and
        their turn's footer); they are not counted again."""
        self._spent = spent
        self._counted_from = counted_from
        self.status.usage, self.status.cost = spent.usage, spent.cost
        self.status.cache_saved = spent.saved

    def forget_entries(self) -> None:
        """Drop every entry, keeping the status, the queue and what is known of the
        turns: after folding the events before a window only for their state."""
        self.entries = []
        self._by_key = {}
        self._tools_by_request = {}
        self.rewinds = 0

    def prepend(self, entries: list[Entry]) -> None:
        """Put older entries (of events before those folded) in front of the rest."""
        self.entries[0:0] = entries
        for entry in entries:
            self._by_key.setdefault(entry.key, entry)

    def get(self, key: str) -> Entry | None:
        return self._by_key.get(key)

    def apply(self, event: SessionEvent) -> list[Entry]:
        data = event.data
        match data:
            case UserMessage():
                return self._user(event, data, steering=event.type == "steering/message")
            case AssistantChunk():
                return self._chunk(event, data)
            case AssistantMessageData():
                return self._message(event, data)
            case ToolCall():
                return self._tool_call(event, data)
            case ApprovalRequested():
                return self._approval_asked(data)
            case ApprovalResolved():
                return self._approval_resolved(data)
            case ToolProgress():
                return self._tool_progress(data)
            case ToolResult():
                return self._tool_result(event, data)
            case TurnStart():
                self._starts[data.turn] = event.seq
                self._turn_started[data.turn] = event.time
                self._turn_spent = Spend()
                self.panels = {}
                self._set_state("thinking")
            case TurnEnd():
                return self._turn_end(event, data)
            case RequestContext():
                self.status.provider, self.status.model = (
                    visible(data.provider),
                    visible(data.model),
                )
                self.status.context_window = data.context_window
                self._set_state("thinking")
            case LlmRetry():
                # Until the next attempt streams, the status says it is a retry.
                self._set_state("retrying")
                self.status.retry = RetryStatus.of(event, data)
                text = visible(data.notice())
                key = f"retry:{data.retry_id}"
                shown = self._by_key.get(key)
                if isinstance(shown, NoticeEntry):
                    # The same request tried again: its one notice says the latest
                    # attempt (a second entry under the key would never be drawn).
                    shown.text = text
                    return [shown]
                return [self._add(NoticeEntry(key, event.seq, "warning", text))]
            case InboxEnqueued():
                self.queued[data.item_id] = Queued(
                    data.item_id, visible(data.message.text()), data.placement
                )
            case InboxUpdated():
                item = self.queued.get(data.item_id)
                if item is not None:
                    item.text = visible(data.message.text())
            case InboxClaimed() | InboxDiscarded():
                for item_id in data.item_ids:
                    self.queued.pop(item_id, None)
                if isinstance(data, InboxDiscarded) and data.reason == "blocked":
                    text = visible(f"Your message was blocked: {data.detail or 'no reason given'}")
                    return [
                        self._add(NoticeEntry(f"blocked:{event.seq}", event.seq, "error", text))
                    ]
            case Corrupt():
                text = visible(
                    f"Line {data.line} of the session log could not be read: {data.error}"
                )
                return [self._add(NoticeEntry(f"corrupt:{event.seq}", event.seq, "error", text))]
            case GrantsIgnored():
                text = visible(data.notice())
                return [self._add(NoticeEntry(f"grants:{event.seq}", event.seq, "warning", text))]
            case ModelRenamed():
                text = visible(data.notice())
                return [self._add(NoticeEntry(f"renamed:{event.seq}", event.seq, "info", text))]
            case PrefixChanged() | CacheIdle():
                text = visible(data.notice())
                return [self._add(NoticeEntry(f"cache:{event.seq}", event.seq, "info", text))]
            case SessionMoved():
                text = visible(data.notice())
                return [self._add(NoticeEntry(f"moved:{event.seq}", event.seq, "warning", text))]
            case HistoryRewound():
                return self._rewound(event, data)
            case CommandRun():
                label = visible(f"/{data.name}" + (f" {data.args}" if data.args else ""))
                entry = NoticeEntry(f"command:{data.command_id}", event.seq, "info", label)
                return [self._add(entry)]
            case CommandDone():
                entry_ = self._by_key.get(f"command:{data.command_id}")
                if isinstance(entry_, NoticeEntry) and data.text:
                    entry_.text = f"{entry_.text}\n{visible(data.text)}"
                    entry_.level = "error" if data.kind == "error" else "info"
                    return [entry_]
            case _:
                return self._plugin_event(event)
        return []

    # ------------------------------------------------------------------ plugin events

    def _plugin_event(self, event: SessionEvent) -> list[Entry]:
        """An event of a type the core does not fold: what its type declares, then its
        plugin's fold step. An opaque one (its plugin not loaded) shows nothing."""
        spec = event_type(event.type)
        if spec is None or is_core_type(spec.name) or not isinstance(event.data, spec.model):
            return []
        title = title_of(event)
        if title is not None:
            self.status.title = visible(title)
        self._count(event)
        step = fold_step(event.type)
        if step is None:
            return []
        added: list[Entry] = []
        self._stepped = added
        try:
            step(event, self)
        except Exception:  # a plugin's bug must not break the transcript
            log.exception("the fold step of %s failed on event %s", event.type, event.seq)
        finally:
            self._stepped = None
        return added

    def notice(
        self, event: SessionEvent, level: NoticeLevel, text: str, *, key: str | None = None
    ) -> None:
        entry = self._stepped_entry(event, key, NoticeEntry)
        if entry is None:
            entry = NoticeEntry(self._key(event, key), event.seq, level, visible(text))
        entry.level, entry.text = level, visible(text)
        self._stepped_add(entry)

    def view(self, event: SessionEvent, view: Presentation, *, key: str | None = None) -> None:
        entry = self._stepped_entry(event, key, ViewEntry)
        if entry is None:
            entry = ViewEntry(self._key(event, key), event.seq, view)
        entry.view = view
        self._stepped_add(entry)

    def set_activity(self, activity: str) -> None:
        self._set_state(activity)

    def set_context_tokens(self, tokens: int) -> None:
        self.status.context_tokens = tokens

    def set_panel(self, name: str, view: Presentation | None) -> None:
        if view is None:
            self.panels.pop(name, None)
        else:
            self.panels[name] = view

    def _key(self, event: SessionEvent, key: str | None) -> str:
        """A plugin's own key, within its types' namespace (the same again, from any of
        its types, changes that entry), else one new entry per call: the event's type,
        seq, and which of its entries this is."""
        if key is not None:
            return f"{event.type.partition('/')[0]}/:{key}"
        return f"{event.type}:{event.seq}.{len(self._stepped or ())}"

    def _stepped_entry(self, event: SessionEvent, key: str | None, kind: type[E]) -> E | None:
        """The entry a step's own ``key`` already names, to be changed in place."""
        if self._stepped is None:
            raise RuntimeError("entries are added by fold steps, while they run")
        found = self._by_key.get(self._key(event, key)) if key is not None else None
        if found is not None and not isinstance(found, kind):
            raise ValueError(f"key {key!r} names a {type(found).__name__}, not a {kind.__name__}")
        return found

    def _stepped_add(self, entry: Entry) -> None:
        assert self._stepped is not None
        if entry.key not in self._by_key:
            self._add(entry)
        self._stepped.append(entry)

    # ------------------------------------------------------------------ pieces

    def _add(self, entry: Entry) -> Entry:
        self.entries.append(entry)
        self._by_key[entry.key] = entry
        return entry

    def _set_state(self, state: State, tool: str | None = None) -> None:
        self.status.state, self.status.tool = state, tool
        if state != "retrying":
            self.status.retry = None

    def _user(self, event: SessionEvent, message: UserMessage, *, steering: bool) -> list[Entry]:
        source = message.source
        if isinstance(source, ShellSource):
            return [self._add(self._shell(event, source))]
        if isinstance(source, PluginSource) and (source.plugin, source.form) == DSH_NOTE:
            # What dsh told the model of its own accord (the user interrupted, an
            # answer was cut off): shown, so the person knows what the model was told.
            text = visible(message.text())
            return [self._add(NoticeEntry(f"note:{event.seq}", event.seq, "info", text))]
        if isinstance(source, PluginSource):
            entry: Entry = ContextEntry(
                f"context:{event.seq}",
                event.seq,
                source.plugin,
                source.form,
                visible(message.text()),
            )
        else:
            text = visible(message.text())
            entry = UserEntry(f"user:{event.seq}", event.seq, text, steering=steering)
        return [self._add(entry)]

    def _shell(self, event: SessionEvent, source: ShellSource) -> ToolEntry:
        """A command the person ran from the prompt: the card of the tool it ran
        through, from the one event that logged it, as it ended."""
        meta = source.meta
        took = meta.get("durationMs") if isinstance(meta, dict) else None
        code = source.error_code
        result = visible(source.result)
        entry = ToolEntry(
            f"shell:{event.seq}",
            event.seq,
            source.call_id,
            visible(source.tool),
            source.arguments,
            started_ms=event.time - (took if isinstance(took, int) else 0),
            ended_ms=event.time,
            result=result,
            error_code=code,
            meta=meta,
        )
        if code in DENIAL_CODES:
            entry.status, entry.denial = "denied", result
        elif code in CANCEL_CODES:
            entry.status = "cancelled"
        elif code is not None:
            entry.status = "failed"
        else:
            entry.status = "done"
        return entry

    def _chunk(self, event: SessionEvent, data: AssistantChunk) -> list[Entry]:
        chunk = data.chunk
        key = f"block:{data.turn}.{data.step}.{getattr(chunk, 'index', 0)}"
        match chunk:
            case BlockStart(block_type="text"):
                self._set_state("answering")
                return [self._add(AnswerEntry(key, event.seq, data.turn, data.step))]
            case BlockStart(block_type="reasoning"):
                self._set_state("thinking")
                return [self._add(ReasoningEntry(key, event.seq, data.turn, data.step))]
            case TextDelta(text=text) | ReasoningDelta(text=text):
                entry = self._by_key.get(key)
                if entry is None:  # a delta without its start (a log cut short): start one
                    kind = AnswerEntry if isinstance(chunk, TextDelta) else ReasoningEntry
                    entry = self._add(kind(key, event.seq, data.turn, data.step))
                assert isinstance(entry, StreamedEntry)
                entry.parts.append(visible(text))
                return [entry]
            case BlockEnd():
                entry = self._by_key.get(key)
                if isinstance(entry, StreamedEntry):
                    entry.done = True
                    return [entry]
        return []

    def _message(self, event: SessionEvent, data: AssistantMessageData) -> list[Entry]:
        """The whole answer: what streamed is replaced by the final text, so a log
        whose chunks were compacted away still shows the answer."""
        changed: list[Entry] = []
        for index, block in enumerate(data.message.content):
            key = f"block:{data.turn}.{data.step}.{index}"
            if isinstance(block, TextBlock | ReasoningBlock):
                kind = AnswerEntry if isinstance(block, TextBlock) else ReasoningEntry
                entry = self._by_key.get(key)
                if not isinstance(entry, kind):
                    entry = self._add(kind(key, event.seq, data.turn, data.step))
                assert isinstance(entry, StreamedEntry)
                entry.parts[:] = [visible(block.text)]
                entry.done = True
                changed.append(entry)
        if data.usage is not None:
            self.status.context_tokens = data.usage.billed_input_tokens + data.usage.output_tokens
        self._count(event)
        return changed

    def _count(self, event: SessionEvent) -> None:
        """A paid model call or request into the session's and the open turn's totals."""
        if event.seq < self._counted_from:  # in the seeded totals already
            self._turn_spent.count(event, self._cost)
            return
        if self._spent.count(event, self._cost):
            self._turn_spent.count(event, self._cost)
            self.status.usage, self.status.cost = self._spent.usage, self._spent.cost
            self.status.cache_saved = self._spent.saved

    def _tool_call(self, event: SessionEvent, data: ToolCall) -> list[Entry]:
        entry = ToolEntry(
            f"tool:{data.call_id}",
            event.seq,
            data.call_id,
            visible(data.name),
            data.arguments,
            started_ms=event.time,
        )
        self._set_state("running-tool", data.name)
        return [self._add(entry)]

    def _approval_asked(self, data: ApprovalRequested) -> list[Entry]:
        entry = self._by_key.get(f"tool:{data.call_id}") if data.call_id else None
        if not isinstance(entry, ToolEntry):
            return []
        self._tools_by_request[data.request_id] = entry
        entry.status, entry.approval = "awaiting-approval", visible(data.summary)
        self._set_state("waiting-for-you", entry.name)
        return [entry]

    def _approval_resolved(self, data: ApprovalResolved) -> list[Entry]:
        entry = self._tools_by_request.pop(data.request_id, None)
        if entry is None or entry.status != "awaiting-approval":
            return []
        if data.outcome == "deny":
            entry.status, entry.denial = "denied", visible(data.reason) if data.reason else None
        else:
            entry.status = "running"
            self._set_state("running-tool", entry.name)
        return [entry]

    def _tool_progress(self, data: ToolProgress) -> list[Entry]:
        entry = self._by_key.get(f"tool:{data.call_id}")
        if not isinstance(entry, ToolEntry) or entry.status != "running":
            return []
        entry.progress = visible(" ".join(data.message.split())[:PROGRESS_CHARS], one_line=True)
        return [entry]

    def _tool_result(self, event: SessionEvent, data: ToolResult) -> list[Entry]:
        entry = self._by_key.get(f"tool:{data.message.source.call_id}")
        if not isinstance(entry, ToolEntry):
            return []
        entry.ended_ms = event.time
        block = data.message.content[0]
        entry.result = visible(
            joined_text(block.content) if isinstance(block, ToolResultBlock) else block_text(block)
        )
        entry.meta = data.meta
        code = data.error.code if data.error else None
        entry.error_code = code
        if code in DENIAL_CODES:
            entry.status = "denied"
        elif code in CANCEL_CODES:
            entry.status = "cancelled"
        elif code is not None or getattr(block, "is_error", False):
            entry.status = "failed"
        else:
            entry.status = "done"
        self._set_state("thinking")
        return [entry]

    def _rewound(self, event: SessionEvent, data: HistoryRewound) -> list[Entry]:
        """The rewound turns leave the transcript (they stay in the log, and in the
        session's spend: they were paid for); one notice says where it went back to."""
        start = self._starts.get(data.turn)
        if start is None and self.rewind_holds is not None:
            holds = self.rewind_holds(event.seq)  # its turn started before the fold did
        else:
            holds = start == data.to_seq
        if not holds:
            # As the session does: a rewind the log holds no start for changes nothing.
            text = f"A rewind to before turn {data.turn} could not be applied: ignored."
            return [self._add(NoticeEntry(f"rewound:{event.seq}", event.seq, "warning", text))]
        self._starts = {turn: seq for turn, seq in self._starts.items() if seq < data.to_seq}
        kept = [entry for entry in self.entries if entry.seq < data.to_seq]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._by_key = {entry.key: entry for entry in kept}
            self._tools_by_request = {
                request: entry
                for request, entry in self._tools_by_request.items()
                if entry.seq < data.to_seq
            }
            self.rewinds += 1
        self._turn_started = {
            turn: started for turn, started in self._turn_started.items() if turn < data.turn
        }
        # Measured for a history that is no longer sent: unknown until the next request.
        self.status.context_tokens = None
        self._set_state("idle")
        text = f"Rewound to before turn {data.turn}."
        return [self._add(NoticeEntry(f"rewound:{event.seq}", event.seq, "info", text))]

    def _turn_end(self, event: SessionEvent, data: TurnEnd) -> list[Entry]:
        outcome: Literal["completed", "cancelled", "failed", "stopped"]
        reason: str | None = None
        match data.reason:
            case TurnCompleted():
                outcome = "completed"
            case TurnAborted():
                outcome, reason = "cancelled", "cancelled"
            case TurnFailed(error=failure):
                outcome, reason = "failed", visible(failure.message)
            case TurnMaxSteps(limit=limit):
                outcome, reason = "stopped", f"stopped after {limit} steps"
            case TurnMaxTokens():
                outcome, reason = "stopped", "the answer reached the output token limit"
            case TurnBlocked():
                outcome, reason = "stopped", "blocked by a hook"
            case TurnInterrupted():
                outcome, reason = "cancelled", "interrupted (dsh stopped during the turn)"
            case _:
                outcome, reason = "stopped", str(getattr(data.reason, "kind", "ended"))
        for entry in self.entries[-8:]:  # a cancelled stream leaves its blocks open
            if isinstance(entry, StreamedEntry):
                entry.done = True
        started = self._turn_started.pop(data.turn, event.time)
        footer = TurnFooter(
            f"turn-end:{data.turn}:{event.seq}",
            event.seq,
            data.turn,
            outcome,
            reason,
            self._turn_spent.usage,
            self._turn_spent.cost,
            max(0, event.time - started),
        )
        self._set_state("idle")
        changed: list[Entry] = [self._add(footer)]
        for entry in self.entries:
            if isinstance(entry, ToolEntry) and entry.status in ("running", "awaiting-approval"):
                entry.status = "cancelled" if outcome == "cancelled" else "failed"
                changed.append(entry)
        return changed


def block_text(block: object) -> str:
    return str(getattr(block, "text", ""))


def format_tokens(count: int) -> str:
    if count < 1000:
        return str(count)
    if count < 100_000:
        return f"{count / 1000:.1f}k"
    return f"{count // 1000}k"


def format_cost(cost: float | None) -> str:
    return "" if cost is None else money(cost)
