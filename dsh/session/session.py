"""The live session: an append-only, seq-numbered event log and what derives from it.

``append`` validates, stamps and stores one event, then tells every subscriber,
synchronously and in order; a subscriber's failure is contained and logged. A
subscriber may start from any seq and first receives the events it missed, so it
sees each event exactly once. Appending from inside a subscriber raises: listeners
react to the log, they do not rewrite it mid-dispatch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from dsh.llm import Message, SessionId
from dsh.session.events import (
    EventFormatError,
    ReplaceOp,
    SessionEvent,
    SurfaceOp,
    check_json_value,
    is_surface_type,
    json_check_targets,
    parse_payload,
)
from dsh.session.header import SessionHeader
from dsh.session.history import (
    HistoryFold,
    Rewinds,
    Surface,
    SurfaceError,
    event_message,
    surface_before,
)
from dsh.session.payloads import (
    EndSeed,
    EpochHeader,
    HistoryRewound,
    InboxClaimed,
    InboxDiscarded,
    InboxEnqueued,
    InboxUpdated,
    RequestContext,
    RequestHeader,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnStart,
)
from dsh.session.snapshot import EventLog

if TYPE_CHECKING:
    from dsh.session.persistence import LoadIssue

_log = logging.getLogger("dsh.session")

Subscriber = Callable[[SessionEvent], Any]


class ReentrantAppendError(RuntimeError):
    """``append`` was called from inside a subscriber of the same session."""


def now_ms() -> int:
    return int(time.time() * 1000)


class Session:
    def __init__(
        self,
        header: SessionHeader,
        seed: Sequence[SessionEvent] = (),
        *,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.header = header
        self._clock = clock
        self._events: list[SessionEvent] | EventLog = []
        self._by_type: dict[str, list[int]] = {}
        """The seqs of every event but the streamed chunks, by type: what the services
        that read a log for a few kinds of event scan (:meth:`scan`)."""
        self._inbox: dict[str, list[int]] = {}
        """Each inbox item still waiting (enqueued, neither claimed nor discarded): the
        seqs of its enqueue and updates (:meth:`inbox_events`)."""
        self._subscribers: list[Subscriber] = []
        self._dispatching = False
        self._surface = Surface()
        self._rewinds = Rewinds()
        self._fold = HistoryFold()
        self._folded = 0  # surface nodes already in the fold
        self._fold_generation = 0
        self._derived: list[Message] | None = None
        self._header_seq: int | None = None
        self._context_seq: int | None = None
        self.open_turn: int | None = None
        self.open_step: int | None = None
        self.last_turn = 0
        self.load_issues: tuple[LoadIssue, ...] = ()
        """What loading this session from storage repaired or could not read."""
        for index, event in enumerate(seed):
            if event.seq != index:
                raise EventFormatError(f"seed event {index} has seq {event.seq}")
            self._store(event)
        self._end_seed()

    def _end_seed(self) -> None:
        self.first_live_seq = len(self._events)
        if self._events and self._events[-1].type != "session/end-seed":
            self.append("session/end-seed", EndSeed())

    @classmethod
    def resumed(
        cls,
        header: SessionHeader,
        state: dict[str, Any],
        log: EventLog,
        *,
        clock: Callable[[], int] = now_ms,
    ) -> Session:
        """A stored session from what its snapshot derived from the log's first
        ``log.base`` events (``state``, from :meth:`derived_state`) and the events
        after them (``log.recent``), which are stored on top as a seed's are: the
        same session :class:`Session` (header, every event) makes, without reading
        the older events until something asks for them. Raises ValueError when
        ``state`` does not describe ``log.base`` events."""
        session = cls(header, clock=clock)
        tail = list(log.recent)
        log.recent = []
        session._restore(state, log.base)
        log.keep = set(session._surface.nodes)
        session._events = log
        for event in tail:
            if event.seq != len(log):
                raise EventFormatError(f"seed event {len(log)} has seq {event.seq}")
            session._store(event)
        session._end_seed()
        return session

    def derived_state(self) -> dict[str, Any]:
        """What the log derives into this session, as JSON: with the log, all that
        :meth:`resumed` needs to go on from ``next_seq`` without reading it again."""
        return {
            "next": len(self._events),
            "surface": list(self._surface.nodes),
            "generation": self._surface.generation,
            "rewinds": [list(run) for run in self._rewinds.runs],
            "openTurn": self.open_turn,
            "openStep": self.open_step,
            "lastTurn": self.last_turn,
            "headerSeq": self._header_seq,
            "contextSeq": self._context_seq,
            "byType": {name: list(seqs) for name, seqs in self._by_type.items()},
            "inbox": {item: list(seqs) for item, seqs in self._inbox.items()},
        }

    def _restore(self, state: dict[str, Any], count: int) -> None:
        try:
            if state["next"] != count:
                raise ValueError(f"the state covers {state['next']} events, not {count}")
            self._surface.nodes = [int(seq) for seq in state["surface"]]
            self._surface.generation = int(state["generation"])
            self._rewinds.runs = [(int(a), int(b)) for a, b in state["rewinds"]]
            self.open_turn = _optional_int(state["openTurn"])
            self.open_step = _optional_int(state["openStep"])
            self.last_turn = int(state["lastTurn"])
            self._header_seq = _optional_int(state["headerSeq"])
            self._context_seq = _optional_int(state["contextSeq"])
            self._by_type = {
                str(name): [int(seq) for seq in seqs] for name, seqs in state["byType"].items()
            }
            self._inbox = {
                str(item): [int(seq) for seq in seqs] for item, seqs in state["inbox"].items()
            }
        except (KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"not a session state: {error}") from None
        if any(not 0 <= seq < count for seq in self._surface.nodes):
            raise ValueError("the state's surface names events it does not cover")

    @property
    def id(self) -> SessionId:
        return self.header.id

    @property
    def events(self) -> Sequence[SessionEvent]:
        return self._events

    @property
    def next_seq(self) -> int:
        return len(self._events)

    @property
    def surface_nodes(self) -> tuple[int, ...]:
        return tuple(self._surface.nodes)

    @property
    def replace_generation(self) -> int:
        """Bumped whenever history is rewritten rather than extended (a replace, a
        rewind): what was derived from it before must be derived again."""
        return self._surface.generation

    def rewind_holds(self, seq: int) -> bool:
        """Whether the ``history/rewound`` at ``seq`` took the conversation back (one
        that breaks the rules, in a hand-edited log, is ignored)."""
        return any(at == seq for _, at in self._rewinds.runs)

    def shadowed(self, seq: int) -> bool:
        """Whether a rewind took the event at ``seq`` back (it stays in the log)."""
        return self._rewinds.shadowed(seq)

    # ------------------------------------------------------------------ appending

    def append(
        self,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | None = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> SessionEvent:
        """Validate, stamp and store one event; a refused append changes nothing."""
        if self._dispatching:
            raise ReentrantAppendError(
                f"cannot append {type} while subscribers handle event {len(self._events) - 1}"
            )
        seq = len(self._events)
        payload = parse_payload(type, data)
        surface = is_surface_type(type)
        if surface and surface_op is None:
            surface_op = "append"
        sources = tuple(source_event_seqs) if source_event_seqs is not None else None
        self._check_surface(type, seq, surface, surface_op, sources)
        if isinstance(payload, HistoryRewound):
            self._check_rewind(seq, payload)
        event = SessionEvent(
            type=type,
            seq=seq,
            time=self._clock(),
            data=payload,
            ignorable=True if ignorable else None,
            surface_op=surface_op,
            source_event_seqs=sources,
        )
        risky = json_check_targets(payload)
        if risky is not None:
            # Python mode: JSON mode would already have turned NaN into None and int
            # keys into strings, hiding exactly what must be refused.
            check_json_value(risky, f"{type} data")
        self._store(event)
        self._dispatch(event)
        return event

    def _check_surface(
        self,
        type: str,
        seq: int,
        surface: bool,
        op: SurfaceOp | None,
        sources: tuple[int, ...] | None,
    ) -> None:
        if not surface:
            if op is not None or sources is not None:
                raise EventFormatError(f"{type} is not a surface event: no surface_op or sources")
            return
        if sources is not None:
            if len(set(sources)) != len(sources) or any(s >= seq or s < 0 for s in sources):
                raise EventFormatError(f"{type}: sources must be unique earlier seqs")
            if not sources and type != "assistant/message":
                raise EventFormatError(
                    f"{type}: an empty source list is only for assistant/message"
                )
        if isinstance(op, ReplaceOp):
            try:
                first, last = self._surface.positions(op)
            except SurfaceError as error:
                raise EventFormatError(str(error)) from None
            shadowed = self._surface.nodes[first : last + 1]
            if sources is None or not set(shadowed) <= set(sources):
                raise EventFormatError(
                    f"{type}: a replace must cite every node it shadows {shadowed}"
                )

    def _check_rewind(self, seq: int, rewind: HistoryRewound) -> None:
        if self.open_turn is not None:
            raise EventFormatError(f"cannot rewind while turn {self.open_turn} is open")
        problem = self._rewinds.problem(self._events, seq, rewind)
        if problem is not None:
            raise EventFormatError(problem)

    def _rewind(self, event: SessionEvent, rewind: HistoryRewound) -> None:
        """History goes back to what it was before the rewound turn started."""
        problem = self._rewinds.problem(self._events, event.seq, rewind)
        if problem is not None:
            # Only a stored log can get here (append checks first): one written by hand,
            # or whose turn/start was lost to a damaged line. History stays as it is.
            _log.warning("session %s seq %d: %s; ignored", self.id, event.seq, problem)
            return
        self._rewinds.runs.append((rewind.to_seq, event.seq))
        self._surface.nodes = surface_before(self._events, rewind.to_seq, self._rewinds)
        self._surface.generation += 1
        self._derived = None

    def _store(self, event: SessionEvent) -> None:
        self._events.append(event)
        if event.type != "assistant/chunk":
            self._by_type.setdefault(event.type, []).append(event.seq)
        match event.data:
            case TurnStart(turn=turn):
                self.open_turn, self.open_step, self.last_turn = turn, None, turn
            case TurnEnd():
                self.open_turn = self.open_step = None
            case StepStart(step=step):
                self.open_step = step
            case StepEnd():
                self.open_step = None
            case RequestHeader(header=header) if header is not None:
                self._header_seq = event.seq
            case RequestContext():
                self._context_seq = event.seq
            case InboxEnqueued(item_id=item_id):
                self._inbox[item_id] = [event.seq]
            case InboxUpdated(item_id=item_id) if item_id in self._inbox:
                self._inbox[item_id].append(event.seq)
            case InboxClaimed(item_ids=ids) | InboxDiscarded(item_ids=ids):
                for item_id in ids:
                    self._inbox.pop(item_id, None)
            case HistoryRewound():
                # The request header and route are not rewound: they say what the next
                # request is sent with, which the rewound turns do not change.
                self._rewind(event, event.data)
        if event.surface_op is not None:
            try:
                self._surface.apply(event)
            except SurfaceError as error:
                # Only a stored seed can get here (append checks first): a replace whose
                # nodes were lost to a corrupt line. Keep the new node rather than fail.
                _log.warning("session %s seq %d: %s; appending it", self.id, event.seq, error)
                self._surface.nodes.append(event.seq)
            self._derived = None

    def _dispatch(self, event: SessionEvent) -> None:
        self._dispatching = True
        try:
            for subscriber in list(self._subscribers):
                try:
                    subscriber(event)
                except Exception:
                    _log.exception("session %s: subscriber failed on seq %d", self.id, event.seq)
        finally:
            self._dispatching = False

    # ------------------------------------------------------------------ reading

    def subscribe(
        self, subscriber: Subscriber, *, from_seq: int | None = None
    ) -> Callable[[], None]:
        """Call ``subscriber`` for every later event; with ``from_seq``, first for every
        stored event from that seq on. Returns the function that unsubscribes."""
        if from_seq is not None:
            for event in self._events[from_seq:]:
                subscriber(event)
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

        return unsubscribe

    def seqs_of(self, *types: str) -> list[int]:
        """The seqs of the events of ``types`` (never ``assistant/chunk``), in order,
        without reading them."""
        if "assistant/chunk" in types:
            raise ValueError("assistant/chunk is not indexed: iterate the events")
        return sorted(seq for name in types for seq in self._by_type.get(name, ()))

    @property
    def reads_lazily(self) -> bool:
        """Whether the older events stay in the log until asked for (a session
        resumed through its snapshot): reading them all costs what the log holds."""
        return isinstance(self._events, EventLog)

    def scan(self, *types: str) -> list[SessionEvent]:
        """The events of ``types`` (never ``assistant/chunk``), in log order: what a
        service that reads the log for a few kinds of event reads, without reading
        the rest of a long log."""
        return self._at(self.seqs_of(*types))

    def events_at(self, seqs: Sequence[int]) -> list[SessionEvent]:
        """The events at ``seqs``, the older ones of a lazily read log read together."""
        return self._at(seqs)

    def inbox_events(self) -> list[SessionEvent]:
        """The ``inbox/enqueued`` and ``inbox/updated`` events of the items still waiting,
        in log order: all that the inbox's state comes from (the claimed and
        discarded items are gone), read without the rest of a long log."""
        return self._at(sorted(seq for seqs in self._inbox.values() for seq in seqs))

    def scan_back(self, *types: str) -> Iterator[SessionEvent]:
        """The events of ``types``, newest first, each read only when reached: for a
        reader that stops at the latest of a kind."""
        for seq in reversed(self.seqs_of(*types)):
            yield self._events[seq]

    def _at(self, seqs: Sequence[int]) -> list[SessionEvent]:
        events = self._events
        if isinstance(events, EventLog):
            return events.events(seqs)
        return [events[seq] for seq in seqs]

    def derive_messages(self) -> list[Message]:
        """Model history: each surface node's message in surface order, unanswered
        tool calls given a synthetic error result."""
        if self._derived is None:
            nodes = self._surface.nodes
            if self._fold_generation != self._surface.generation:
                # A replace rewrote the surface: fold it again from the start.
                self._fold, self._folded = HistoryFold(), 0
                self._fold_generation = self._surface.generation
            for event in self._at(nodes[self._folded :]):
                message = event_message(event)
                if message is not None:
                    self._fold.add(message)
            self._folded = len(nodes)
            self._derived = self._fold.result()
        return list(self._derived)

    @property
    def request_header_seq(self) -> int | None:
        """The seq of the latest full ``request/header``."""
        return self._header_seq

    def request_header(self) -> EpochHeader | None:
        if self._header_seq is None:
            return None
        data = self._events[self._header_seq].data
        assert isinstance(data, RequestHeader)
        return data.header

    def request_context(self) -> RequestContext | None:
        if self._context_seq is None:
            return None
        data = self._events[self._context_seq].data
        assert isinstance(data, RequestContext)
        return data


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)
