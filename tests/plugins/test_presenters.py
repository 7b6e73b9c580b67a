"""The UI views the bundled tools give of their calls, built from real results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsh.services import TOOLS
from dsh.tools import (
    CallResult,
    ChecklistView,
    CommandView,
    DiffView,
    TextView,
    ToolDefinition,
    ToolOutput,
)
from dsh_plugins.todo import checklist
from tests.plugins.bash_support import loaded
from tests.plugins.fs_harness import Fs


def result_of(output: ToolOutput) -> CallResult:
    assert isinstance(output.content, str)
    return CallResult(text=output.content, is_error=output.is_error, meta=output.meta)


def present(tool: ToolDefinition, arguments: dict[str, Any], output: ToolOutput) -> Any:
    assert tool.present_call is not None
    assert tool.present_result is not None
    assert tool.present_call(arguments) is not None
    return tool.present_result(arguments, result_of(output))


async def test_file_tools_show_reads_diffs_and_searches(tmp_path: Path) -> None:
    fs = Fs(tmp_path)
    (fs.cwd / "app.py").write_text("def f():\n    return 1\n")
    read = await fs.call("read", file_path="app.py")
    view = present(fs.tools["read"], {"file_path": "app.py"}, read)
    assert isinstance(view, TextView)
    assert view.title == "Read app.py (lines 1-2 of 2)"
    assert view.body == "def f():\n    return 1"
    assert view.language == "python"

    edit_args = {"file_path": "app.py", "old_string": "return 1", "new_string": "return 2"}
    edit = await fs.call("edit", **edit_args)
    diff = present(fs.tools["edit"], edit_args, edit)
    assert isinstance(diff, DiffView)
    assert diff.title == "Edit app.py"  # the file's own line says +1 -1
    assert (diff.files[0].added, diff.files[0].removed) == (1, 1)
    write_args = {"file_path": "notes.txt", "content": "one\n"}
    written = present(fs.tools["write"], write_args, await fs.call("write", **write_args))
    assert isinstance(written, DiffView)
    assert written.title == "Create notes.txt"
    write_args["content"] = "two\n"
    rewritten = present(fs.tools["write"], write_args, await fs.call("write", **write_args))
    assert isinstance(rewritten, DiffView)
    assert rewritten.title == "Write notes.txt"
    assert "-    return 1" in diff.files[0].diff
    assert "+    return 2" in diff.files[0].diff

    grep = await fs.call("grep", pattern="return")
    found = present(fs.tools["grep"], {"pattern": "return"}, grep)
    assert isinstance(found, TextView)
    assert found.title == "Grep return: 1 matches in 1 files"
    glob = await fs.call("glob", pattern="*.py")
    listed = present(fs.tools["glob"], {"pattern": "*.py"}, glob)
    assert isinstance(listed, TextView)
    assert listed.body == "app.py"


async def test_bash_shows_the_command_its_output_and_exit(tmp_path: Path) -> None:
    async with loaded(tmp_path) as harness:
        tool = harness.root.get(TOOLS).get("bash")
        assert tool is not None
        arguments = {"command": "echo out; exit 3", "description": "fail on purpose"}
        output = await harness.call("bash", arguments)
        view = present(tool, arguments, output)
    assert isinstance(view, CommandView)
    assert view.command == "echo out; exit 3"
    assert view.output == "out"
    assert view.exit_code == 3


def test_todo_write_shows_a_checklist() -> None:
    view = checklist({"todos": [{"content": "a", "status": "completed"}, {"content": "b"}]})
    assert isinstance(view, ChecklistView)
    assert view.items == (("a", "completed"),)


def test_a_question_card_shows_the_questions_and_the_answers_not_json() -> None:
    from dsh.tools.presentation import CallResult
    from dsh_plugins.ask_user import present_call, present_result

    arguments = {
        "questions": [
            {"id": "color", "question": "Which colour?", "options": [{"label": "Red"}]},
            {"id": "size", "question": "How big?"},
        ]
    }
    asking = present_call(arguments)
    assert isinstance(asking, TextView)
    assert asking.body == "Which colour?\n  · Red\nHow big?"
    answers = '{"answers": [{"id": "color", "selected": ["Red"]}, {"id": "size", "custom": "XL"}]}'
    answered = present_result(arguments, CallResult(text=answers))
    assert isinstance(answered, TextView)
    assert answered.body == "Which colour? → Red\nHow big? → XL"
    dismissed = present_result(arguments, CallResult(text="Error: dismissed", is_error=True))
    assert isinstance(dismissed, TextView)
    assert dismissed.title == "Asked you: no answer"
