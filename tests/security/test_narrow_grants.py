""" "Allow for this session" grants what it says and no more, end to end.

``dsh -p`` with approvals answered over stdin (stream-json): each call the person
allows for the session offers the narrowest rule (shown in words too), and the calls
the reports found riding on too broad a grant are asked again, and refused here, with
no side effect on disk.
"""

from __future__ import annotations

from typing import Any

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import Dsh, close_stdin, finish, send, stream_events


def call(tool: str, **arguments: Any) -> Reply:
    if tool == "bash":
        arguments.setdefault("description", "grant")
    return Reply(tool_calls=[ToolCallSpec(name=tool, arguments=arguments)])


# (the call, the answer the person gives, the grant the dialog must offer); None: not asked
STEPS: list[tuple[Reply, str | None, str | None]] = [
    (call("bash", command="find . -name '*.md'"), "allow_session", "bash(find:*)"),
    (call("bash", command="find . -maxdepth 1 -name '*.txt'"), None, None),
    (
        call("bash", command="find . -exec touch PWNED_find \\;"),
        "deny",
        "bash(find . -exec touch PWNED_find ';'), bash(touch PWNED_find)",
    ),
    (call("bash", command="find ./nothing -delete"), "deny", None),
    (call("bash", command="timeout 5 ls"), "allow_session", "bash(timeout 5 ls)"),
    (
        call("bash", command="timeout 5 touch PWNED_timeout"),
        "deny",
        "bash(timeout 5 touch PWNED_timeout)",
    ),
    (
        call("bash", command="python3 -m pytest --version"),
        "allow_session",
        "bash(python3 -m pytest:*)",
    ),
    (call("bash", command="python3 -m pytest --co -q ."), None, None),
    (call("bash", command="python3 -m pip --version"), "deny", "bash(python3 -m pip --version)"),
    (call("bash", command="rm -rf build"), "allow_session", "bash(rm -rf build)"),
    (call("bash", command="rm -rf victim.txt"), "deny", "bash(rm -rf victim.txt)"),
    (call("bash", command="git status --short"), "allow_session", "bash(git status:*)"),
    (call("bash", command="git -c color.ui=never status"), None, None),
    (call("bash", command="git push"), "deny", "bash(git push:*)"),
    (call("terminal_open"), "allow_session", "terminal_open(shell)"),
    (
        call("terminal_send", terminal_id="t1", text="echo hi\n"),
        "allow_session",
        "terminal_send(echo:*)",
    ),
    (call("terminal_send", terminal_id="t1", text="echo again\n"), None, None),
    (
        call("terminal_send", terminal_id="t1", text="touch PWNED_terminal\n"),
        "deny",
        "terminal_send(touch:*)",
    ),
    (call("terminal_open", command="python3 -q"), "allow_once", "terminal_open(python3 -q)"),
    (
        call("terminal_send", terminal_id="t2", text="1+1\n"),
        "allow_session",
        "terminal_send(python3)",
    ),
    (call("terminal_send", terminal_id="t2", text="2+2\n"), None, None),
]


async def test_grants_cover_exactly_what_they_say(dsh: Dsh, fake_llm: FakeLLM) -> None:
    (dsh.project / "victim.txt").write_text("keep me\n")
    for reply, _, _ in STEPS:
        fake_llm.add(reply)
    fake_llm.add(Reply(text="Done."))
    answers = iter([(answer, grant) for _, answer, grant in STEPS if answer is not None])
    child = await dsh.start("-p", "--input-format", "stream-json", "--output-format", "stream-json")
    await send(child, {"type": "prompt", "text": "work"})
    asked: list[tuple[str, str | None, str | None]] = []
    async for line in stream_events(child):
        if line.get("type") == "approval-request":
            answer, _ = next(answers)
            asked.append((line["summary"], line.get("grant"), line.get("grantCovers")))
            await send(
                child, {"type": "approval", "requestId": line["requestId"], "outcome": answer}
            )
        if line.get("type") == "turn/end":
            break
    await close_stdin(child)
    done = await finish(child, None)
    assert done.code == 0, done.stderr
    expected = [grant for _, answer, grant in STEPS if answer is not None]
    assert [grant for _, grant, _ in asked] == expected, asked
    covers = {grant: words for _, grant, words in asked}
    assert covers["bash(find:*)"] == "`find` and `find …`"
    assert covers["bash(rm -rf build)"] == "exactly `rm -rf build`"
    assert covers["terminal_send(python3)"] == "terminal_send calls for python3"
    for marker in ("PWNED_find", "PWNED_timeout", "PWNED_terminal"):
        assert not (dsh.project / marker).exists(), marker
    assert (dsh.project / "victim.txt").exists()
    events = await dsh.checked_events()
    patterns = [e.data.pattern for e in events if e.type == "approval/resolved" and e.data.pattern]
    assert "bash(find:*)" in patterns
    assert "terminal_send(python3)" in patterns
