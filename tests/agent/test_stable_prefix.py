"""The prompt-cache prefix over a long session: every request the loop sends begins with
every part of the one before, byte for byte, except where something the person chose
changed it, and there dsh says so.

One real runtime (every bundled plugin, a real MCP server over stdio, a git repository
with an AGENTS.md) talks to the scripted server for 30 turns, each with tool calls and
reasoning, through the real DeepSeek adapter. The scripted server simulates DeepSeek's
prefix cache (``Script.prompt_cache``), so the cache figures the status bar shows are the
server's own.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dsh.kernel import Candidate
from dsh.llm import user_text
from dsh.runtime import Runtime, start_runtime
from dsh.session import PrefixChanged
from dsh.settings import load_settings
from dsh.testing import FakeLLM, Reply, Script, ToolCallSpec
from dsh.testing.fake_llm import RecordedRequest
from dsh.ui.entries import TranscriptFold
from dsh.ui.render import render_status
from dsh_plugins.compaction.service import SERVICE as COMPACTION
from dsh_plugins.mcp import MCP
from tests.support.echo_tool import plugin as echo_plugin
from tests.support.waits import HANG_S

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "mcp" / "server.py"
TURNS = 30
INSTRUCTIONS_CHANGE = 8
"""Before this turn the person edits AGENTS.md: appended, the prefix holds."""
MODEL_SWITCH = 12
COMPACT_BEFORE = 16
GROW = 20
"""This turn's tool call adds a tool to the MCP server: the tool list changes."""


def _turn_replies(turn: int) -> list[Reply]:
    """A tool-calling step and an answer, both thinking, as DeepSeek V4 answers."""
    if turn == GROW:
        calls = [ToolCallSpec(name="mcp__fixture__grow", arguments={})]
    elif turn % 3 == 0:
        calls = [
            ToolCallSpec(name="echo", arguments={"text": f"turn {turn} a"}),
            ToolCallSpec(name="mcp__fixture__echo", arguments={"text": f"turn {turn} b"}),
        ]
    elif turn % 3 == 1:
        calls = [ToolCallSpec(name="read", arguments={"file_path": "notes.txt"})]
    else:
        calls = [ToolCallSpec(name="echo", arguments={"text": f"turn {turn}"})]
    return [
        Reply(reasoning=f"Turn {turn}: look first.", tool_calls=calls),
        Reply(reasoning=f"Turn {turn}: that is enough.", text=f"Turn {turn} done."),
    ]


def _script() -> Script:
    replies: list[Reply] = []
    for turn in range(1, TURNS + 1):
        if turn == COMPACT_BEFORE:
            replies.append(Reply(text="Summary: thirty turns of echoes and reads."))
        replies += _turn_replies(turn)
    return Script(replies=replies, prompt_cache=True)


def _parts(request: RecordedRequest) -> list[str]:
    """The request as a prefix cache sees it, each part serialized as sent (key order
    kept): the model, the tool list, then each message."""
    body = request.body
    head = json.dumps({"model": body["model"], "tools": body.get("tools")}, ensure_ascii=False)
    return [head, *(json.dumps(m, ensure_ascii=False) for m in body["messages"])]


def _extends(before: RecordedRequest, after: RecordedRequest) -> bool:
    old, new = _parts(before), _parts(after)
    return new[: len(old)] == old


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git repository with instructions and a file to read."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "AGENTS.md").write_text("Run the tests with pytest.\n")
    (project / "notes.txt").write_text("some notes\n")
    for command in (
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"],
    ):
        subprocess.run(command, cwd=project, check=True)
    return project


@pytest.fixture
async def long_day(tmp_path: Path, project: Path) -> AsyncIterator[tuple[Runtime, FakeLLM, Path]]:
    home = tmp_path / "home"
    home.mkdir()
    async with FakeLLM(_script()) as server:
        (home / "settings.toml").write_text(
            f"[plugins.llm-deepseek]\nbase_url = {json.dumps(server.base_url)}\n"
            "[plugins.title]\ngenerate = false\n"
            '[permissions]\nallow = ["mcp__fixture__grow"]\n'
            f"[mcp.servers.fixture]\ncommand = {json.dumps(sys.executable)}\n"
            f'args = [{json.dumps(str(FIXTURE))}, "stdio"]\n'
        )
        runtime = await start_runtime(
            home=home, cwd=project, settings=load_settings(home, project, trust=True)
        )
        try:
            await runtime.plugins.load([Candidate("echo", "tests", echo_plugin)])
            await asyncio.wait_for(runtime.root.get(MCP).settled(), HANG_S)
            yield runtime, server, project
        finally:
            await runtime.aclose()


async def test_thirty_turns_keep_the_prefix_except_where_the_person_changed_it(
    long_day: tuple[Runtime, FakeLLM, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime, server, project = long_day
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    agent = await runtime.agents.create(project)
    fold = TranscriptFold(cost=runtime.llm.cost)
    agent.session.subscribe(fold.apply)
    first_of_turn: dict[int, int] = {}
    compaction_requests: set[int] = set()
    for turn in range(1, TURNS + 1):
        if turn == INSTRUCTIONS_CHANGE:
            (project / "AGENTS.md").write_text("Run the tests with pytest -x.\n")
        if turn == MODEL_SWITCH:
            agent.set_options(model="deepseek-v4-pro")
        if turn == COMPACT_BEFORE:
            before = len(server.chat_requests)
            await asyncio.wait_for(runtime.root.get(COMPACTION).compact_now(agent, None), HANG_S)
            compaction_requests.update(range(before, len(server.chat_requests)))
        first_of_turn[turn] = len(server.chat_requests)
        agent.followup(user_text(f"Step {turn}, please."))
        await asyncio.wait_for(agent.when_idle(), HANG_S)

    requests = server.chat_requests
    assert len(compaction_requests) == 1
    loop = [i for i in range(len(requests)) if i not in compaction_requests]
    assert len(loop) == 2 * TURNS
    assert all(requests[i].status == 200 for i in range(len(requests)))

    # Request by request: which ones do not begin with the one before.
    broken = {i for i, j in itertools.pairwise(loop) if not _extends(requests[i], requests[j])}
    grown = first_of_turn[GROW] + 1  # the answer step after the tool list grew
    expected = {
        loop[loop.index(first_of_turn[MODEL_SWITCH]) - 1],
        loop[loop.index(first_of_turn[COMPACT_BEFORE]) - 1],
        loop[loop.index(grown) - 1],
    }
    assert broken == expected

    # An edited AGENTS.md is entered again after the history, not in the prompt's head.
    edited = requests[first_of_turn[INSTRUCTIONS_CHANGE]]
    previous = requests[first_of_turn[INSTRUCTIONS_CHANGE] - 1]
    where = [i for i, m in enumerate(edited.body["messages"]) if "pytest -x" in json.dumps(m)]
    assert where
    assert min(where) >= len(previous.body["messages"])

    # Where it broke, the log says what changed, before the request that pays for it.
    said = [e.data for e in agent.session.events if isinstance(e.data, PrefixChanged)]
    assert [(d.turn, [c.part for c in d.changes]) for d in said] == [
        (MODEL_SWITCH, ["model"]),
        (COMPACT_BEFORE, ["history"]),
        (GROW, ["tools"]),
    ]
    assert "deepseek-flash → deepseek/deepseek-v4-pro" in said[0].changes[0].detail
    assert "+mcp__fixture__extra" in said[2].changes[0].detail
    assert all(d.cost.tokens > 0 and d.cost.uncached and d.cost.cached for d in said)
    notices = [e.text for e in fold.entries if e.key.startswith("cache:")]  # type: ignore[attr-defined]
    assert len(notices) == 3
    assert notices[0].startswith("The prompt cache starts over (the model: ")

    # The server's cache: every request that extends the one before hits what that
    # one sent; the first after a break hits less.
    usage = [requests[i].usage for i in range(len(requests))]
    assert all(u is not None for u in usage)
    for i, j in itertools.pairwise(loop):
        hit = usage[j].cache_hit_tokens  # type: ignore[union-attr]
        if i in expected:
            assert hit < usage[i].prompt_tokens  # type: ignore[union-attr]
        else:
            assert hit >= usage[i].prompt_tokens  # type: ignore[union-attr]

    # The status bar's cache share is the server's: hits over input, every call counted.
    hits = sum(u.cache_hit_tokens for u in usage)  # type: ignore[union-attr]
    prompt = sum(u.prompt_tokens for u in usage)  # type: ignore[union-attr]
    assert fold.status.cache_hit_ratio == pytest.approx(hits / prompt)
    assert fold.status.cache_saved is not None
    assert fold.status.cache_saved > 0
    shown = render_status(fold.status).plain
    assert f"cache {hits / prompt:.0%} saved $" in shown
