"""``dsh replay`` end to end: sessions made by real ``dsh -p`` runs (tool calls, a denied
call, steering, a queued follow-up, ``--continue``) replay identically through the real
``dsh replay`` command, by id and as an exported replay file; the export leaves out
the key and the project's path; bad input is said in one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import Dsh, close_stdin, finish, send, stream_events


def echo(text: str, delay: float = 0.0) -> ToolCallSpec:
    arguments: dict[str, object] = {"text": text}
    if delay:
        arguments["delay"] = delay
    return ToolCallSpec(name="echo", arguments=arguments)


async def _a_turn_queued_behind_another(dsh: Dsh, fake_llm: FakeLLM) -> None:
    """A stream-json session whose second prompt is queued while the first turn runs."""
    fake_llm.add(Reply(text="First answer.", chunk_delay_ms=5), Reply(text="Second answer."))
    child = await dsh.start("-p", "--input-format", "stream-json")
    await send(
        child,
        {"type": "prompt", "text": "first question"},
        {"type": "followup", "text": "second question"},
    )
    await close_stdin(child)
    assert (await finish(child, stdin=None)).code == 0


async def _sessions_of_a_day(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(
        Reply(reasoning="Echo first.", tool_calls=[echo("one")]),
        Reply(tool_calls=[echo("two"), echo("three")]),
        Reply(text="Echoed three times."),
        Reply(tool_calls=[ToolCallSpec(name="shout", arguments={"text": "hey"})]),
        Reply(text="Shouting was not allowed."),
    )
    assert (await dsh.run("-p", "echo three things")).code == 0
    assert (await dsh.run("-p", "--continue", "now shout")).code == 0

    fake_llm.add(Reply(tool_calls=[echo("slowly", delay=1.0)]), Reply(text="Echoed, and X."))
    child = await dsh.start("-p", "--input-format", "stream-json", "--output-format", "stream-json")
    await send(child, {"type": "prompt", "text": "echo slowly"})
    async for event in stream_events(child):
        if event["type"] == "tool/call":
            await send(child, {"type": "steer", "text": "also mention X"})
            await close_stdin(child)
            break
    assert (await finish(child, stdin=None)).code == 0

    await _a_turn_queued_behind_another(dsh, fake_llm)


async def test_every_session_of_a_headless_day_replays_identically(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    await _sessions_of_a_day(dsh, fake_llm)
    ids = await dsh.session_ids()
    assert len(ids) == 3
    for session_id in ids:
        done = await dsh.run("replay", session_id)
        assert done.code == 0, done.stdout + done.stderr
        assert done.stdout.splitlines()[-1].startswith("identical: ")
    done = await dsh.run("replay", ids[0][:8], "--json")
    assert done.code == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["identical"] is True
    wheres = [step["where"] for step in report["steps"]]
    assert wheres[3] == "request 4 (turn 2, step 1)"
    assert "tool call 4 (shout)" in wheres


async def test_an_exported_replay_file_is_redacted_and_replays(
    dsh: Dsh, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    dsh.key = "sk-e2e-secret-value-123"
    fake_llm.add(Reply(tool_calls=[echo(f"in {dsh.project}")]), Reply(text="Done."))
    prompt = f"my key is {dsh.key}; echo where we are"
    assert (await dsh.run("-p", prompt)).code == 0
    [session_id] = await dsh.session_ids()
    exported = tmp_path / "bug.json"
    done = await dsh.run(
        "sessions", "export", session_id, "--format", "replay", "-o", str(exported)
    )
    assert done.code == 0, done.stderr
    text = exported.read_text()
    assert dsh.key not in text
    assert str(dsh.project) not in text
    assert "my key is [secret]" in text
    assert "in <dsh:cwd>" in text
    document = json.loads(text)
    assert document["format"] == "dsh-replay"
    assert document["session"]["header"]["cwd"] == "<dsh:cwd>"

    done = await dsh.run("replay", str(exported))
    assert done.code == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("identical: ")


async def test_what_cannot_be_replayed_is_said_in_one_line(dsh: Dsh, tmp_path: Path) -> None:
    done = await dsh.run("replay", "nosuchsession")
    assert done.code == 2
    assert done.stderr.startswith("dsh: ")
    assert len(done.stderr.strip().splitlines()) == 1
    junk = tmp_path / "junk.json"
    junk.write_text('{"format": "something else"}')
    done = await dsh.run("replay", str(junk))
    assert done.code == 2
    assert "not a dsh replay file" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


async def test_a_fork_answers_the_later_turns_with_another_model_and_is_kept(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="Flash one."), Reply(text="Flash two."))
    assert (await dsh.run("-p", "first")).code == 0
    assert (await dsh.run("-p", "--continue", "second")).code == 0
    [session_id] = await dsh.session_ids()
    fake_llm.add(Reply(text="Pro two."))
    done = await dsh.run(
        "replay", session_id, "--model", "deepseek-pro", "--until-turn", "1", "--keep"
    )
    assert done.code == 0, done.stdout + done.stderr
    assert "note: turn 2: recorded answer 'Flash two.'; deepseek-pro answered 'Pro two.'" in (
        done.stdout
    )
    assert fake_llm.chat_requests[-1].body["model"] == "deepseek-pro"
    ids = await dsh.session_ids()
    assert len(ids) == 2
    [fork] = [i for i in ids if i != session_id]
    assert f"dsh --resume {fork[:8]}" in done.stdout
    answered = [
        e.data.message.text() for e in await dsh.events(fork) if e.type == "assistant/message"
    ]
    assert answered == ["Flash one.", "Pro two."]

    bad = await dsh.run("replay", session_id, "--until-turn", "1")
    assert bad.code == 2
    assert bad.stderr.strip() == "dsh: --until-turn and --keep go with --model or --provider"


async def test_a_kept_fork_of_a_queued_turn_replays_with_its_switch_of_model(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """Turn 2 was queued while turn 1 ran: the loop never waits between them, so the
    fork's switch is logged (``agent/options``) as turn 2's prompt opens it, and the
    kept fork replays with the switch there (the check after the test replays it)."""
    await _a_turn_queued_behind_another(dsh, fake_llm)
    [session_id] = await dsh.session_ids()
    fake_llm.add(Reply(text="Pro answer."))
    done = await dsh.run(
        "replay", session_id, "--model", "deepseek-pro", "--until-turn", "1", "--keep"
    )
    assert done.code == 0, done.stdout + done.stderr
    assert fake_llm.chat_requests[-1].body["model"] == "deepseek-pro"
    [fork] = [i for i in await dsh.session_ids() if i != session_id]
    events = await dsh.events(fork)
    switched = [e.seq for e in events if e.type == "agent/options"]
    second = [e.seq for e in events if e.type == "turn/start"][1]
    assert len(switched) == 1
    assert [e.data.changes for e in events if e.type == "agent/options"] == [
        {"model": "deepseek-pro"}
    ]
    assert switched[0] < second
    # The kept fork names the recorded folder, not the replay's scratch one.
    headers = [e.data.header for e in events if e.type == "request/header" and e.data.header]
    assert headers
    assert all(f"Working directory: {dsh.project}" in (h.system or "") for h in headers)
    again = await dsh.run("replay", fork)
    assert again.code == 0, again.stdout + again.stderr


async def test_a_resume_with_another_model_replays_with_the_switch(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="Flash one."), Reply(text="Pro two."), Reply(text="Still pro."))
    assert (await dsh.run("-p", "first")).code == 0
    assert (await dsh.run("-p", "--continue", "--model", "deepseek-pro", "second")).code == 0
    assert (await dsh.run("-p", "--continue", "third")).code == 0
    assert [r.body["model"] for r in fake_llm.chat_requests] == [
        "deepseek-flash",
        "deepseek-pro",
        "deepseek-pro",
    ]
    events = await dsh.checked_events()
    assert [e.data.changes for e in events if e.type == "agent/options"] == [
        {"model": "deepseek-pro"}
    ]
    done = await dsh.run("replay", (await dsh.session_ids())[0], "--json")
    assert done.code == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["identical"] is True


async def test_a_tool_of_an_mcp_server_the_replay_lacks_is_stood_in_for(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    """Recorded with an MCP server that the settings no longer name when it is replayed:
    its tool is offered as recorded and answered from the log (recorded tools), or
    said to be unavailable and answered with an error (live tools)."""
    server = Path(__file__).resolve().parent.parent / "fixtures" / "mcp" / "server.py"
    settings = dsh.home / "settings.toml"
    plain = settings.read_text()
    settings.write_text(
        plain + f"[mcp.servers.local]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(server))}, "stdio"]\n'
    )
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="mcp__local__echo", arguments={"text": "hi"})]),
        Reply(text="It said hi."),
    )
    done = await dsh.run("-p", "ask the local server")
    assert done.code == 0, done.stderr[-3000:]
    [session_id] = await dsh.session_ids()
    settings.write_text(plain)  # the server is gone

    recorded = await dsh.run("replay", session_id)
    assert recorded.code == 0, recorded.stdout + recorded.stderr
    assert (
        "note: not in this dsh, stood in for (offered as recorded, answered from the log): "
        in recorded.stdout
    )
    # Every tool the server offered, called or not.
    stood_in = recorded.stdout.split("answered from the log): ")[1].splitlines()[0].split(", ")
    assert {"mcp__local__echo", "mcp__local__add"} <= set(stood_in)
    assert all(name.startswith("mcp__local__") for name in stood_in)

    live = await dsh.run("replay", session_id, "--tools", "live", "--json")
    assert live.code == 1, live.stdout + live.stderr
    report = json.loads(live.stdout)
    assert any("unavailable" in note and "mcp__local__echo" in note for note in report["notes"])
    steps = {step["where"]: step for step in report["steps"]}
    # The tool was offered as recorded: the first request is the same; the second
    # holds the error the call got instead of the server's answer.
    assert steps["request 1 (turn 1, step 1)"]["same"]
    assert report["firstDifference"]["where"] == "request 2 (turn 1, step 2)"
    assert "echo: hi" in report["firstDifference"]["recorded"]
    assert "not available in this replay" in report["firstDifference"]["now"]
    codes = [
        d
        for d in steps["tool call 1 (mcp__local__echo)"]["differences"]
        if d["what"] == "error code"
    ]
    assert [(d["recorded"], d["now"]) for d in codes] == [(None, "REPLAY_UNAVAILABLE")]
