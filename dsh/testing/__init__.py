"""Testing against a scripted model: a fake OpenAI/DeepSeek-compatible server.

This module is public API: plugin authors use it to test model adapters and anything
else that talks to a chat-completions endpoint, without a network or an API key.
Each chat request consumes the next scripted :class:`Reply`, streamed in DeepSeek's
exact byte format or answered with a fault (HTTP error, slow first byte, cut stream,
malformed line); every request is recorded for assertions::

    from dsh.testing import FakeLLM, Fault, Reply, ToolCallSpec

    async def test_my_adapter_reads_a_tool_call() -> None:
        async with FakeLLM([
            Reply(reasoning="The user wants a file.", tool_calls=[
                ToolCallSpec(name="read", arguments={"path": "a.py"}),
            ]),
            Reply(fault=Fault(status=429, retry_after=0.1)),
        ]) as server:
            result = await my_adapter(base_url=server.base_url).complete("read a.py")
            assert result.tool_calls[0].name == "read"
            assert server.requests[0].body["stream"] is True

With ``pytest_plugins = ["dsh.testing.pytest_plugin"]`` in a ``conftest.py``, the
``fake_llm`` fixture gives each test a started server with an empty script, to which
the test adds replies with ``fake_llm.add(Reply(text="hello"))``.
See docs/plugins.md for the script format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh.testing.fake_llm import (
        FakeLLM,
        Fault,
        Page,
        RecordedRequest,
        Reply,
        Script,
        ScriptError,
        SearchResult,
        ToolCallSpec,
        Usage,
        error_body,
        load_script,
    )

__all__ = [
    "FakeLLM",
    "Fault",
    "Page",
    "RecordedRequest",
    "Reply",
    "Script",
    "ScriptError",
    "SearchResult",
    "ToolCallSpec",
    "Usage",
    "error_body",
    "load_script",
]


def __getattr__(name: str) -> Any:
    # Imported on first use rather than here, so that `python -m dsh.testing.fake_llm`
    # does not find the module already imported by its package (runpy warns of that).
    if name in __all__:
        from dsh.testing import fake_llm

        return getattr(fake_llm, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
