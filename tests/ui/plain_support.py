"""Plain mode run in the test's event loop, typed into through a pipe (the ``pipe``
fixture of tests/ui/conftest.py): one driver for the plain-mode tests."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prompt_toolkit.input import PipeInput

from dsh.ui.plain import PlainRequest, run_plain
from tests.support.waits import HANG_S

if TYPE_CHECKING:
    from dsh.runtime import Runtime

TIMEOUT = HANG_S
"""Any one wait, with a runtime already started."""


class Plain:
    """A plain-mode run: type into its pipe, read what it printed. With no
    ``runtime``, plain mode settles the project's trust and starts its own (allow a
    longer ``timeout`` for that)."""

    def __init__(
        self,
        runtime: Runtime | None,
        pipe: PipeInput,
        cwd: Path,
        out: io.StringIO | None = None,
        *,
        timeout: float = TIMEOUT,
        **req: Any,
    ) -> None:
        self.pipe = pipe
        self.out = out or io.StringIO()
        self.timeout = timeout
        request = PlainRequest(cwd=cwd, **req)
        self.task = asyncio.create_task(
            run_plain(request, input=pipe, output=self.out, runtime=runtime)
        )

    @property
    def text(self) -> str:
        return self.out.getvalue()

    def type(self, text: str) -> None:
        self.pipe.send_text(text)

    async def wait_for(self, needle: str, *, count: int = 1) -> str:
        async def poll() -> None:
            while self.text.count(needle) < count:
                if self.task.done():
                    raise AssertionError(
                        f"plain mode ended early: {self.task.result()}\n{self.text}"
                    )
                await asyncio.sleep(0.01)

        try:
            await asyncio.wait_for(poll(), self.timeout)
        except TimeoutError:
            raise AssertionError(f"{needle!r} never printed:\n{self.text}") from None
        return self.text

    async def mode(self) -> str:
        """The permission mode in force, as ``/permissions`` says it."""
        before = len(self.text)
        self.type("/permissions\r")
        await self.wait_for("Permission mode: ")
        line = next(line for line in self.text[before:].splitlines() if "Permission mode: " in line)
        return line.split("Permission mode: ", 1)[1].strip()

    async def quit(self) -> int:
        self.type("\x04")  # Ctrl+D
        return await asyncio.wait_for(self.task, self.timeout)
