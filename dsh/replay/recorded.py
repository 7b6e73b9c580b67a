"""What a session log says happened, in the shape a replay needs.

A replay feeds the loop what came from outside it (the person's prompts, steering,
cancels; the model's streams; the tools' results; the context entries' texts) and
checks what the loop made of them (the requests, the tool calls). This module reads
those inputs and expectations out of a log:

- each conversation request as the model got it (:func:`dsh.testing.reconstruct`
  rebuilds it from the ``request/header`` and the history at that point), with the
  chunks it was answered with;
- every tool call and its result, by call id;
- the person's inputs, each tied to the moment the loop waited on something outside
  it just before it: before chunk ``j`` of request ``k`` was served, before a tool's
  result was handed back, or while the agent was idle after turn ``t``;
- the text of each context entry as of each step, and the answers of calls made
  beside the conversation (a summary, a title) that an event type declares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from dsh.llm import (
    Block,
    Finish,
    FinishAborted,
    GenerateOptions,
    LlmFailure,
    PluginSource,
    StreamChunk,
    UserMessage,
)
from dsh.permission_modes import PermissionMode
from dsh.session import (
    AssistantChunk,
    EpochHeader,
    RequestHeader,
    RestoreStarted,
    SessionEvent,
    SessionHeader,
    SideAnswer,
    StepEnd,
    ToolCall,
    ToolResult,
    TurnAborted,
    TurnEnd,
    TurnInterrupted,
    side_answer_of,
)
from dsh.session.payloads import (
    AgentOptionsSet,
    ApprovalRequested,
    ApprovalResolved,
    CancelByUser,
    CommandDone,
    CommandRun,
    HistoryRewound,
    InboxDiscarded,
    InboxEnqueued,
    InboxUpdated,
    LlmRetry,
    PermissionModeSet,
    StepStart,
    TurnStart,
)
from dsh.session.repair import closing_events
from dsh.testing.reconstruct import rebuild_requests


@dataclass(frozen=True)
class Send:
    """A prompt or steering the person sent (``inbox/enqueued``)."""

    item_id: str
    message: UserMessage
    placement: Literal["queued", "steering"]


@dataclass(frozen=True)
class Edit:
    item_id: str
    message: UserMessage


@dataclass(frozen=True)
class Withdraw:
    """A queued item the person removed."""

    item_id: str


@dataclass(frozen=True)
class Cancel:
    """The person stopped the turn. ``exact``: the log marks the moment itself (the
    queue it cleared), else the stream it cut or the call it stopped. A cancel that
    kept a queue (``keep_inbox``) leaves no mark of its own and is replayed as one that
    found the queue empty."""

    exact: bool
    at_stream_end: bool = False
    """It came as the last step's answer ended, whole and calling no tool, before the
    loop looked (a front end closed as the answer arrived): the loop kept the answer
    and stopped the turn."""


@dataclass(frozen=True)
class RunCommand:
    """A slash command the person ran (``command/run``): run again, as typed."""

    name: str
    args: str
    command_id: str = ""
    """The recorded command's id: what it did is found by it (``Recording.rewinds``)."""


@dataclass(frozen=True)
class SetMode:
    """The permission mode changed (``permissions/mode``), or a turn started in another
    mode than the log had last said (a resume with ``--permission-mode``)."""

    mode: PermissionMode


@dataclass(frozen=True)
class SetOptions:
    """The agent's options changed (``agent/options``) other than by a command the
    replay runs again: a resume with ``--model``, an editor's model picker, a fork."""

    changes: dict[str, str | int | float | None]


Input = Send | Edit | Withdraw | Cancel | RunCommand | SetMode | SetOptions


@dataclass(frozen=True)
class RecordedRewind:
    """A ``/rewind`` that took the conversation back to before ``turn``, the code too
    when ``code`` (its ``history/rewound`` names a restore)."""

    turn: int
    code: bool


@dataclass(frozen=True)
class ChunkPoint:
    """Before chunk ``chunk`` of request ``request`` (both 0-based) is served; one past
    the last: once the last is logged, as the stream ends."""

    request: int
    chunk: int


@dataclass(frozen=True)
class ToolPoint:
    """Before the result of call ``call_id`` (its ``occurrence``-th) is handed back."""

    call_id: str
    occurrence: int


@dataclass(frozen=True)
class IdlePoint:
    """Once ``turns`` turns have ended and the agent is idle."""

    turns: int


Point = ChunkPoint | ToolPoint | IdlePoint


@dataclass(frozen=True)
class RecordedRequest:
    """One conversation request: what was sent and what answered it."""

    options: GenerateOptions
    turn: int
    step: int
    chunks: tuple[StreamChunk, ...]
    times: tuple[int, ...]
    """Each chunk's log time (epoch ms), for recorded pacing."""
    failures: tuple[LlmFailure, ...] = ()
    """The attempts that failed before the one the chunks are (``llm/retry``, each
    retried): served first, one an attempt, so this dsh retries where it did."""


@dataclass(frozen=True)
class RecordedCall:
    turn: int
    step: int
    call: ToolCall
    result: ToolResult | None
    repaired: bool = False
    """The result is crash repair's (the process was killed while the call ran, or
    before it started): the replay's own repair is to write it, not the stand-in."""


LOOP_TYPES = frozenset(
    {
        "turn/start",
        "step/start",
        "user/message",
        "request/header",
        "request/context",
        "assistant/chunk",
        "assistant/message",
        "tool/call",
        "tool/result",
        "step/end",
    }
)
"""Events a replaying loop logs as many times, in the same order, as the recorded one
did: a kill's place is counted in them (a tool's progress, a checkpoint, an MCP
server's notice are the world's, and come or not in a replay)."""


@dataclass(frozen=True)
class Kill:
    """The process stopped inside a turn without closing it (killed): the next open's
    crash repair closed the turn (``turn/end`` "interrupted"), or would have (a log read
    as it is, repaired in memory). The replay stops its runtime where the killed
    process's log ends: once it has logged the ``count``-th event of type ``anchor``
    (one of :data:`LOOP_TYPES`), then events of the types ``then``, in order."""

    seq: int
    """The last event the killed process wrote."""
    anchor: str
    count: int
    then: tuple[str, ...]
    turn: int
    request: int
    """The request whose stream was open when it died (0-based), or -1."""
    resumed: bool
    """The session was opened again after it (``session/end-seed``): the replay
    resumes it in a new runtime, whose store runs the same repair."""


@dataclass
class Recording:
    """A session log read for replay."""

    header: SessionHeader
    events: Sequence[SessionEvent]
    requests: list[RecordedRequest] = field(default_factory=list)
    calls: list[RecordedCall] = field(default_factory=list)
    inputs: dict[Point, list[Input]] = field(default_factory=dict)
    context: list[tuple[int, str, str, str]] = field(default_factory=list)
    """(global step number, entry name, form, text) of each context message entered."""
    side_answers: list[SideAnswer] = field(default_factory=list)
    turn_ends: list[TurnEnd] = field(default_factory=list)
    approvals: dict[str, str] = field(default_factory=dict)
    """Each call's recorded approval outcome (``allow-once``...), by call id."""
    notes: list[str] = field(default_factory=list)
    """What this replay cannot reproduce of the log, said in words."""
    prompt_contexts: dict[str, list[UserMessage]] = field(default_factory=dict)
    """What ``agent/prompt-submit`` listeners entered after each prompt (a mention's
    file as it was), by the prompt's message id."""
    prompt_contents: dict[str, tuple[Block, ...]] = field(default_factory=dict)
    """Each prompt's content as the log entered it, by the prompt's id: with what a
    listener attached from the world (an image pasted, its bytes then)."""
    command_sends: dict[str, list[Send]] = field(default_factory=dict)
    """What each command sent (a Markdown command's prompt as the model got it), by
    command id: sent as recorded when the replaying dsh has no such command."""
    rewinds: dict[str, RecordedRewind] = field(default_factory=dict)
    """What each ``/rewind`` that took the conversation back did, by command id."""
    start_mode: PermissionMode | None = None
    """The permission mode the first turn started in (None: the log does not say)."""
    resumes: set[int] = field(default_factory=set)
    """Where the session was opened again (``session/end-seed``: a ``--resume``, by a
    new process), by how many turns had ended: the replay resumes there too."""
    kills: list[Kill] = field(default_factory=list)
    """Where a process was killed inside a turn, in order."""

    @property
    def first_header(self) -> EpochHeader | None:
        for event in self.events:
            if isinstance(event.data, RequestHeader) and event.data.header is not None:
                return event.data.header
        return None

    @property
    def idle_points(self) -> list[IdlePoint]:
        return sorted((p for p in self.inputs if isinstance(p, IdlePoint)), key=lambda p: p.turns)

    def context_at(self, step: int) -> dict[str, tuple[str, str]]:
        """Each context entry's form and latest text entered up to global step
        ``step``, in the order the entries were first entered."""
        known: dict[str, tuple[str, str]] = {}
        for number, name, form, text in self.context:
            if number > step:
                break
            known[name] = (form, text)
        return known

    def result_for(self, call_id: str, occurrence: int) -> RecordedCall | None:
        seen = 0
        for recorded in self.calls:
            if recorded.call.call_id == call_id:
                if seen == occurrence:
                    return recorded
                seen += 1
        return None


def read_recording(header: SessionHeader, events: Sequence[SessionEvent]) -> Recording:
    """The recording of a stored log (its plugins' vocabulary registered first, so
    their events read as payloads rather than opaque data)."""
    recording = Recording(header, events)
    rebuilt = rebuild_requests(events)
    pending: list[Input] = []
    request = -1
    chunk = 0
    step_number = 0
    turns_ended = 0
    turn_open = False
    entering = False
    """Between a step's start and its request: the messages the step entered."""
    turn = step = 0
    asked_in = (0, 0)
    """The turn and step of the request being read."""
    chunks: list[StreamChunk] = []
    times: list[int] = []
    retries: list[LlmRetry] = []
    call_seen: dict[str, int] = {}
    calls_by_seq: dict[int, RecordedCall] = {}
    cancels = _cancel_positions(events)
    requested: dict[str, str] = {}
    commands_running: set[str] = set()
    mode: PermissionMode | None = None
    """The permission mode in force, as far as the log has said."""
    prompt: str | None = None
    """The id of the prompt just entered, while what came with it is being entered."""
    repairs = _repairs(events)
    repaired = {seq for first, last in repairs for seq in range(first, last + 1)}
    restores: dict[str, str] = {}
    """The command each restore was begun by (``checkpoint/restoring``), by its id."""

    def attach(point: Point) -> None:
        if pending:
            recording.inputs.setdefault(point, []).extend(pending)
            pending.clear()

    def close_request() -> None:
        if request >= 0 and len(recording.requests) == request:
            recording.requests.append(
                RecordedRequest(
                    rebuilt[request],
                    *asked_in,
                    tuple(chunks),
                    tuple(times),
                    tuple(r.failure for r in retries),
                )
            )

    for event in events:
        if event.seq in repaired:
            # What the next open's crash repair wrote (a killed process's turn closed):
            # no input was due there; the calls it answered and the turn's end are
            # compared with what the replay's own repair writes.
            _read_repair(recording, event, calls_by_seq)
            if event.type == "turn/end":
                turns_ended += 1
                turn_open = False
            continue
        cancel = cancels.get(event.seq)
        if cancel is not None:
            if cancel.exact:
                pending.append(cancel)
            else:
                # Only the stream it cut or the call it stopped marks it: nothing of the
                # loop is logged between the cancel and that mark, so what the person
                # sent since the last chunk came after it (sent with the cancel).
                pending.insert(0, cancel)
            if cancel.at_stream_end and request >= 0:
                attach(ChunkPoint(request, chunk))
        data = event.data
        if event.type != "user/message":
            prompt = None
        match event.type:
            case "turn/start" if isinstance(data, TurnStart):
                if data.mode is not None:
                    if recording.start_mode is None:
                        recording.start_mode = mode = data.mode
                    elif data.mode != mode:
                        # Changed with no event of its own (a resume in another mode):
                        # before what started the turn, since the turn ran in it.
                        pending.insert(0, SetMode(data.mode))
                        mode = data.mode
                attach(IdlePoint(turns_ended))
                turn_open, turn = True, data.turn
            case "session/end-seed" if not turn_open:
                recording.resumes.add(turns_ended)
                for command_id in commands_running:
                    # Its process was killed before it ended; what it sent or did
                    # from here on is the new process's (a restore finished on resume).
                    recording.notes.append(
                        f"a command ({_command_name(events, command_id)}) was running when"
                        " its process was killed: the replay runs it to its end"
                    )
                commands_running.clear()
            case "turn/end" if isinstance(data, TurnEnd):
                turns_ended += 1
                turn_open = False
                recording.turn_ends.append(data)
            case "step/start" if isinstance(data, StepStart):
                entering = True
                step_number += 1
                step = data.step
            case "request/header":
                entering = False
                close_request()
                request += 1
                chunk = 0
                asked_in = (turn, step)
                chunks, times, retries = [], [], []
            case "assistant/chunk" if isinstance(data, AssistantChunk):
                attach(ChunkPoint(request, chunk))
                chunks.append(data.chunk)
                times.append(event.time)
                chunk += 1
            case "llm/retry" if isinstance(data, LlmRetry):
                retries.append(data)
            case "tool/call" if isinstance(data, ToolCall):
                recorded = RecordedCall(turn, step, data, None)
                recording.calls.append(recorded)
                calls_by_seq[event.seq] = recorded
            case "tool/result" if isinstance(data, ToolResult):
                call_id = data.message.source.call_id
                occurrence = call_seen.get(call_id, 0)
                call_seen[call_id] = occurrence + 1
                attach(ToolPoint(call_id, occurrence))
                for seq in event.source_event_seqs or ():
                    started = calls_by_seq.get(seq)
                    if started is not None:
                        index = recording.calls.index(started)
                        recording.calls[index] = RecordedCall(
                            started.turn, started.step, started.call, data
                        )
            case "steering/message":
                entering = False
            case "inbox/enqueued" if isinstance(data, InboxEnqueued):
                sent = Send(data.item_id, data.message, data.placement)
                # What a command sends (/init's prompt) it sends again when replayed.
                if not commands_running:
                    pending.append(sent)
                for command_id in commands_running:
                    recording.command_sends.setdefault(command_id, []).append(sent)
            case "approval/requested" if isinstance(data, ApprovalRequested):
                if data.call_id is not None:
                    requested[data.request_id] = data.call_id
            case "approval/resolved" if isinstance(data, ApprovalResolved):
                asked = requested.get(data.request_id)
                if asked is not None:
                    recording.approvals[asked] = data.outcome
            case "inbox/updated" if isinstance(data, InboxUpdated):
                pending.append(Edit(data.item_id, data.message))
            case "inbox/discarded" if isinstance(data, InboxDiscarded):
                if data.reason == "removed":
                    pending.extend(Withdraw(item) for item in data.item_ids)
            case "user/message" if isinstance(data, UserMessage):
                source = data.source
                if isinstance(source, PluginSource) and prompt is not None:
                    recording.prompt_contexts[prompt].append(data)
                elif entering and not isinstance(source, PluginSource):
                    # The prompt a step starts with: what prompt-submit added follows.
                    prompt = str(data.id)
                    recording.prompt_contexts[prompt] = []
                    recording.prompt_contents[prompt] = data.content
                # Context entries enter at a step's start, before what the step claimed
                # (the prompt and what came with it, steering): the leading plugin
                # messages. The loop's own notes (plugin "dsh") are its output.
                if not isinstance(source, PluginSource):
                    entering = False
                elif entering and source.plugin != "dsh":
                    form = source.form or ""
                    recording.context.append((step_number, source.plugin, form, data.text()))
            case "command/run" if isinstance(data, CommandRun):
                commands_running.add(data.command_id)
                if data.source == "user":
                    pending.append(RunCommand(data.name, data.args or "", data.command_id))
            case "command/done" if isinstance(data, CommandDone):
                commands_running.discard(data.command_id)
            case "checkpoint/restoring" if isinstance(data, RestoreStarted):
                for command_id in commands_running:
                    restores[data.restore_id] = command_id
            case "history/rewound" if isinstance(data, HistoryRewound):
                restored = data.restore_id is not None
                # A rewind a resume finished (its command's process killed during the
                # restore) is that command's: found by the restore it followed.
                begun = restores.get(data.restore_id or "")
                for command_id in commands_running or ({begun} if begun else set()):
                    recording.rewinds[command_id] = RecordedRewind(data.turn, restored)
            case "permissions/mode" if isinstance(data, PermissionModeSet):
                pending.append(SetMode(data.mode))
                mode = data.mode
            case "agent/options" if isinstance(data, AgentOptionsSet):
                # What a command switched (``/model``) it switches again when replayed.
                if not commands_running:
                    pending.append(SetOptions(dict(data.changes)))
        answer = side_answer_of(event)
        if answer is not None:
            recording.side_answers.append(answer)
        if not turn_open and pending and event.type == "turn/end":
            attach(IdlePoint(turns_ended))
    close_request()
    if pending:
        recording.inputs.setdefault(IdlePoint(turns_ended), []).extend(pending)
    recording.kills = [_kill(events, first, last) for first, last in repairs]
    for kill in recording.kills:
        after = (
            "resumes the session in a new runtime, as the next process did"
            if kill.resumed
            else "reads its log as the next open's crash repair closes it"
        )
        recording.notes.append(
            f"turn {kill.turn}: its process was killed (its log ends at event {kill.seq}):"
            f" the replay stops its runtime there and {after}"
        )
    if header.host is None:
        recording.notes.append(
            "the log does not say which machine it was recorded on (a session stored before"
            " dsh kept it): this machine's platform and shell stand in for it"
        )
    return recording


def _cancel_positions(events: Sequence[SessionEvent]) -> dict[int, Cancel]:
    """Where the person's cancels happened, as far as the log shows: for each turn the
    person stopped, the seq before which to cancel. The log has no event of its own for
    a cancel; its marks are the queue it cleared (``inbox/discarded`` "cancelled"), the
    stream it cut (an aborted finish) or the tool call it stopped."""
    positions: dict[int, Cancel] = {}
    start = 0
    for event in events:
        if event.type == "turn/start":
            start = event.seq
        data = event.data
        if not (
            event.type == "turn/end"
            and isinstance(data, TurnEnd)
            and isinstance(data.reason, TurnAborted)
            and isinstance(data.reason.reason, CancelByUser)
        ):
            continue
        for inside in events[start : event.seq]:
            mark = inside.data
            if isinstance(mark, InboxDiscarded) and mark.reason == "cancelled":
                positions[inside.seq] = Cancel(exact=True)
                break
            if (
                isinstance(mark, AssistantChunk)
                and isinstance(mark.chunk, Finish)
                and isinstance(mark.chunk.reason, FinishAborted)
            ):
                positions[inside.seq] = Cancel(exact=False)
                break
            if (
                isinstance(mark, ToolResult)
                and mark.error is not None
                and mark.error.code
                in (
                    "TOOL_CANCELLED",
                    "ABORTED_BEFORE_DISPATCH",
                )
            ):
                positions[inside.seq] = Cancel(exact=False)
                break
        else:
            seq, at_stream_end = _unmarked_cancel(events[start : event.seq], event.seq)
            positions[seq] = Cancel(exact=False, at_stream_end=at_stream_end)
    return positions


def _unmarked_cancel(turn: Sequence[SessionEvent], end: int) -> tuple[int, bool]:
    """Where a cancel that left no mark of its own came, as near as the log tells: the
    last step's tools were answered and no request followed, so it came before the
    loop had its last result back (an approval it took away answers ``DENIED``, a
    read an editor that left could not serve ``FS_IO_ERROR``); a last step that called
    no tool and ended: as its stream ended (whole, yet the turn was stopped); else
    before the turn's end. The seq before which it came, and whether at a stream's end."""
    last, at_stream_end = end, False
    for event in turn:
        if event.type == "request/header":
            last, at_stream_end = end, False
        elif isinstance(event.data, ToolResult):
            last = event.seq
        elif isinstance(event.data, StepEnd) and last == end:
            last, at_stream_end = event.seq + 1, True
    return last, at_stream_end


def _repairs(events: Sequence[SessionEvent]) -> list[tuple[int, int]]:
    """Where crash repair closed a turn a killed process left open: the seqs of its
    first and last events (the last is the ``turn/end`` "interrupted", which only
    repair writes). Repair writes what :func:`closing_events` makes of the log before
    it, stamped with the last event's time: the run that fits is the repair's."""
    found: list[tuple[int, int]] = []
    for event in events:
        data = event.data
        if not (isinstance(data, TurnEnd) and isinstance(data.reason, TurnInterrupted)):
            continue
        start = event.seq
        while (
            start > 0
            and events[start - 1].type in ("tool/result", "step/end")
            and events[start - 1].time == event.time
        ):
            start -= 1
        written = [e.type for e in events[start : event.seq + 1]]
        for first in range(start, event.seq + 1):
            closing = closing_events(events[:first])
            if [e.type for e in closing] == written[first - start :]:
                found.append((first, event.seq))
                break
    return found


def _read_repair(
    recording: Recording, event: SessionEvent, calls_by_seq: dict[int, RecordedCall]
) -> None:
    """A repair's event: the result it gave a call the killed process never answered,
    or the turn's end."""
    data = event.data
    if isinstance(data, TurnEnd):
        recording.turn_ends.append(data)
    elif isinstance(data, ToolResult):
        for seq in event.source_event_seqs or ():
            started = calls_by_seq.get(seq)
            if started is not None:
                index = recording.calls.index(started)
                recording.calls[index] = RecordedCall(
                    started.turn, started.step, started.call, data, repaired=True
                )


def _kill(events: Sequence[SessionEvent], first: int, last: int) -> Kill:
    """The kill a repair (``first`` to ``last``) closed the turn of: where the killed
    process's log ends, in the events a replaying loop logs as it did."""
    end = first - 1
    anchor = end
    while anchor > 0 and events[anchor].type not in LOOP_TYPES:
        anchor -= 1
    kind = events[anchor].type
    count = sum(1 for e in events[: anchor + 1] if e.type == kind)
    then = tuple(e.type for e in events[anchor + 1 : first])
    request = -1
    for event in reversed(events[:first]):
        if event.type in ("assistant/message", "step/end", "turn/start"):
            break  # the last request's answer was whole: no stream was open
        if event.type == "request/header":
            request = sum(1 for e in events[: event.seq] if e.type == "request/header")
            break
    ending = events[last].data
    assert isinstance(ending, TurnEnd)
    resumed = last + 1 < len(events) and events[last + 1].type == "session/end-seed"
    return Kill(end, kind, count, then, ending.turn, request, resumed)


def _command_name(events: Sequence[SessionEvent], command_id: str) -> str:
    for event in events:
        data = event.data
        if isinstance(data, CommandRun) and data.command_id == command_id:
            return f"/{data.name}"
    return command_id
