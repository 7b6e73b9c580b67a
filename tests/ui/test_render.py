"""The shared rich rendering of entries and tool presentations, read as plain text."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console, RenderableType
from rich.text import Text

from dsh.llm import TokenUsage
from dsh.tools.definition import ToolDefinition
from dsh.tools.presentation import (
    CallResult,
    ChecklistView,
    CommandView,
    DiffView,
    FileDiff,
    Presentation,
    ScreenView,
    TextView,
)
from dsh.ui.entries import NoticeEntry, ToolEntry, TurnFooter
from dsh.ui.render import (
    generic_title,
    render_footer,
    render_notice,
    render_presentation,
    render_status,
    tool_header,
    tool_presentation,
    tool_summary,
    visible_view,
)
from dsh.ui.session_status import Status
from tests.support.echo_tool import EchoArguments, echo


def shown(renderable: RenderableType) -> str:
    console = Console(record=True, width=100, color_system=None)
    console.print(renderable)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines())


def tool_entry(arguments: Any = None, **fields: Any) -> ToolEntry:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolEntry("tool:c1", 1, "c1", fields.pop("name", "echo"), raw, **fields)


class Tools:
    def __init__(self, *tools: ToolDefinition) -> None:
        self.tools = {tool.name: tool for tool in tools}

    def get(self, name: str) -> ToolDefinition | None:
        return self.tools.get(name)


def definition(**presenters: Any) -> ToolDefinition:
    return ToolDefinition(
        name="echo", description="Echo.", arguments=EchoArguments, execute=echo, **presenters
    )


# ---------------------------------------------------------------- presentations


def test_a_tool_without_presenters_gets_the_generic_card() -> None:
    entry = tool_entry({"text": "hi"}, status="done", ended_ms=5, result="echo: hi")
    view = tool_presentation(Tools(definition()), entry)
    assert view == TextView(title="echo hi", body="echo: hi")
    assert tool_presentation(None, entry) == view  # an unknown tool too


def test_presenters_see_the_arguments_and_the_logged_result() -> None:
    seen: list[Any] = []

    def on_call(args: dict[str, Any]) -> Presentation:
        seen.append(args)
        return TextView(title=f"calling {args['text']}")

    def on_result(args: dict[str, Any], result: CallResult) -> Presentation:
        seen.append(result)
        return TextView(title="ended", body=result.text)

    tools = Tools(definition(present_call=on_call, present_result=on_result))
    running = tool_entry({"text": "hi"})
    assert tool_presentation(tools, running) == TextView(title="calling hi")
    failed = tool_entry(
        {"text": "hi"}, status="failed", ended_ms=9, result="boom", error_code="X", meta={"a": 1}
    )
    assert tool_presentation(tools, failed) == TextView(title="ended", body="boom")
    assert seen == [
        {"text": "hi"},
        CallResult(text="boom", is_error=True, error_code="X", meta={"a": 1}),
    ]


def test_a_failing_presenter_or_bad_json_falls_back_to_the_generic_card() -> None:
    def broken(args: dict[str, Any]) -> Presentation:
        raise RuntimeError("bug")

    tools = Tools(definition(present_call=broken))
    assert tool_presentation(tools, tool_entry({"text": "x"})) == TextView(title="echo x")
    bad = tool_entry('{"text": "unterminated')
    assert tool_presentation(tools, bad) == TextView(title='echo {"text": "unterminated')


def test_text_views_are_cut_unless_expanded() -> None:
    body = "\n".join(f"line {n}" for n in range(30))
    text = shown(render_presentation(TextView("Read a.txt", body), max_lines=5))
    assert text.splitlines() == [
        "Read a.txt",
        *(f"line {n}" for n in range(5)),
        "… 25 more lines",
    ]
    assert "line 29" in shown(render_presentation(TextView("t", body), expanded=True))
    assert shown(render_presentation(TextView("t", body), show_title=False)).startswith("line 0")
    code = shown(render_presentation(TextView("a.py", "def f():\n    return 1", "python")))
    assert code.splitlines()[1:] == ["def f():", "    return 1"]


def test_a_markdown_text_view_is_rendered_as_markdown() -> None:
    """A plan's card: headings, lists and emphasis read as Markdown, not as source;
    the model's control characters still shown as pictures (visible_view)."""
    plan = "# Add a greeting\n\n1. Write **hello.txt**\n2. Run `pytest`\n\nRisk: \x1b[31mnone"
    view = visible_view(TextView("Plan", plan, "markdown"))
    lines = shown(render_presentation(view, expanded=True)).splitlines()
    assert lines[0] == "Plan"
    assert any(line.strip() == "Add a greeting" for line in lines)  # no "#"
    assert " 1 Write hello.txt" in lines  # no "**"
    assert " 2 Run pytest" in lines
    assert "Risk: ␛[31mnone" in lines
    assert "\x1b" not in "".join(lines)
    cut = shown(render_presentation(view, max_lines=3)).splitlines()
    assert cut[-1] == "… 3 more lines"


def test_a_single_line_over_the_limit_is_shown_not_hidden() -> None:
    # "… 1 more line" would take the room of the line it hides.
    six = "\n".join(f"line {n}" for n in range(6))
    text = shown(render_presentation(TextView("t", six), max_lines=5, show_title=False))
    assert text.splitlines() == [f"line {n}" for n in range(6)]
    output = shown(render_presentation(CommandView("ls", output=six), max_lines=5))
    assert "earlier" not in output
    assert "line 0" in output


def test_a_command_shows_its_output_tail_and_how_it_ended() -> None:
    output = "\n".join(str(n) for n in range(50))
    view = CommandView("pytest -q", "run the tests", output=output, exit_code=1)
    lines = shown(render_presentation(view, max_lines=3)).splitlines()
    assert lines == [
        "$ pytest -q",
        "run the tests",
        "… 47 earlier lines",
        "47",
        "48",
        "49",
        " exit 1",
    ]
    assert shown(render_presentation(CommandView("ls", exit_code=0))).splitlines()[-1] == " exit 0"
    killed = CommandView("sleep 9", signal="SIGTERM")
    assert "killed SIGTERM" in shown(render_presentation(killed))
    assert "timed out" in shown(render_presentation(CommandView("sleep 9", timed_out=True)))
    assert shown(render_presentation(CommandView("ls"))) == "$ ls"  # still running


def test_a_diff_shows_each_file_with_its_counts() -> None:
    diff = "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n-old\n+new\n same"
    view = DiffView("Edited a.py", (FileDiff("a.py", diff, added=1, removed=1),))
    assert shown(render_presentation(view)).splitlines() == [
        "Edited a.py",
        "a.py +1 \u22121",
        "--- a/a.py",
        "+++ b/a.py",
        "@@ -1,2 +1,2 @@",
        "-old",
        "+new",
        " same",
    ]


def test_diff_lines_are_coloured_by_kind() -> None:
    view = DiffView("d", (FileDiff("a", "@@ -1 +1 @@\n-old\n+new", 1, 1),))
    console = Console(record=True, width=100, color_system="standard", force_terminal=True)
    console.print(render_presentation(view))
    styled = console.export_text(styles=True)
    assert "\x1b[31m-old" in styled
    assert "\x1b[32m+new" in styled
    assert "\x1b[36m@@" in styled


def test_a_screen_is_boxed_with_its_status() -> None:
    view = ScreenView("vim a.txt", ("hello", "world", "", ""), cursor=(1, 2), status="-- INSERT --")
    assert shown(render_presentation(view)).splitlines() == [
        "╭─ vim a.txt ─╮",
        "│ hello       │",
        "│ world       │",
        "╰─────────────╯",
        "-- INSERT --",
    ]


def test_a_checklist_marks_each_state() -> None:
    view = ChecklistView(
        "Plan", (("read", "completed"), ("edit", "in_progress"), ("test", "pending"))
    )
    assert shown(render_presentation(view)).splitlines() == ["Plan", "☑ read", "◐ edit", "☐ test"]


# ---------------------------------------------------------------- one-liners


def test_headers_say_status_name_summary_and_time() -> None:
    running = tool_entry({"command": "ls -la\npwd"}, name="bash", started_ms=1_000)
    assert shown(tool_header(running, now_ms=3_500)) == "● bash ls -la… 2.5 s"
    assert shown(tool_header(running, spinner="⠋")) == "⠋ bash ls -la…"
    done = tool_entry({"path": "a.py"}, name="read", status="done", started_ms=0, ended_ms=120)
    assert shown(tool_header(done, now_ms=99_999)) == "✓ read a.py 120 ms"
    asking = tool_entry({"text": "hi"}, name="shout", status="awaiting-approval")
    assert shown(tool_header(asking)) == "? shout hi awaiting approval"
    denied = tool_entry({}, name="shout", status="denied", ended_ms=0, denial="not now")
    assert shown(tool_header(denied)) == "⊘ shout 0 ms denied: not now"
    for status, icon in (("failed", "✗"), ("cancelled", "■")):
        assert shown(tool_header(tool_entry({}, status=status))).startswith(f"{icon} echo")


def test_argument_summaries() -> None:
    assert tool_summary(tool_entry({"pattern": "TODO", "path": "src"})) == "src"
    assert tool_summary(tool_entry({"limit": 3, "flag": True})) == '{"limit":3,"flag":true}'
    long = tool_summary(tool_entry({"query": "x" * 200}))
    assert len(long) == 80
    assert long.endswith("…")
    assert tool_summary(tool_entry("not json")) == "not json"
    assert generic_title(tool_entry({})) == "echo"


def test_a_plan_is_summed_up_by_its_first_line_not_as_json() -> None:
    plan = tool_entry({"plan": "# Greet by name\n\n1. Create `greet.py`."}, name="exit_plan_mode")
    assert tool_summary(plan) == "# Greet by name…"


def test_footer() -> None:
    usage = TokenUsage(input_tokens=3_200, output_tokens=512, cache_read_tokens=9_100)
    footer = TurnFooter("f", 9, 3, "completed", None, usage, 0.0021, 4_200)
    assert shown(render_footer(footer)) == (
        "── turn 3 · completed · 12.3k in (9.1k cached, 74%) · 512 out · $0.0021 · 4.2 s"
    )
    failed = TurnFooter("f", 9, 4, "failed", "server error", None, None, 61_000)
    assert shown(render_footer(failed)) == "── turn 4 · failed: server error · 1m 01s"
    cancelled = TurnFooter("f", 9, 5, "cancelled", "cancelled", None, None, 300)
    assert shown(render_footer(cancelled)) == "── turn 5 · cancelled · 300 ms"


def test_status_line() -> None:
    status = Status(
        model="deepseek-chat",
        state="running-tool",
        tool="bash",
        usage=TokenUsage(input_tokens=2_000, output_tokens=1_000, cache_read_tokens=6_000),
        cost=0.0123,
        context_tokens=42_000,
        context_window=100_000,
    )
    assert shown(render_status(status, queued=2)) == (
        "deepseek-chat · running bash · 9.0k tokens · ctx 42% · $0.0123 · cache 75% · 2 queued"
    )
    assert shown(render_status(Status())) == "idle"
    assert shown(render_status(Status(state="waiting-for-you", tool="x"))) == "waiting for you"


def test_notices_by_level() -> None:
    for level, mark in (("info", "•"), ("warning", "⚠"), ("error", "✗")):
        notice = NoticeEntry("n", 1, level, "careful")  # type: ignore[arg-type]
        assert shown(render_notice(notice)) == f"{mark} careful"
    assert isinstance(render_notice(NoticeEntry("n", 1, "info", "x")), Text)


def test_a_child_agents_run_shows_its_last_lines_and_its_session() -> None:
    from dsh.tools.presentation import AgentView

    lines = tuple(f"step {n}" for n in range(9))
    view = AgentView("find the tests", "abc-123", status="failed", lines=lines)
    text = shown(render_presentation(view, max_lines=8))
    assert text.splitlines()[0] == "find the tests · failed"
    assert "… 4 earlier lines" in text
    assert "step 3" not in text
    assert "step 4" in text
    assert "step 8" in text
    assert text.splitlines()[-1] == "session abc-123"
    assert "step 0" in shown(render_presentation(view, expanded=True))
    assert not shown(render_presentation(view, show_title=False)).startswith("find")


def test_a_child_agents_texts_are_shown_as_pictures() -> None:
    from dsh.tools.presentation import AgentView

    view = AgentView("a\x1b[2Jb\nc", "s\x07", status="ok\x1b]2;x\x07", lines=("l\x1b[31m\nm",))
    safe = visible_view(view)
    assert isinstance(safe, AgentView)
    assert safe.title == "a␛[2Jb␊c"
    assert safe.status == "ok␛]2;x␇"
    assert safe.lines == ("l␛[31m␊m",)
    assert "\x07" not in safe.session_id
    assert "\x1b" not in shown(render_presentation(safe))
