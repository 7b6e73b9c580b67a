"""Running the real TUI under ``App.run_test`` against a real runtime and the scripted
model server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from dsh.kernel import Candidate
from dsh.runtime import Runtime, start_runtime
from dsh.session.catalog import CatalogEntry
from dsh.testing import FakeLLM
from dsh.ui.tui.app import DshApp, TuiRequest
from dsh.ui.tui.screens.approval import ApprovalScreen
from tests.support.echo_tool import plugin as echo_plugin
from tests.support.waits import HANG_S

SIZE = (100, 34)


async def make_runtime(home: Path, cwd: Path, fake_llm: FakeLLM) -> Runtime:
    runtime = await start_runtime(
        home=home,
        cwd=cwd,
        plugin_configs={
            "llm-deepseek": {"base_url": fake_llm.base_url},
            "title": {"generate": False},
        },
    )
    await runtime.plugins.load([Candidate("echo", "tests", echo_plugin)])
    return runtime


@asynccontextmanager
async def tui(
    runtime: Runtime, cwd: Path, home: Path, *, size: tuple[int, int] = SIZE, **request: Any
) -> AsyncIterator[tuple[DshApp, Pilot[int]]]:
    app = DshApp(TuiRequest(cwd=cwd, home=home, **request), runtime=runtime)
    async with app.run_test(size=size) as pilot:
        await asyncio.wait_for(app.ready.wait(), HANG_S)
        await pilot.pause()
        yield app, pilot
        await app.shutdown()


async def until(
    pilot: Pilot[Any], condition: Callable[[], object], limit: float = HANG_S, what: str = ""
) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        await pilot.pause(0.02)


def shown(widget: Any) -> str:
    """The text a ``Static`` shows, whatever it holds (Text, a rich Group...)."""
    import io

    from rich.console import Console

    content = widget.content
    if isinstance(content, str):
        return content
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(content)
    return console.file.getvalue()  # type: ignore[attr-defined, no-any-return]


def screen_text(app: DshApp) -> str:
    """What the transcript's widgets show, as plain text."""
    from textual.widgets import Markdown, Static

    from dsh.ui.tui.streaming import AnswerView

    parts = []
    transcript = app.transcript
    assert transcript is not None
    for widget in transcript.query("*"):
        if isinstance(widget, Markdown | AnswerView):
            parts.append(widget.source)
        elif isinstance(widget, Static):
            source = getattr(widget, "source", None)
            if source is not None:
                parts.append(source)
            else:
                parts.append(shown(widget))
    return "\n".join(parts)


async def type_text(app: DshApp, pilot: Pilot[Any], text: str) -> None:
    """Put ``text`` in the prompt as if typed (keys are slow under Pilot)."""
    app.prompt_area.set_text(text)
    await pilot.pause()


async def send_until_approval(app: DshApp, pilot: Pilot[Any], text: str) -> ApprovalScreen:
    """Send ``text`` and wait for the approval dialog its turn opens."""
    await type_text(app, pilot, text)
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval")
    dialog = app.screen
    assert isinstance(dialog, ApprovalScreen)
    return dialog


async def finish_a_turn(app: DshApp, pilot: Pilot[Any], text: str) -> None:
    """Send ``text`` and wait for its turn's footer."""
    await type_text(app, pilot, text)
    await pilot.press("enter")
    await until(
        pilot,
        lambda: (
            app.agent.status == "idle"
            and app.fold.entries
            and type(app.fold.entries[-1]).__name__ == "TurnFooter"
        ),
        what="the turn",
    )


def catalog_entry(id: str, cwd: str, updated_at: int, **fields: Any) -> CatalogEntry:
    """A session-picker entry: two turns, no title, no tokens, unless ``fields`` say."""
    values: dict[str, Any] = {
        "id": id,
        "cwd": cwd,
        "created_at": updated_at,
        "updated_at": updated_at,
        "title": None,
        "first_prompt": None,
        "parent_session": None,
        "last_seq": 10,
        "turns": 2,
        "backend": "jsonl",
        "location": None,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "reasoning_tokens": 0,
        "cost": None,
    }
    values.update(fields)
    return CatalogEntry(**values)


def home(tmp_path: Path) -> Path:
    """The dsh home the ``runtime`` fixture (tests/ui/conftest.py) starts in."""
    return tmp_path / "home"
