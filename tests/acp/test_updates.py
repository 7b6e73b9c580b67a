"""The pieces of ``dsh acp`` that need no process: diffs and prompts as the editor and
the model get them."""

from __future__ import annotations

from acp.schema import (
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from dsh.ui.acp.prompt_blocks import prompt_text
from dsh.ui.acp.updates import diff_texts

NEW_FILE = """\
--- /dev/null
+++ b/notes.txt
@@ -0,0 +1,2 @@
+one
+two
"""

TWO_HUNKS = """\
--- a/app.py
+++ b/app.py
@@ -1,2 +1,2 @@
-a = 1
+a = 2
 b = 2
@@ -10,2 +10,2 @@
 y = 9
-z = 0
+z = 1
\\ No newline at end of file
"""


def test_a_new_file_has_no_old_text() -> None:
    assert diff_texts(NEW_FILE) == {"old_text": None, "new_text": "one\ntwo"}


def test_hunks_are_kept_apart_and_markers_left_out() -> None:
    texts = diff_texts(TWO_HUNKS)
    assert texts["old_text"] == "a = 1\nb = 2\n…\ny = 9\nz = 0"
    assert texts["new_text"] == "a = 2\nb = 2\n…\ny = 9\nz = 1"


def test_a_removed_line_that_looks_like_a_header_is_a_line() -> None:
    diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n--- old rule\n+++ new rule\n"
    assert diff_texts(diff) == {"old_text": "-- old rule", "new_text": "++ new rule"}


def test_prompt_blocks_become_one_text() -> None:
    blocks = [
        TextContentBlock(type="text", text="compare"),
        ResourceContentBlock(type="resource_link", uri="file:///src/app.py", name="app.py"),
        ResourceContentBlock(type="resource_link", uri="file:///my%20dir/a.py", name="a.py"),
        EmbeddedResourceContentBlock(
            type="resource",
            resource=TextResourceContents(uri="file:///src/b.py", text="x = ```1```"),
        ),
        ImageContentBlock(type="image", data="aGk=", mime_type="image/png"),
    ]
    text = prompt_text(blocks)
    assert text.startswith("compare @/src/app.py `/my dir/a.py`")
    assert "<context uri='file:///src/b.py'>\n````\nx = ```1```\n````\n</context>" in text
    assert "[image not included" in text


def test_a_child_agents_run_is_text_content_and_a_subagents_approval_is_titled() -> None:
    from pathlib import Path

    from acp.schema import ContentToolCallContent

    from dsh.tools.approval import ApprovalRequest
    from dsh.tools.definition import ToolDefinition
    from dsh.tools.presentation import AgentView, CallResult
    from dsh.ui.acp.permissions import approval_call
    from dsh.ui.acp.updates import Updates
    from dsh.ui.entries import ToolEntry, TranscriptFold
    from tests.support.echo_tool import EchoArguments, echo

    def present(arguments: object, result: CallResult) -> AgentView:
        lines = tuple(f"step {n}" for n in range(7))
        return AgentView("find \x1b[2Jtests", "abc-123", status="completed", lines=lines)

    tool = ToolDefinition(
        name="echo", description="", arguments=EchoArguments, execute=echo, present_result=present
    )

    class Tools:
        def get(self, name: str) -> ToolDefinition | None:
            return tool if name == "echo" else None

    updates = Updates(TranscriptFold(), Tools(), Path("/p"), echo_user=False)
    entry = ToolEntry("tool:c1", 1, "c1", "echo", '{"text": "x"}', status="done", ended_ms=5)
    [start] = updates._entry(entry)
    assert start.title == "find ␛[2Jtests"  # type: ignore[union-attr]
    [content] = start.content or []  # type: ignore[union-attr]
    assert isinstance(content, ContentToolCallContent)
    text = content.content.text  # type: ignore[union-attr]
    assert text == "completed\nstep 2\nstep 3\nstep 4\nstep 5\nstep 6\nsession abc-123"

    asked = ApprovalRequest(
        id="r", session_id="s", call_id="c", tool_name="bash", summary="run make", risk="exec"
    )
    assert approval_call(asked).title == "run make"
    labelled = asked.model_copy(update={"agent_label": "explore"})
    assert approval_call(labelled).title == "explore: run make"
    # Why it is asked is what the person needs to answer (the sandbox cannot start).
    assert approval_call(asked).content is None
    why = "the sandbox cannot start: no bwrap; this command would run unsandboxed"
    [reason] = approval_call(asked.model_copy(update={"reason": why})).content or []
    assert isinstance(reason, ContentToolCallContent)
    assert reason.content.text == why  # type: ignore[union-attr]
