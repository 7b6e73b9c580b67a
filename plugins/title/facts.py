"""What the session log says about its title: read from the events alone, so a resumed
session picks up where the last process left off (a pinned title stays pinned, a title
request is not repeated)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dsh.llm import UserMessage, UserSource
from dsh.session import (
    AssistantMessageData,
    SessionEvent,
    TurnCompleted,
    TurnEnd,
)
from dsh_plugins.title.events import SessionTitle, SessionTitleRequest


@dataclass(frozen=True)
class Quote:
    """A message the title is made from: its event's seq and its text."""

    seq: int
    text: str


@dataclass(frozen=True)
class TitleFacts:
    title: SessionTitle | None
    """The latest ``session/title``: the one that counts."""
    requested: bool
    """A model was asked for a title before (``session/title-llm-request``)."""
    prompt: Quote | None
    """The first prompt the person typed."""
    completed_turn: int | None
    """The first turn that completed."""
    answer: Quote | None
    """The last assistant text of that turn."""


def latest_title(events: Sequence[SessionEvent]) -> SessionTitle | None:
    for event in reversed(events):
        if isinstance(event.data, SessionTitle):
            return event.data
    return None


def read_facts(events: Sequence[SessionEvent]) -> TitleFacts:
    title: SessionTitle | None = None
    requested = False
    prompt: Quote | None = None
    completed: int | None = None
    answers: dict[int, Quote] = {}  # turn -> its latest text, until a turn completes
    for event in events:
        data = event.data
        match data:
            case SessionTitle():
                title = data
            case SessionTitleRequest():
                requested = True
            case UserMessage(source=UserSource()) if (
                prompt is None and event.type == "user/message"
            ):
                prompt = Quote(event.seq, data.text())
            case AssistantMessageData(turn=turn, message=message) if completed is None:
                text = message.text()
                if text.strip():
                    answers[turn] = Quote(event.seq, text)
            case TurnEnd(turn=turn, reason=TurnCompleted()) if completed is None:
                completed = turn
    answer = answers.get(completed) if completed is not None else None
    return TitleFacts(title, requested, prompt, completed, answer)
