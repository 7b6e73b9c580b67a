"""A subagent's approval, answered in the editor: ``dsh acp`` driven by the SDK's
client side, the child's call labelled with the ``task`` call's description."""

from __future__ import annotations

import asyncio

import pytest

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.acp.client import Editor, editor_session, text
from tests.e2e.harness import TIMEOUT, Dsh, of_type


@pytest.mark.parametrize(("answer", "written"), [("allow-once", True), ("reject-once", False)])
async def test_a_childs_approval_is_asked_in_the_parent_with_its_label(
    dsh: Dsh, fake_llm: FakeLLM, answer: str, written: bool
) -> None:
    target = dsh.project / "note.txt"
    fake_llm.add(
        Reply(
            tool_calls=[
                ToolCallSpec(
                    name="task",
                    arguments={"description": "write the note", "prompt": "MARK-W: write it"},
                )
            ]
        ),
        Reply(
            tool_calls=[
                ToolCallSpec(name="write", arguments={"file_path": "note.txt", "content": "hi\n"})
            ],
            when="MARK-W",
        ),
        Reply(text="The child is through.", when="MARK-W"),
        Reply(text="Done."),
    )
    editor = Editor(answers=[answer])
    async with editor_session(dsh, editor) as (conn, _):
        session = await conn.new_session(cwd=str(dsh.project))
        reply = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=text("delegate")), TIMEOUT
        )
        assert reply.stop_reason == "end_turn"
    [asked] = editor.asked
    assert asked.tool_call.title is not None
    assert asked.tool_call.title.startswith("write the note: ")
    assert target.exists() is written
    # The child's result reached the parent: its last words, or the denial it met.
    parent = await dsh.events(session.session_id)
    [result] = of_type(parent, "tool/result")
    assert result.data.meta["description"] == "write the note"  # type: ignore[attr-defined]
    child = await dsh.events(result.data.meta["session"])  # type: ignore[attr-defined]
    [resolved] = of_type(child, "approval/resolved")
    assert resolved.data.outcome == ("allow-once" if written else "deny")  # type: ignore[attr-defined]
