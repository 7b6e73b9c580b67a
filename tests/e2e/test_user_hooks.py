"""User hooks through the real binary: ``dsh -p`` against the scripted server, the
hooks in the home's settings (or a hostile project's), each a small script that
records the JSON it was given (tests/fixtures/hooks/hook.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import SETTINGS, Dsh, of_type

HOOK = Path(__file__).resolve().parent.parent / "fixtures" / "hooks" / "hook.py"


def hook_table(
    event: str, record: Path, mode: str, *, matcher: str = "", timeout: float = 30
) -> str:
    command = json.dumps(f"{sys.executable} {HOOK} {record} {mode}")
    return (
        f'[[hooks.{event}]]\nmatcher = "{matcher}"\n'
        f'hooks = [{{ type = "command", command = {command}, timeout = {timeout} }}]\n'
    )


def configure(dsh: Dsh, *tables: str) -> None:
    (dsh.home / "settings.toml").write_text(SETTINGS + "".join(tables))


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def bash(command: str) -> ToolCallSpec:
    return ToolCallSpec(name="bash", arguments={"command": command, "description": "test"})


def tool_texts(body: dict[str, Any]) -> list[str]:
    return [json.dumps(m["content"]) for m in body["messages"] if m["role"] == "tool"]


async def test_pre_tool_use_denies_with_exit_2_and_the_model_reads_why(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    record, marker = dsh.root / "pre.jsonl", dsh.root / "touched"
    configure(dsh, hook_table("PreToolUse", record, "deny-touch", matcher="bash"))
    fake_llm.add(Reply(tool_calls=[bash(f"touch {marker}")]), Reply(text="It was refused."))
    done = await dsh.run("-p", "touch the marker", "--permission-mode", "bypass")
    assert done.code == 0, done.stderr[-3000:]
    assert not marker.exists()  # denied even in bypass: the hook decides first
    [payload] = records(record)
    assert payload["hook_event_name"] == "PreToolUse"
    assert payload["tool_name"] == "Bash"  # Claude Code's name, which scripts read
    assert payload["dsh"]["tool_name"] == "bash"  # and dsh's own
    assert payload["tool_input"]["command"] == f"touch {marker}"
    assert payload["cwd"] == str(dsh.project.resolve()) or payload["cwd"] == str(dsh.project)
    assert payload["session_id"]
    assert "touching files is not allowed here" in tool_texts(fake_llm.chat_requests[1].body)[0]
    events = await dsh.checked_events()
    [ran] = of_type(events, "hooks/ran")
    assert (ran.data.event, ran.data.outcome, ran.data.exit_code) == ("PreToolUse", "denied", 2)


async def test_pre_tool_use_json_deny_and_a_matcher_that_does_not_match(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    record, other = dsh.root / "pre.jsonl", dsh.root / "other.jsonl"
    marker = dsh.root / "touched"
    configure(
        dsh,
        hook_table("PreToolUse", record, "json-deny", matcher="bash|shout"),
        hook_table("PreToolUse", other, "ok", matcher="read"),
    )
    fake_llm.add(Reply(tool_calls=[bash(f"touch {marker}")]), Reply(text="Refused."))
    done = await dsh.run("-p", "touch it", "--permission-mode", "bypass")
    assert done.code == 0, done.stderr[-3000:]
    assert not marker.exists()
    assert "the policy says no" in tool_texts(fake_llm.chat_requests[1].body)[0]
    assert records(other) == []  # matched only read


async def test_user_prompt_submit_adds_context_or_blocks(dsh: Dsh, fake_llm: FakeLLM) -> None:
    record = dsh.root / "prompt.jsonl"
    configure(dsh, hook_table("UserPromptSubmit", record, "context"))
    fake_llm.add(Reply(text="Noted."))
    done = await dsh.run("-p", "how is the build?")
    assert done.code == 0, done.stderr[-3000:]
    assert "The build server is down today." in json.dumps(fake_llm.chat_requests[0].body)
    [payload] = records(record)
    assert payload["prompt"] == "how is the build?"

    configure(dsh, hook_table("UserPromptSubmit", record, "block"))
    done = await dsh.run("-p", "what is the admin password?")
    assert len(fake_llm.chat_requests) == 1  # nothing went out
    assert "prompts about passwords are blocked" in done.stderr


async def test_a_stop_hook_makes_the_agent_go_on_once(dsh: Dsh, fake_llm: FakeLLM) -> None:
    record = dsh.root / "stop.jsonl"
    configure(dsh, hook_table("Stop", record, "stop-once"))
    fake_llm.add(Reply(text="Hello."), Reply(text="Goodbye."))
    done = await dsh.run("-p", "say hello")
    assert done.code == 0, done.stderr[-3000:]
    assert len(fake_llm.chat_requests) == 2
    assert "also say goodbye" in json.dumps(fake_llm.chat_requests[1].body["messages"][-1])
    assert [p["stop_hook_active"] for p in records(record)] == [False, True]


async def test_a_hanging_hook_is_killed_at_its_timeout(dsh: Dsh, fake_llm: FakeLLM) -> None:
    record = dsh.root / "hang.jsonl"
    configure(dsh, hook_table("PreToolUse", record, "hang", matcher="echo", timeout=1))
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="echo", arguments={"text": "hi"})]),
        Reply(text="Done."),
    )
    done = await dsh.run("-p", "echo hi")
    assert done.code == 0, done.stderr[-3000:]
    assert tool_texts(fake_llm.chat_requests[1].body) == ['"echo: hi"']  # the call went on
    events = await dsh.checked_events()
    [ran] = of_type(events, "hooks/ran")
    assert ran.data.timed_out
    assert ran.data.exit_code is None


async def test_an_untrusted_projects_hooks_never_run(dsh: Dsh, fake_llm: FakeLLM) -> None:
    """A cloned repository's settings name a hook: nothing of it runs until the folder
    is trusted."""
    record = dsh.root / "evil.jsonl"
    (dsh.project / ".git").mkdir()
    (dsh.project / ".dsh").mkdir()
    project_settings = dsh.project / ".dsh" / "settings.toml"
    project_settings.write_text(
        hook_table("UserPromptSubmit", record, "context") + hook_table("PreToolUse", record, "ok")
    )
    project_settings.chmod(0o644)
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="echo", arguments={"text": "hi"})]),
        Reply(text="Done."),
    )
    done = await dsh.run("-p", "echo hi")
    assert done.code == 0, done.stderr[-3000:]
    assert not record.exists()
    assert "The build server is down today." not in json.dumps(fake_llm.chat_requests[0].body)


async def test_post_tool_use_turns_a_result_into_the_hooks_objection(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    record = dsh.root / "post.jsonl"
    configure(dsh, hook_table("PostToolUse", record, "block", matcher="echo"))
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="echo", arguments={"text": "hi"})]),
        Reply(text="Understood."),
    )
    done = await dsh.run("-p", "echo hi")
    assert done.code == 0, done.stderr[-3000:]
    [text] = tool_texts(fake_llm.chat_requests[1].body)
    assert "prompts about passwords are blocked" in text  # the hook's stderr, for the model
    [payload] = records(record)
    assert (payload["tool_name"], payload["tool_response"]) == ("echo", "echo: hi")


async def test_session_start_context_goes_with_the_first_prompt(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    record = dsh.root / "start.jsonl"
    configure(dsh, hook_table("SessionStart", record, "context"))
    fake_llm.add(Reply(text="Hi."))
    done = await dsh.run("-p", "hello")
    assert done.code == 0, done.stderr[-3000:]
    assert "The build server is down today." in json.dumps(fake_llm.chat_requests[0].body)
    [payload] = records(record)
    assert (payload["hook_event_name"], payload["source"]) == ("SessionStart", "startup")


async def test_a_notification_hook_hears_that_dsh_needs_permission(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    record, marker = dsh.root / "note.jsonl", dsh.root / "touched"
    configure(dsh, hook_table("Notification", record, "ok"))
    fake_llm.add(Reply(tool_calls=[bash(f"touch {marker}")]), Reply(text="Not allowed."))
    done = await dsh.run("-p", "touch it")  # default mode: asked, and denied headless
    assert done.code == 0, done.stderr[-3000:]
    assert not marker.exists()
    [payload] = records(record)
    assert payload["hook_event_name"] == "Notification"
    assert payload["message"].startswith("dsh needs your permission to use bash")


async def test_pre_tool_use_allows_as_a_rule_would_but_not_past_a_deny_rule(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    # The commands' files in the project: the sandbox lets them write nowhere else.
    record, marker, denied = (
        dsh.root / "allow.jsonl",
        dsh.project / "touched",
        dsh.project / "rm-me",
    )
    denied.write_text("keep me\n")
    configure(
        dsh,
        hook_table("PreToolUse", record, "json-allow", matcher="bash"),
        '[permissions]\ndeny = ["bash(rm:*)"]\n',
    )
    fake_llm.add(
        Reply(tool_calls=[bash(f"touch {marker}")]),
        Reply(tool_calls=[bash(f"rm {denied}")]),
        Reply(text="Done."),
    )
    done = await dsh.run("-p", "touch, then remove")  # default mode: no one to ask
    assert done.code == 0, done.stderr[-3000:]
    assert marker.exists()  # the hook vouched for it
    assert denied.exists()  # a deny rule outweighs the hook


async def test_pre_tool_use_rewrites_the_input_and_the_rewrite_is_judged(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    # In the project: the rewritten command writes ``record.rewritten``, inside the sandbox.
    record, asked_for = dsh.project / "rewrite.jsonl", dsh.project / "asked-for"
    configure(dsh, hook_table("PreToolUse", record, "rewrite-touch", matcher="bash"))
    fake_llm.add(Reply(tool_calls=[bash(f"touch {asked_for}")]), Reply(text="Done."))
    done = await dsh.run("-p", "touch it", "--permission-mode", "bypass")
    assert done.code == 0, done.stderr[-3000:]
    assert not asked_for.exists()
    assert Path(f"{record}.rewritten").exists()  # what the hook rewrote it to ran
    events = await dsh.checked_events()
    [ran] = of_type(events, "hooks/ran")
    assert ran.data.outcome == "rewrote"


async def test_a_rewritten_call_is_asked_about_as_any_call(dsh: Dsh, fake_llm: FakeLLM) -> None:
    """A rewrite does not vouch for the call: in the default mode, with no one to ask
    (``dsh -p``), the rewritten command is denied and does not run."""
    record = dsh.root / "rewrite.jsonl"
    configure(dsh, hook_table("PreToolUse", record, "rewrite-touch", matcher="bash"))
    fake_llm.add(Reply(tool_calls=[bash("true")]), Reply(text="Denied."))
    done = await dsh.run("-p", "run true")
    assert done.code == 0, done.stderr[-3000:]
    assert not Path(f"{record}.rewritten").exists()
