"""The TUI's dialogs, lists and toasts show hostile text as pictures, never raw.

Each widget is rendered (``render_lines``) and what it would send to the terminal is
checked for control characters; answers still carry the exact text chosen.
"""

from __future__ import annotations

from pathlib import Path

from textual.geometry import Region
from textual.widget import Widget

from dsh.control_chars import visible
from dsh.runtime import Runtime
from dsh.testing import FakeLLM
from dsh.tools.approval import ApprovalRequest
from dsh.tools.questions import Answer, Question, QuestionOption
from dsh.ui.tui.completion import Choice
from dsh.ui.tui.prompt_input import _option
from dsh.ui.tui.screens.approval import ApprovalScreen
from dsh.ui.tui.screens.question import QuestionScreen
from dsh.ui.tui.screens.sessions import session_prompt
from tests.ui.test_screens import Host, opened
from tests.ui.tui_support import catalog_entry, tui, until

HOSTILE = "Q0\x1b]52;c;cHduZWQ=\x07Q1\x1b]0;T\x07Q2\x1b[2JQ3\x1b[?1049hQ4\x1bZ\x9b2JQ5\u202eQ6"
SHOWN = visible(HOSTILE)
CONTROLS = {chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))} - {"\n", "\t"}


def painted(root: Widget) -> str:
    """What ``root`` and every widget in it would draw, as text."""
    out = []
    for widget in [root, *root.walk_children(with_self=False)]:
        if not isinstance(widget, Widget) or not widget.size.area:
            continue
        size = widget.size
        for strip in widget.render_lines(Region(0, 0, size.width, size.height)):
            out.append("".join(segment.text for segment in strip))
    return "\n".join(out)


def assert_inert(text: str) -> None:
    assert not CONTROLS & set(text), [c for c in text if c in CONTROLS][:5]
    assert "\u202e" not in text


async def test_a_question_shows_pictures_and_answers_with_the_exact_label() -> None:
    label = f"pick {HOSTILE}"
    question = Question(
        id="q1",
        question=f"Which? {HOSTILE}",
        header=f"H {HOSTILE}",
        options=(QuestionOption(label=label, description=f"d {HOSTILE}"),),
    )
    app = Host()
    async with app.run_test(size=(160, 40)) as pilot:
        screen = QuestionScreen([question], guard_seconds=0)
        await opened(pilot, app, screen)
        text = painted(screen)
        assert_inert(text)
        assert "Q0␛]52;c;cHduZWQ=␇Q1" in text
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.results))
    assert app.results == [[Answer(id="q1", selected=(label,))]]


async def test_an_approval_shows_the_command_the_reason_and_the_grant_as_pictures() -> None:
    request = ApprovalRequest(
        id="r1",
        session_id="s1",
        call_id="c1",
        tool_name="bash",
        summary=f"run {HOSTILE}",
        details=f"echo '{HOSTILE}'",
        risk="exec",
        reason=f"because {HOSTILE}",
        grant="bash(echo:*)",
        grant_covers=f"exactly `echo {HOSTILE}`",
    )
    app = Host()
    async with app.run_test(size=(160, 40)) as pilot:
        screen = ApprovalScreen(request, guard_seconds=0)
        await opened(pilot, app, screen)
        text = painted(screen)
    assert_inert(text)
    assert text.count("Q0␛]52;c;cHduZWQ=␇Q1") >= 4


def test_session_titles_and_file_names_in_lists_show_as_pictures() -> None:
    entry = catalog_entry("abcdef12", f"/w/{HOSTILE}", 0, title=f"Title {HOSTILE}")
    text = session_prompt(entry, "/elsewhere", 0).plain
    assert_inert(text)
    assert f"Title {SHOWN}" in text
    option = _option(Choice(insert=HOSTILE, label=f"src/{HOSTILE}.py", meta=HOSTILE))
    prompt = option.prompt
    assert_inert(prompt.plain if hasattr(prompt, "plain") else str(prompt))


async def test_toasts_and_ui_notes_show_pictures(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        app.notify(f"failed: {HOSTILE}", title=f"T {HOSTILE}")
        app.show(f"command said {HOSTILE}")
        await until(pilot, lambda: "command said Q0" in painted(app.screen))
        text = painted(app.screen)
        # (run_test keeps toasts off screen: what the toast would show, then)
        notes = [(n.title, n.message, n.markup) for n in app._notifications]
    assert_inert(text)
    assert f"command said {SHOWN}" in text
    assert notes == [(f"T {SHOWN}", f"failed: {SHOWN}", False)]
