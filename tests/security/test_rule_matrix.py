"""The rule matrix of docs/security.md, cell by cell: tool x rule kind x mode.

Each call is described by the real tool of a real runtime (real terminals, one running
a shell and one running Python), then decided with no rule, with a deny rule of each
kind and with an allow rule of each kind, in every mode. A rule kind that applies to a
call denies it in every mode, bypass included, and allows it unless the mode forbids
(writes in read-only, anything with effects in plan); a kind that does not apply
changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from dsh.llm import CallId
from dsh.policy.permissions import MODES, Rule, assess
from dsh.runtime import Runtime, start_runtime
from dsh.services import TOOLS
from dsh.testing import FakeLLM
from dsh.tools import Action, ToolContext

KINDS = ("bash", "edit", "read", "name")
RULES = {"bash": "bash(touch:*)", "edit": "edit(src/**)", "read": "read(src/**)"}
# Plan mode refuses every call with effects, rules included (a command it vouches for
# as only reading is allowed: none of these is one).
ASKS = {
    "plan": "deny",
    "read-only": "ask",
    "default": "ask",
    "accept-edits": "ask",
    "bypass": "allow",
}
WRITES = {
    "plan": "deny",
    "read-only": "deny",
    "default": "ask",
    "accept-edits": "allow",
    "bypass": "allow",
}
READS = dict.fromkeys(MODES, "allow")


@dataclass(frozen=True)
class Call:
    label: str
    tool: str
    arguments: dict[str, Any]
    kinds: tuple[str, ...]
    """The rule kinds that apply (besides the tool's own name, which always does)."""
    modes: dict[str, str]
    """The verdict per mode with no rule."""


TOUCH = "touch src/a.txt"
CALLS = (
    Call("bash", "bash", {"command": TOUCH, "description": "t"}, ("bash", "edit", "read"), ASKS),
    Call(
        "bash background",
        "bash",
        {"command": TOUCH, "description": "t", "run_in_background": True},
        ("bash", "edit", "read"),
        ASKS,
    ),
    Call(
        "terminal_open command", "terminal_open", {"command": TOUCH}, ("bash", "edit", "read"), ASKS
    ),
    Call("terminal_open shell", "terminal_open", {}, (), ASKS),
    Call(
        "terminal_send shell",
        "terminal_send",
        {"terminal_id": "SHELL", "text": TOUCH + "\n"},
        ("bash", "edit", "read"),
        ASKS,
    ),
    Call(
        "terminal_send python", "terminal_send", {"terminal_id": "PYTHON", "text": "1\n"}, (), ASKS
    ),
    Call("terminal_signal", "terminal_signal", {"terminal_id": "SHELL", "signal": "INT"}, (), ASKS),
    Call("write", "write", {"file_path": "src/a.txt", "content": "x"}, ("edit",), WRITES),
    Call(
        "edit",
        "edit",
        {"file_path": "src/a.txt", "old_string": "alpha", "new_string": "beta"},
        ("edit",),
        WRITES,
    ),
    Call("read", "read", {"file_path": "src/a.txt"}, ("read",), READS),
    Call("grep", "grep", {"pattern": "alpha", "path": "src"}, ("read",), READS),
    Call("glob", "glob", {"pattern": "*.txt", "path": "src"}, ("read",), READS),
    Call(
        "lsp",
        "lsp",
        {"operation": "hover", "file_path": "src/a.txt", "line": 1, "character": 1},
        ("read",),
        READS,
    ),
    Call("job_kill", "job_kill", {"job_id": "bash-1"}, (), READS),
)


@dataclass
class Described:
    actions: dict[str, tuple[Any, Action]]
    cwd: Path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def described(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Described]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEEPSEEK_API_KEY", "sk-test")
        async for found in _described(tmp_path_factory):
            yield found


async def _described(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Described]:
    root = tmp_path_factory.mktemp("matrix")
    cwd = root / "project"
    (cwd / "src").mkdir(parents=True)
    (cwd / "src" / "a.txt").write_text("alpha\n")
    async with FakeLLM() as server:
        runtime: Runtime = await start_runtime(
            home=root / "home",
            cwd=cwd,
            plugin_configs={"llm-deepseek": {"base_url": server.base_url}},
        )
        try:
            agent = await runtime.agents.create(cwd)
            context = ToolContext(
                call_id=CallId("c0"),
                agent=agent,
                cwd=cwd,
                signal=asyncio.Event(),
                session_id=agent.id,
                services=agent.ctx,
            )
            ids = {}
            for name, command in (("SHELL", ""), ("PYTHON", "python3 -q")):
                tool = runtime.root.get(TOOLS).get("terminal_open")
                assert tool is not None
                opened = await tool.execute(tool.arguments(command=command), context)
                ids[name] = str(opened.meta["terminal"])
            read = runtime.root.get(TOOLS).get("read")
            assert read is not None  # an edit is described only for a file it read
            await read.execute(read.arguments(file_path="src/a.txt"), context)
            actions = {}
            for call in CALLS:
                tool = runtime.root.get(TOOLS).get(call.tool)
                assert tool is not None, call.tool
                arguments = {
                    k: ids.get(v, v) if isinstance(v, str) else v for k, v in call.arguments.items()
                }
                actions[call.label] = (
                    tool,
                    await tool.action(tool.arguments(**arguments), context),
                )
            yield Described(actions, cwd)
        finally:
            await runtime.aclose()


def _rule(kind: str, call: Call) -> Rule:
    return Rule.parse(RULES.get(kind, call.tool))


CELLS = [
    pytest.param(call, kind, mode, id=f"{call.label}-{kind}-{mode}")
    for call in CALLS
    for kind in KINDS
    for mode in MODES
]


@pytest.mark.parametrize(("call", "mode"), [(c, m) for c in CALLS for m in MODES])
def test_with_no_rule_the_mode_decides(described: Described, call: Call, mode: str) -> None:
    tool, action = described.actions[call.label]
    verdict = assess(mode, tool, action, described.cwd)  # type: ignore[arg-type]
    assert verdict.verdict == call.modes[mode], verdict.reason


@pytest.mark.parametrize(("call", "kind", "mode"), CELLS)
def test_a_deny_rule_of_a_kind_that_applies_always_denies(
    described: Described, call: Call, kind: str, mode: str
) -> None:
    tool, action = described.actions[call.label]
    applies = kind == "name" or kind in call.kinds
    verdict = assess(mode, tool, action, described.cwd, deny=[_rule(kind, call)])  # type: ignore[arg-type]
    expected = "deny" if applies else call.modes[mode]
    assert verdict.verdict == expected, verdict.reason


@pytest.mark.parametrize(("call", "kind", "mode"), CELLS)
def test_an_allow_rule_of_a_kind_that_applies_allows_unless_the_mode_forbids(
    described: Described, call: Call, kind: str, mode: str
) -> None:
    tool, action = described.actions[call.label]
    # Path rules allow only their own kind of call: edit() writes, read() reads; a
    # command that names a path is not allowed by a path rule.
    applies = kind == "name" or kind in call.kinds[:1]
    verdict = assess(mode, tool, action, described.cwd, allow=[_rule(kind, call)])  # type: ignore[arg-type]
    forbidden = not applies or call.modes[mode] == "deny"
    expected = call.modes[mode] if forbidden else "allow"
    assert verdict.verdict == expected, verdict.reason
