"""SVG snapshots of the TUI's main screens, in every bundled theme.

(a) the main screen with a resumed session (``fixtures/session.jsonl``: fixed ids and
times, a user message, reasoning, a tool card with output, a denied call, a retry
notice, an answer with markdown and code, the turn footer, the status bar); (b) the
approval dialog with an edit's diff; (c) the question dialog; (d) the session
picker; (e) the workspace trust dialog, with a hostile value shown escaped; (f) the
main screen with the card cursor on the tool card, opened with Enter; (g) a picker
(``/model``'s, the current model marked); (h) the plan dialog; (i) the main screen with
a plan card (``fixtures/plan_session.jsonl``: the plan presented with ``exit_plan_mode``
and approved, then a write). The dialogs are pushed by a tiny host app.

Update with ``pytest tests/ui/test_snapshots.py --snapshot-update`` and look at what
changed before keeping it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Button, Input, Static, TextArea

from dsh.narrowing import narrow
from dsh.session import SessionStore
from dsh.session.catalog import CatalogEntry
from dsh.session.jsonl import parse_jsonl
from dsh.tools.approval import ApprovalRequest
from dsh.tools.plan_review import PlanReview
from dsh.tools.questions import Question, QuestionOption
from dsh.ui.trusting import PROJECT_FILES, TrustQuestion, TurnedOn
from dsh.ui.tui.app import DshApp, TuiRequest
from dsh.ui.tui.screens.approval import ApprovalScreen
from dsh.ui.tui.screens.plan import PlanScreen
from dsh.ui.tui.screens.question import QuestionScreen
from dsh.ui.tui.screens.sessions import SessionPicker
from dsh.ui.tui.screens.trust import TrustScreen
from dsh.ui.tui.theming import choose_theme, register_themes, variable_defaults
from tests.support.waits import HANG_S
from tests.ui.tui_support import catalog_entry as picker_entry
from tests.ui.tui_support import shown

THEMES = ["dsh-dark", "dsh-light", "dsh-high-contrast"]
FIXTURE = Path(__file__).parent / "fixtures" / "session.jsonl"
SESSION_ID = "5e550001-0000-4000-8000-000000000001"
PLAN_FIXTURE = Path(__file__).parent / "fixtures" / "plan_session.jsonl"
"""A real run made fixed (ids, times, paths): in plan mode the model presents a plan
with ``exit_plan_mode``, it is approved with accept-edits, a write runs unasked."""
PLAN_SESSION_ID = "5e550002-0000-4000-8000-000000000002"
FIXTURE_CWD = "/home/dev/project"
"""The directory the fixture's session ran in; replaced by the test's project."""
MAIN_SIZE = (100, 40)
DIALOG_SIZE = (100, 30)

Snap = Callable[..., bool]


@pytest.fixture(autouse=True)
def environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)  # NO_COLOR=1 breaks every snapshot
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")


async def sandbox_shown(app: DshApp, pilot: Pilot[Any]) -> None:
    """The sandbox is on the status bar once its probe has run, after the app is ready."""
    deadline = time.monotonic() + HANG_S
    while app.status_bar.sandbox is None:
        assert time.monotonic() < deadline, "the sandbox's state was never learned"
        await pilot.pause(0.02)


def no_blink(app: App[Any]) -> None:
    """A blinking cursor is on or off depending on when the screenshot is taken."""
    for widget in app.screen.query("*"):
        if isinstance(widget, TextArea | Input):
            widget.cursor_blink = False


# ---------------------------------------------------------------------- main screen


async def import_session(home: Path, project: Path, fixture: Path = FIXTURE) -> None:
    """Store the fixture as ``dsh sessions import`` does, run in ``project``."""
    data = fixture.read_text().replace(FIXTURE_CWD, str(project)).encode()
    loaded, _ = parse_jsonl(data, str(fixture))
    assert loaded.issues == []
    store = SessionStore.at(home)
    try:
        persistence = store.persistence
        await persistence.create(loaded.header)
        await persistence.append(loaded.header.id, loaded.events)
        assert store.catalog is not None
        await store.catalog.record(
            loaded.header,
            loaded.events,
            backend=persistence.name,
            location=persistence.location(loaded.header.id),
        )
    finally:
        await store.aclose()


class SnapshotApp(DshApp):
    """The real app; it closes its runtime when the snapshot run ends (``run_tui`` does
    that after ``run_async``, which the snapshot plugin does not call)."""

    async def on_unmount(self) -> None:
        await self.shutdown()


@pytest.mark.parametrize("theme", THEMES)
def test_main_screen_with_a_resumed_session(snap_compare: Snap, tmp_path: Path, theme: str) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    asyncio.run(import_session(home, project))
    app = SnapshotApp(
        TuiRequest(
            resume=SESSION_ID,
            cwd=project,
            home=home,
            plugin_configs={
                "llm-deepseek": {"base_url": "http://127.0.0.1:9/v1"},  # never called
                "title": {"generate": False},
            },
            theme=theme,
        )
    )

    async def run_before(pilot: Pilot[Any]) -> None:
        await asyncio.wait_for(app.ready.wait(), 15)
        await sandbox_shown(app, pilot)
        no_blink(app)
        await pilot.pause()
        assert app.fold is not None
        assert app.fold.status.state == "idle"

    assert snap_compare(app, terminal_size=MAIN_SIZE, run_before=run_before)


@pytest.mark.parametrize("theme", THEMES)
def test_main_screen_with_the_card_cursor(snap_compare: Snap, tmp_path: Path, theme: str) -> None:
    from dsh.ui.tui.transcript_view import ToolCard

    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    asyncio.run(import_session(home, project))
    app = SnapshotApp(
        TuiRequest(
            resume=SESSION_ID,
            cwd=project,
            home=home,
            plugin_configs={
                "llm-deepseek": {"base_url": "http://127.0.0.1:9/v1"},  # never called
                "title": {"generate": False},
            },
            theme=theme,
        )
    )

    async def run_before(pilot: Pilot[Any]) -> None:
        await asyncio.wait_for(app.ready.wait(), 15)
        await sandbox_shown(app, pilot)
        no_blink(app)
        await pilot.press("ctrl+up", "ctrl+up", "enter")  # the older card, opened
        await pilot.pause()
        cards = list(app.query(ToolCard))
        assert [card.has_class("-cursor") for card in cards] == [True, False]
        assert cards[0].expanded
        await pilot.pause()

    assert snap_compare(app, terminal_size=MAIN_SIZE, run_before=run_before)


@pytest.mark.parametrize("theme", THEMES)
def test_main_screen_with_a_plan_card(snap_compare: Snap, tmp_path: Path, theme: str) -> None:
    from dsh.ui.tui.transcript_view import ToolCard

    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    asyncio.run(import_session(home, project, PLAN_FIXTURE))
    app = SnapshotApp(
        TuiRequest(
            resume=PLAN_SESSION_ID,
            cwd=project,
            home=home,
            plugin_configs={
                "llm-deepseek": {"base_url": "http://127.0.0.1:9/v1"},  # never called
                "title": {"generate": False},
            },
            theme=theme,
        )
    )

    async def run_before(pilot: Pilot[Any]) -> None:
        await asyncio.wait_for(app.ready.wait(), 15)
        await sandbox_shown(app, pilot)
        no_blink(app)
        await pilot.pause()
        plan, write = app.query(ToolCard)
        # The plugin's view of the card (as resumed), not the generic one.
        assert "Plan approved · accept-edits" in shown(plan)
        assert "greet.py" in shown(write)
        await pilot.pause()

    assert snap_compare(app, terminal_size=MAIN_SIZE, run_before=run_before)


# ---------------------------------------------------------------------- dialogs


class Host(App[None]):
    """A themed stand-in for the app, showing one dialog over a placeholder."""

    CSS = "#behind { padding: 1 2; color: $text-muted; }"

    def __init__(self, theme: str, home: Path, dialog: Screen[Any]) -> None:
        super().__init__()
        self.errors = register_themes(self, home)
        self.wanted_theme = theme
        self.dialog = dialog

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return {**super().get_theme_variable_defaults(), **variable_defaults(self)}

    def compose(self) -> ComposeResult:
        yield Static("The transcript would be here.", id="behind")

    def on_mount(self) -> None:
        assert self.errors == []
        assert choose_theme(self, self.wanted_theme) is None
        self.push_screen(self.dialog)


def snap_dialog(
    snap_compare: Snap,
    home: Path,
    theme: str,
    dialog: Screen[Any],
    settled: Callable[[], bool] = lambda: True,
) -> bool:
    """``settled``: the dialog has laid itself out (one that fits itself to the
    terminal after a refresh)."""
    app = Host(theme, home, dialog)

    async def run_before(pilot: Pilot[Any]) -> None:
        deadline = time.monotonic() + HANG_S
        while app.screen is not dialog or not settled():
            assert time.monotonic() < deadline, "the dialog did not open"
            await pilot.pause(0.02)
        no_blink(app)
        await pilot.pause()

    return snap_compare(app, terminal_size=DIALOG_SIZE, run_before=run_before)


DIFF = """--- a/greet.py
+++ b/greet.py
@@ -1,4 +1,5 @@
 import sys
-print("hello")
+name = sys.argv[1] if len(sys.argv) > 1 else "world"
+print(f"hello, {name}")
 sys.exit(0)
"""


@pytest.mark.parametrize("theme", THEMES)
def test_approval_dialog_with_a_diff(snap_compare: Snap, tmp_path: Path, theme: str) -> None:
    request = ApprovalRequest(
        id="r1",
        session_id="s1",
        call_id="c1",
        tool_name="edit",
        summary="greet.py",
        details=DIFF,
        risk="write",
        reason="file edits need approval",
        grant="edit(greet.py)",
    )
    dialog = ApprovalScreen(request, guard_seconds=0)
    assert snap_dialog(snap_compare, tmp_path, theme, dialog)


PLAN = """# Greet by name

1. **greet.py**: read the name from `sys.argv`, default `world`.
2. **tests/test_greet.py**: a test for each case.

```python
name = sys.argv[1] if len(sys.argv) > 1 else "world"
```

Risks: none; nothing imports `greet.py`.
"""


@pytest.mark.parametrize("theme", THEMES)
def test_plan_dialog(snap_compare: Snap, tmp_path: Path, theme: str) -> None:
    review = PlanReview(id="p1", session_id="s1", call_id="c1", plan=PLAN)
    dialog = PlanScreen(review, guard_seconds=0)
    assert snap_dialog(snap_compare, tmp_path, theme, dialog)


LANGUAGE = Question(
    id="lang",
    question="Which language should the new service use?",
    header="Language",
    options=(
        QuestionOption(label="Python", description="matches the rest of the repo"),
        QuestionOption(label="Rust", description="fast, but a new toolchain"),
        QuestionOption(label="Go"),
    ),
)
FEATURES = Question(
    id="features",
    question="Which features?",
    options=(QuestionOption(label="logging"), QuestionOption(label="metrics")),
    multi_select=True,
)


@pytest.mark.parametrize("theme", THEMES)
def test_question_dialog(snap_compare: Snap, tmp_path: Path, theme: str) -> None:
    dialog = QuestionScreen([LANGUAGE, FEATURES], guard_seconds=0)
    assert snap_dialog(snap_compare, tmp_path, theme, dialog)


def catalog_entry(id: str, cwd: str, minutes_ago: int, **fields: Any) -> CatalogEntry:
    # Ages are relative to now: the picker says "5 min ago" whenever it runs.
    return picker_entry(id, cwd, int(time.time() * 1000) - minutes_ago * 60_000, **fields)


@pytest.mark.parametrize("theme", THEMES)
def test_session_picker(snap_compare: Snap, tmp_path: Path, theme: str) -> None:
    entries = [  # newest first, as the catalog lists them
        catalog_entry("bbbb2222", "/srv/app", 5, first_prompt="fix the flaky test\nin ci"),
        catalog_entry("dddd4444", "/srv/app", 40, title="Add a greeting", turns=7),
        catalog_entry("aaaa1111", "/srv/other", 90, title="Refactor the parser", cost=0.0123),
        catalog_entry("cccc3333", "/srv/app", 3 * 24 * 60, turns=1, cost=0.4),
    ]

    async def search(text: str) -> list[CatalogEntry]:
        return []

    dialog = SessionPicker(entries, "/srv/app", search)
    assert snap_dialog(snap_compare, tmp_path, theme, dialog)


# What a cloned repository's .dsh/settings.toml might carry. The base URL hides a
# terminal title sequence and a bidi override: the dialog must show them as pictures.
HOSTILE_PROJECT = {
    "permissions": {"mode": "bypass", "allow": ["bash(*)"], "deny": ["bash(rm:*)"]},
    "agent": {"model": "deepseek-v4-pro"},
    "plugins": {
        "modules": ["repo_tools.plugin"],
        "llm-deepseek": {"base_url": "https://api.example.com\x1b]0;pwned\x07\u202e/v1"},
        "llm-openai-compat": {
            "providers": [{"name": "team", "base_url": "https://llm.example.com/v1"}]
        },
    },
}


def trust_question() -> TrustQuestion:
    """The question as ``settle`` would ask it, the ignored keys found by the real
    narrowing (fixed paths: a snapshot must not name a temporary folder)."""
    _, ignored = narrow(HOSTILE_PROJECT, {})
    root = Path("/home/dev/src/cloned-repo")
    # What else the folder holds for dsh: its commands and MCP servers, as found.
    turned_on = tuple(
        TurnedOn(f"{name}/" if folder else name, what)
        for name, folder, what in PROJECT_FILES
        if name in (".dsh/commands", ".mcp.json")
    )
    return TrustQuestion(root, root / ".dsh" / "settings.toml", tuple(ignored), turned_on)


def test_the_trust_question_escapes_the_hostile_value() -> None:
    # Checked here too, so that an SVG accepted by mistake cannot hide it.
    question = trust_question()
    keys = [item.key for item in question.ignored]
    assert keys == [
        "permissions.mode",
        "permissions.allow",
        "plugins.modules",
        "plugins.llm-deepseek.base_url",
        "plugins.llm-openai-compat.providers",
    ]
    url = question.ignored[3].value
    assert "␛]0;pwned␇<U+202E>" in url
    assert not any(ord(c) < 0x20 or c == "\u202e" for c in url)


@pytest.mark.parametrize("theme", THEMES)
def test_trust_dialog(snap_compare: Snap, tmp_path: Path, theme: str) -> None:
    dialog = TrustScreen(trust_question())

    def answers_on_screen() -> bool:
        # The list of changes shrinks after the first layout so that they fit.
        inner = dialog.query_one("#dialog").content_region
        return all(inner.contains_region(b.region) for b in dialog.query(Button))

    assert snap_dialog(snap_compare, tmp_path, theme, dialog, answers_on_screen)


@pytest.mark.parametrize("theme", THEMES)
def test_picker(snap_compare: Snap, tmp_path: Path, theme: str) -> None:
    from dsh.ui.tui.screens.picker import Picker

    items = ["deepseek-flash · DeepSeek V4.1 Flash", "deepseek-v4-flash", "deepseek-v4-pro"]
    dialog = Picker("Model of deepseek", items, current=1)
    assert snap_dialog(snap_compare, tmp_path, theme, dialog)
