"""Copy round trip: a region of the transcript selected with the mouse (pilot drags
through the real app, against the scripted server) copies exactly the text the screen
shows in that region, for every kind of entry: answers in markdown (headings, lists,
code blocks, tables, wrapped lines, wide characters), user messages, tool cards,
thoughts, notices and footers.

What the screen shows is read from the screen itself (the compositor's lines), each
row cut to the content of the entry drawn on it (no borders, padding or margins)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.cells import get_character_cell_size
from textual.geometry import Offset
from textual.pilot import Pilot
from textual.widget import Widget

from dsh.runtime import Runtime
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.ui.tui.app import DshApp
from dsh.ui.tui.streaming import AnswerView
from dsh.ui.tui.transcript_view import FooterView, NoticeView, ReasoningView, ToolCard, UserView
from tests.ui.tui_support import finish_a_turn, tui, until

SIZE = (80, 100)
USER = (
    "Please look at this: a long request that wraps over the width of the screen, "
    "with 漢字とかな and an emoji 🚀 in it, then a last few words."
)
ANSWER = """# A heading

Some **bold** text and `code`, then a paragraph long enough to wrap over more than \
one line of the screen, with 中文字符 and 👍 among its words.

- first item
- second item with 日本語

```python
def greet(name):
    return f"hi {name}"
```

| Name | Value |
|------|-------|
| 東京 | 1 |
| x | 22 |

Last line."""


def screen_rows(app: DshApp) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


def cells(text: str, left: int, right: int) -> str:
    """The characters of ``text`` whose first cell is in ``[left, right)``."""
    out: list[str] = []
    x = 0
    for character in text:
        if left <= x < right:
            out.append(character)
        x += get_character_cell_size(character)
    return "".join(out)


def entry_on_row(app: DshApp, y: int) -> Widget | None:
    transcript = app.transcript
    assert transcript is not None
    for widget in transcript.children:
        region = widget.content_region
        if widget.display and region.y <= y < region.bottom:
            return widget
    return None


def shown_between(app: DshApp, start: Offset, end: Offset) -> str:
    """What the screen shows from ``start`` to ``end``, row by row: on each row the
    content of the entry drawn there, without the blanks that end it. The character
    under ``end`` is in it when the drag began in the same entry (Textual's rule: a
    drag over several widgets stops before the pointer)."""
    rows = screen_rows(app)
    inclusive = entry_on_row(app, start.y) is entry_on_row(app, end.y)
    out = []
    for y in range(start.y, end.y + 1):
        widget = entry_on_row(app, y)
        if widget is None:  # a margin between entries
            continue
        region = widget.content_region
        left = start.x if y == start.y else region.x
        right = end.x + inclusive if y == end.y else region.right
        row = cells(rows[y], region.x, region.right).rstrip()
        out.append(cells(row, left - region.x, right - region.x))
    return "\n".join(out).rstrip("\n")


async def drag(app: DshApp, pilot: Pilot[Any], start: Offset, end: Offset) -> str:
    """Drag the mouse from ``start`` to ``end`` and let go; what the app copied."""
    app.copy_to_clipboard("")
    await pilot.mouse_down(offset=start)
    await pilot.hover(offset=end)
    await pilot.mouse_up(offset=end)
    await until(pilot, lambda: app.clipboard != "", what="the copy")
    return app.clipboard


def text_rows(widget: Widget, app: DshApp) -> list[int]:
    """The screen rows of ``widget``'s content that show some text."""
    rows = screen_rows(app)
    region = widget.content_region
    return [
        y for y in range(region.y, region.bottom) if cells(rows[y], region.x, region.right).strip()
    ]


def text_cells(app: DshApp, widget: Widget, y: int) -> list[int]:
    """The first cells of the characters ``widget`` shows on row ``y``, from its
    first character that is not blank to its last."""
    region = widget.content_region
    row = cells(screen_rows(app)[y], region.x, region.right)
    starts: list[int] = []
    x = region.x
    for character in row.rstrip():
        if character != " " or starts:
            starts.append(x)
        x += get_character_cell_size(character)
    return starts


async def a_turn_of_every_kind(app: DshApp, pilot: Pilot[Any]) -> None:
    await finish_a_turn(app, pilot, USER)
    app.show("A notice from dsh: 注意 ⚠ and a long line that wraps over the screen's width too.")
    await until(pilot, lambda: bool(app.query(NoticeView)), what="the notice")
    await pilot.pause()


async def test_every_kind_of_entry_copies_what_it_shows(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(
        Reply(
            reasoning="I should echo first.\nThen answer 好.",
            tool_calls=[ToolCallSpec(name="echo", arguments={"text": "ein Echo 回声 🎉"})],
        )
    )
    fake_llm.add(Reply(text=ANSWER))
    async with tui(runtime, tmp_path, tmp_path / "home", size=SIZE) as (app, pilot):
        await a_turn_of_every_kind(app, pilot)
        thought = app.query_one(ReasoningView)
        await pilot.click(ReasoningView)  # opened: all of the thought is shown
        await until(pilot, lambda: thought.expanded and thought.size.height > 1)
        app.screen.clear_selection()
        await pilot.pause()
        kinds: list[type[Widget]] = [UserView, ReasoningView, ToolCard, AnswerView, FooterView]
        kinds.append(NoticeView)
        for kind in kinds:
            widget = app.query_one(kind)
            rows = text_rows(widget, app)
            assert rows, f"{kind.__name__} shows nothing"
            # All of it, from its first character to its last.
            first, last = text_cells(app, widget, rows[0]), text_cells(app, widget, rows[-1])
            start, end = Offset(first[0], rows[0]), Offset(last[-1], rows[-1])
            expected = shown_between(app, start, end)
            assert expected.strip(), kind.__name__
            assert await drag(app, pilot, start, end) == expected, kind.__name__
            # A part of it: from its first row's second character to its last row's
            # last character but one (one row: from the second to the last but one).
            start = Offset(first[1], rows[0])
            end = Offset(last[-2], rows[-1]) if len(rows) > 1 or len(last) > 2 else start
            expected = shown_between(app, start, end)
            assert await drag(app, pilot, start, end) == expected, kind.__name__


async def test_a_selection_over_several_entries_copies_each_as_shown(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text=ANSWER))
    async with tui(runtime, tmp_path, tmp_path / "home", size=SIZE) as (app, pilot):
        await a_turn_of_every_kind(app, pilot)
        user, answer = app.query_one(UserView), app.query_one(AnswerView)
        user_rows, answer_rows = text_rows(user, app), text_rows(answer, app)
        # From the middle of the message to the middle of the answer's table.
        table = next(y for y in answer_rows if "東京" in screen_rows(app)[y])
        start = Offset(user.content_region.x + 7, user_rows[0])
        end = Offset(answer.content_region.x + 5, table)
        expected = shown_between(app, start, end)
        assert "漢字とかな" in expected
        assert "def greet(name):" in expected
        copied = await drag(app, pilot, start, end)
        assert copied == expected
        assert "AnswerView" not in copied
        # Ctrl+C with a selection copies the same text, and clears the selection.
        app.copy_to_clipboard("")
        await pilot.press("ctrl+c")
        assert app.clipboard == expected
        assert app.screen.get_selected_text() is None


async def test_a_selection_highlights_the_characters_it_copies(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text=ANSWER))
    async with tui(runtime, tmp_path, tmp_path / "home", size=SIZE) as (app, pilot):
        await a_turn_of_every_kind(app, pilot)
        answer = app.query_one(AnswerView)
        row = next(y for y in text_rows(answer, app) if "second item" in screen_rows(app)[y])
        line = cells(screen_rows(app)[row], answer.content_region.x, answer.content_region.right)
        x = answer.content_region.x + line.index("日本語")
        before = styled_cells(app, row)
        copied = await drag(app, pilot, Offset(x - 5, row), Offset(x + 2, row))
        assert copied == "with 日本"
        await pilot.pause()
        after = styled_cells(app, row)
        assert [c for c, _ in after] == [c for c, _ in before]  # the same characters
        changed = zip(before, after, strict=True)
        assert "".join(c for (c, old), (_, new) in changed if old != new) == copied


def styled_cells(app: DshApp, y: int) -> list[tuple[str, object]]:
    """Each character the screen shows on row ``y``, with its colours."""
    strip = app.screen._compositor.render_strips()[y]
    return [
        (c, (segment.style.color, segment.style.bgcolor) if segment.style else None)
        for segment in strip
        for c in segment.text
    ]
