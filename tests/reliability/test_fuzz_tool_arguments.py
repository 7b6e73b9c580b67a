"""Fuzzing tool-argument validation: whatever argument text a model sends, a call never
raises into the loop, never runs with arguments its model refuses, and tells the model
what was wrong in a bounded message.

The tools are the real argument models of every bundled tool (bash, the file tools,
terminals, lsp, todo...), each with a recording body in place of its real one.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from dsh.kernel import Context
from dsh.llm import CallId, ToolCallBlock
from dsh.runtime import start_runtime
from dsh.services import TOOLS
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools import ToolContext, ToolDefinition, ToolService
from tests.e2e.harness import Dsh, of_type, text_of
from tests.reliability.profiles import fuzz


def bundled_tools() -> dict[str, ToolDefinition]:
    async def collect() -> dict[str, ToolDefinition]:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            runtime = await start_runtime(home=root / "home", cwd=root)
            try:
                return dict(runtime.root.get(TOOLS).service.visible(None))
            finally:
                await runtime.aclose()

    return asyncio.run(collect())


BUNDLED = bundled_tools()
RAN: list[tuple[str, BaseModel]] = []


def recorder(tool: ToolDefinition) -> ToolDefinition:
    async def execute(arguments: Any, context: ToolContext) -> str:
        RAN.append((tool.name, arguments))
        return "ran"

    return ToolDefinition(
        name=tool.name,
        description=tool.description,
        arguments=tool.arguments,
        execute=execute,
        read_only=tool.read_only,
    )


SERVICE = ToolService()
_ROOT = Context(name="fuzz")
for _tool in BUNDLED.values():
    SERVICE.add(_ROOT, _tool.name, recorder(_tool))


def field_names(model: type[BaseModel]) -> list[str]:
    names = []
    for name, info in model.model_fields.items():
        names.append(name)
        if isinstance(info.alias, str):
            names.append(info.alias)
        choices = getattr(info.validation_alias, "choices", None) or []
        names.extend(c for c in choices if isinstance(c, str))
    return names or ["x"]


TEXT = st.text(max_size=30)  # lone surrogates included: models send what they send
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | TEXT
)


@st.composite
def argument_texts(draw: st.DrawFn, tool: ToolDefinition) -> str:
    keys = st.sampled_from(field_names(tool.arguments)) | TEXT
    values = st.recursive(
        SCALARS,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4),
        max_leaves=10,
    )
    match draw(st.sampled_from(["object", "value", "text", "nested", "cut"])):
        case "object":
            return json.dumps(draw(st.dictionaries(keys, values, max_size=5)))
        case "value":
            return json.dumps(draw(values))
        case "text":
            return draw(st.text(max_size=60))
        case "nested":
            depth = draw(st.integers(1, 200_000))
            opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
            return opener * depth + "1" + closer * depth
        case _:
            text = json.dumps(draw(st.dictionaries(keys, values, min_size=1, max_size=5)))
            return text[: draw(st.integers(0, len(text)))]


@st.composite
def calls(draw: st.DrawFn) -> tuple[ToolDefinition, str]:
    tool = draw(st.sampled_from(sorted(BUNDLED.values(), key=lambda t: t.name)))
    return tool, draw(argument_texts(tool))


def context() -> ToolContext:
    return ToolContext(
        call_id=CallId("call_1"), agent=None, cwd=Path("/nonexistent"), signal=asyncio.Event()
    )


@fuzz(400)
@given(calls())
def test_any_argument_text_gives_a_result_never_a_raise(case: tuple[ToolDefinition, str]) -> None:
    tool, raw = case
    call = ToolCallBlock(id=CallId("call_1"), name=tool.name, arguments=raw)
    RAN.clear()
    SERVICE.concurrency_safe(call, None)  # must not raise either
    outcome = asyncio.run(SERVICE.run(call, context(), None))
    text = text_of_result(outcome.message)
    if RAN:
        [(name, arguments)] = RAN
        assert name == tool.name
        assert outcome.error_code is None
        # It ran only with arguments its own model accepts, as given.
        assert tool.arguments.model_validate(json.loads(raw) if raw.strip() else {}) == arguments
    else:
        assert outcome.error_code == "INVALID_ARGUMENTS", (outcome.error_code, text)
        assert text.startswith("Error: the arguments ")
    assert len(text) < 20_000, "the model is sent a bounded message"


def text_of_result(message: Any) -> str:
    return "".join(getattr(b, "text", "") for b in message.result.content)


# ---------------------------------------------------------------------- end to end


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ("[" * 100_000 + "]" * 100_000, "INVALID_ARGUMENTS"),  # deeper than json recurses
        ('{"text": NaN, "delay": Infinity}', "INVALID_ARGUMENTS"),
        ("1" * 10_000, "INVALID_ARGUMENTS"),  # more digits than Python converts
        # A lone surrogate, escaped as JSON allows: valid text for echo, which says it
        # back, so it reaches the log and the next request.
        (r'{"text": "\ud83d cut from its pair"}', None),
    ],
    ids=["deep", "nan", "digits", "surrogate"],
)
async def test_hostile_arguments_do_not_stop_the_turn(
    dsh: Dsh, fake_llm: FakeLLM, arguments: str, code: str | None
) -> None:
    # In few chunks: how a reply is cut up is the stream fuzz tests' business, and the
    # deepest arguments (200,000 characters) would otherwise come 4 characters a chunk.
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="echo", arguments=arguments)], chunk_size=4096),
        Reply(text="Recovered."),
    )
    done = await dsh.run("-p", "call echo")
    assert done.code == 0, done.stderr[-3000:]
    assert done.stdout == "Recovered.\n"
    events = await dsh.checked_events()  # stored, reloaded, every request rebuilt
    [result] = of_type(events, "tool/result")
    answer = [
        text_of(m) for m in fake_llm.chat_requests[-1].body["messages"] if m["role"] == "tool"
    ]
    if code is None:
        assert result.data.error is None
        assert answer == ["echo: \ud83d cut from its pair"]
    else:
        assert result.data.error.code == code
        assert answer[0].startswith("Error: the arguments ")
