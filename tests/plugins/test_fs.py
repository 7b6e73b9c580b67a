"""The fs plugin loaded as dsh loads plugins, called through the tools service."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dsh.kernel import Candidate, Context, PluginHost, PluginStatus
from dsh.llm import CallId, SessionId, TextBlock, ToolCallBlock, ToolResultBlock
from dsh.services import TOOLS
from dsh.tools import CallOutcome, ToolContext, ToolService
from dsh_plugins.fs import plugin as fs_plugin


def call(name: str, arguments: str, id: str = "call-1") -> ToolCallBlock:
    return ToolCallBlock(id=CallId(id), name=name, arguments=arguments)


def result(outcome: CallOutcome) -> tuple[str, bool]:
    """The text the model reads, and whether it is marked as an error."""
    [answer] = outcome.message.content
    assert isinstance(answer, ToolResultBlock)
    [text] = answer.content
    assert isinstance(text, TextBlock)
    return text.text, bool(answer.is_error)


async def test_the_plugin_through_the_tools_service(tmp_path: Path) -> None:
    root = Context()
    service = ToolService()
    root.provide(TOOLS, service)
    [record] = await PluginHost(root).load([Candidate("fs", "test", plugin=fs_plugin)])
    assert record.status is PluginStatus.LOADED, record.error
    assert sorted(service.visible(None)) == ["edit", "glob", "grep", "multi_edit", "read", "write"]
    assert all(schema.parameters["type"] == "object" for schema in service.schemas(None))

    (tmp_path / "hello.txt").write_text("hello\nworld\n")
    context = ToolContext(
        call_id=CallId("call-1"),
        agent=None,
        cwd=tmp_path,
        signal=asyncio.Event(),
        session_id=SessionId("s1"),
        spill=lambda text, label: tmp_path / "unused",
    )

    read = await service.run(call("read", '{"file_path": "hello.txt"}'), context, None)
    assert read.error_code is None
    assert read.output is not None
    assert read.output.meta["total_lines"] == 2
    assert "1: hello\n2: world" in result(read)[0]

    edit = await service.run(
        call("edit", '{"file_path": "hello.txt", "old_string": "world", "new_string": "there"}'),
        context,
        None,
    )
    assert edit.error_code is None
    assert (tmp_path / "hello.txt").read_text() == "hello\nthere\n"

    # Malformed calls come back as errors the model can correct, never as raises.
    missing = await service.run(
        call("edit", '{"file_path": "hello.txt", "new_string": "x"}'), context, None
    )
    assert missing.error_code == "INVALID_ARGUMENTS"
    text, is_error = result(missing)
    assert is_error
    assert "old_string: Field required" in text
    broken = await service.run(call("write", '{"file_path": "a.txt", "content": '), context, None)
    assert broken.error_code == "INVALID_ARGUMENTS"
    same = await service.run(
        call("edit", '{"file_path": "hello.txt", "old_string": "a", "new_string": "a"}'),
        context,
        None,
    )
    assert same.error_code == "INVALID_ARGUMENTS"

    # A tool's own failure keeps its code.
    absent = await service.run(call("read", '{"file_path": "nope.txt"}'), context, None)
    assert absent.error_code == "FS_NOT_FOUND"
    unmatched = await service.run(
        call("edit", '{"file_path": "hello.txt", "old_string": "zzz", "new_string": "y"}'),
        context,
        None,
    )
    assert unmatched.error_code == "FS_EDIT_NOT_FOUND"

    await root.dispose()
    assert service.visible(None) == {}
