"""A session's turns as a person picks among them: what each asked, when, and whether
a rewind took it back.

This is what ``/rewind``'s picker, ``/fork TURN`` and ``dsh sessions fork --at`` read;
it is derived from the log alone, so it is the same live, resumed or read from a file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dsh.llm import PluginSource, UserMessage
from dsh.session.events import SessionEvent
from dsh.session.history import Rewinds, rewinds_of
from dsh.session.payloads import TurnEnd, TurnStart
from dsh.session.session import Session


@dataclass(frozen=True)
class TurnInfo:
    turn: int
    prompt: str
    """The text of the turn's first message from the person (empty when it had none:
    a turn a background job woke); whole, making it one line is the front end's job."""
    time: int
    """When it started, epoch ms."""
    start_seq: int
    """The seq of its ``turn/start``: where a rewind to it goes back to."""
    end_seq: int | None
    """The seq of its ``turn/end``; None while it runs."""
    shadowed: bool
    """A rewind took it back: it is in the log, not in the conversation."""


class TurnNotFoundError(LookupError):
    """No such turn in the session, or not one that can be chosen; says which there are."""


def turns(session: Session) -> list[TurnInfo]:
    """The turns of ``session``, oldest first, the rewound ones marked."""
    # Only the kinds of event it reads: a resumed log's others stay in the file.
    return _turns(session.scan("turn/start", "turn/end", "user/message"), session.shadowed)


def turns_of(events: Sequence[SessionEvent]) -> list[TurnInfo]:
    """The turns of a stored log (``events`` from its seq 0), as :func:`turns`."""
    return _turns(events, rewinds_of(events).shadowed)


def shadowing(events: Sequence[SessionEvent]) -> Rewinds:
    """The rewinds that hold in a stored log: ``.shadowed(seq)`` says whether one took
    the event at ``seq`` back."""
    return rewinds_of(events)


def turn_prompt(events: Sequence[SessionEvent], info: TurnInfo) -> UserMessage | None:
    """The message the person opened turn ``info`` with (None: there was none)."""
    end = info.end_seq if info.end_seq is not None else len(events) - 1
    for event in events[info.start_seq : end + 1]:
        data = event.data
        if event.type == "user/message" and isinstance(data, UserMessage) and _from_person(data):
            return data
    return None


def find_turn(infos: Sequence[TurnInfo], turn: int, *, visible: bool = False) -> TurnInfo:
    """Turn ``turn`` of ``infos``; with ``visible``, only one no rewind took back.
    Raises :class:`TurnNotFoundError` saying which turns there are."""
    for info in infos:
        if info.turn == turn:
            if visible and info.shadowed:
                raise TurnNotFoundError(
                    f"turn {turn} was rewound already; {_which(infos, visible)}"
                )
            return info
    raise TurnNotFoundError(f"there is no turn {turn}; {_which(infos, visible)}")


def _which(infos: Sequence[TurnInfo], visible: bool) -> str:
    shown = [info.turn for info in infos if not (visible and info.shadowed)]
    if not shown:
        return "the session has no turns to choose"
    if len(shown) == 1:
        return f"the only turn is {shown[0]}"
    return f"the turns are {_ranges(shown)}"


def _ranges(numbers: Sequence[int]) -> str:
    parts: list[str] = []
    start = previous = numbers[0]
    for number in [*numbers[1:], None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        if number is not None:
            start = previous = number
    return ", ".join(parts)


def _turns(events: Sequence[SessionEvent], shadowed: Callable[[int], bool]) -> list[TurnInfo]:
    out: list[TurnInfo] = []
    opened: SessionEvent | None = None
    prompt: str | None = None

    def close(end_seq: int | None) -> None:
        assert opened is not None
        assert isinstance(opened.data, TurnStart)
        out.append(
            TurnInfo(
                turn=opened.data.turn,
                prompt=prompt or "",
                time=opened.time,
                start_seq=opened.seq,
                end_seq=end_seq,
                shadowed=shadowed(opened.seq),
            )
        )

    for event in events:
        match event.data:
            case TurnStart():
                if opened is not None:  # a damaged log: the turn before never ended
                    close(None)
                opened, prompt = event, None
            case TurnEnd() if opened is not None:
                close(event.seq)
                opened = None
            case UserMessage() as message if opened is not None and prompt is None:
                if event.type == "user/message" and _from_person(message):
                    prompt = message.text()
    if opened is not None:
        close(None)
    return out


def _from_person(message: UserMessage) -> bool:
    """Typed by the person, not context a plugin (or dsh) entered."""
    return not isinstance(message.source, PluginSource)
