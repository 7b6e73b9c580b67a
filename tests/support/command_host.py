"""A CommandHost for tests: records what commands show, and does nothing else."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class RecordingHost:
    shown: list[tuple[str, str]] = field(default_factory=list)
    """(level, text) of each line shown, in order."""
    picks: list[int | None] = field(default_factory=list)
    """What :meth:`choose` answers, in order (None once they run out)."""
    choices: list[tuple[str, list[str], int | None]] = field(default_factory=list)
    """(title, items, current) of each list offered."""
    attended: bool = True
    """Whether :meth:`choose`'s None is a person's "no" (False: nobody to ask)."""

    def show(self, text: str, *, level: str = "info") -> None:
        self.shown.append((level, text))

    async def new_session(self) -> None:
        pass

    async def open_session(self, session_id: str | None) -> None:
        pass

    async def quit(self) -> None:
        pass

    async def choose(
        self, title: str, items: Sequence[str], *, current: int | None = None
    ) -> int | None:
        self.choices.append((title, list(items), current))
        return self.picks.pop(0) if self.picks else None

    @property
    def texts(self) -> list[str]:
        return [text for _, text in self.shown]

    @property
    def text(self) -> str:
        return "\n".join(self.texts)
