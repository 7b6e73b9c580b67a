"""What a front end would do for a replayed command, done without one.

A slash command the person ran is run again as typed (:mod:`dsh.replay.serve`): what
it shows is kept for the report, nobody answers its questions, and ``/rewind``'s
questions are answered as the recorded rewind was.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dsh.replay.recorded import RecordedRewind

if TYPE_CHECKING:
    from dsh.ui.rewinding import Preview, RewindChoice, RewindPick, TurnRow


class ReplayHost:
    """The front end a replayed command sees: it keeps what is shown, and nobody
    answers a question (a command that needs a pick does what it does unattended)."""

    def __init__(self) -> None:
        self.shown: list[str] = []

    def show(self, text: str, *, level: str = "info") -> None:
        self.shown.append(text)

    async def new_session(self) -> None:
        self.shown.append("(a new session was asked for: the replay stays in this one)")

    async def open_session(self, session_id: str | None) -> None:
        self.shown.append("(another session was asked for: the replay stays in this one)")

    async def quit(self) -> None:
        pass

    async def choose(
        self, title: str, items: Sequence[str], *, current: int | None = None
    ) -> int | None:
        return None

    @property
    def attended(self) -> bool:
        return False


class RecordedRewindAsker:
    """``/rewind``'s questions answered as the recorded rewind was: the turn it went
    back to, the conversation only (with recorded tools the files the code restore
    would put back were never made; with live tools they are, and the code goes back
    as well when it did). None: the recorded one rewound no conversation."""

    def __init__(self, recorded: RecordedRewind | None, *, live: bool = False) -> None:
        self.recorded = recorded
        self.live = live

    async def ask(
        self,
        turns: Sequence[TurnRow],
        preview: Preview,
        *,
        turn: TurnRow | None = None,
        choice: RewindChoice | None = None,
    ) -> RewindPick | None:
        from dsh.ui.rewinding import RewindPick

        if self.recorded is None:
            return None
        both = self.live and self.recorded.code
        return RewindPick(self.recorded.turn, "both" if both else "conversation")

    def put_back(self, prompt: str) -> None:
        pass  # the prompt sent next is in the log as it was sent

    def said(self, text: str) -> None:
        pass
