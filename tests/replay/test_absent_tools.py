"""A tool the recording offered that the replaying runtime does not have (its plugin or
MCP server is missing where the replay runs): offered with its recorded definition,
answered from the log with recorded tools, answered with an error and said to be
unavailable with live ones; and where the tool comes while the replay runs (a server
that adds it after a call), its own definition takes the stand-in's place."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from dsh.kernel import Candidate, Context, Plugin
from dsh.llm import user_text
from dsh.replay.compare import compare
from dsh.replay.recorded import Recording, read_recording
from dsh.replay.run import ReplayOptions, replay
from dsh.runtime import Runtime
from dsh.services import TOOLS
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools import ToolContext, ToolDefinition
from dsh.tools.service import ToolView


class Reading(BaseModel):
    dial: str


async def _gauge(arguments: Reading, context: ToolContext) -> str:
    return f"{arguments.dial} reads 42"


GAUGE = ToolDefinition(
    name="gauge", description="Read a dial.", arguments=Reading, execute=_gauge, read_only=True
)


def _grower(tools: ToolView) -> ToolDefinition:
    """``grow``: its call adds ``gauge`` (as an MCP server that offers a tool later)."""

    async def grow(arguments: Reading, context: ToolContext) -> str:
        tools.register(GAUGE)
        return "grown"

    return ToolDefinition(
        name="grow", description="Offer the gauge.", arguments=Reading, execute=grow, read_only=True
    )


def _growing(ctx: Context, config: object) -> None:
    tools = ctx.get(TOOLS)
    tools.register(_grower(tools))


GROWING = Candidate("growing", "tests", Plugin(name="growing", inject=(TOOLS,), apply=_growing))


async def _recorded(runtime: Runtime, tmp_path: Path) -> Recording:
    agent = await runtime.agents.create(tmp_path)
    agent.followup(user_text("read the pressure"))
    await agent.when_idle()
    await agent.flush()
    return read_recording(agent.session.header, list(agent.session.events))


def _gauge_call(fake_llm: FakeLLM) -> None:
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="gauge", arguments={"dial": "pressure"})]),
        Reply(text="It reads 42."),
    )


async def test_a_missing_tool_is_offered_as_recorded_and_answered_from_the_log(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    runtime.root.get(TOOLS).register(GAUGE)
    _gauge_call(fake_llm)
    recording = await _recorded(runtime, tmp_path)
    assert "gauge" in [t.name for t in recording.requests[0].options.tools or ()]

    run = await replay(recording)  # no plugin of this replay offers gauge
    report = compare(run)
    assert report.identical, report.text()
    assert run.stood_in == ["gauge"]
    assert (
        "not in this dsh, stood in for (offered as recorded, answered from the log): gauge"
        in report.notes
    )


async def test_with_live_tools_a_missing_tool_is_unavailable_and_its_call_an_error(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    runtime.root.get(TOOLS).register(GAUGE)
    _gauge_call(fake_llm)
    recording = await _recorded(runtime, tmp_path)

    report = compare(await replay(recording, ReplayOptions(tools="live")))
    assert (
        "not in this dsh, unavailable (offered as recorded, each call answered with an "
        "error): gauge" in report.notes
    )
    steps = {step.where: step for step in report.steps}
    assert steps["request 1 (turn 1, step 1)"].same  # offered: nothing removed
    [code] = [d for d in steps["tool call 1 (gauge)"].differences if d.what == "error code"]
    assert (code.recorded, code.now) == (None, "REPLAY_UNAVAILABLE")


async def test_a_tool_that_comes_during_the_replay_takes_the_stand_ins_place(
    runtime: Runtime, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """Recorded: ``grow`` adds ``gauge``, which the next request offers and the model
    calls. Replayed with live tools, ``grow`` runs and adds it again: the call runs
    the real gauge, not the stand-in made while it was missing."""
    tools = runtime.root.get(TOOLS)
    tools.register(_grower(tools))
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="grow", arguments={"dial": "-"})]))
    _gauge_call(fake_llm)
    recording = await _recorded(runtime, tmp_path)
    offered = [[t.name for t in r.options.tools or ()] for r in recording.requests]
    assert "gauge" not in offered[0]
    assert "gauge" in offered[1]

    run = await replay(recording, ReplayOptions(tools="live", plugins=[GROWING]))
    report = compare(run)
    assert report.identical, report.text()
    assert run.stood_in == []  # never offered: the real one had come by then
