"""A CommandHost for tests: records what commands show, and does nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RecordingHost:
    shown: list[tuple[str, str]] = field(default_factory=list)
    """(level, text) of each line shown, in order."""

    def show(self, text: str, *, level: str = "info") -> None:
        self.shown.append((level, text))

    async def new_session(self) -> None:
        pass

    async def open_session(self, session_id: str | None) -> None:
        pass

    async def quit(self) -> None:
        pass

    @property
    def texts(self) -> list[str]:
        return [text for _, text in self.shown]

    @property
    def text(self) -> str:
        return "\n".join(self.texts)
