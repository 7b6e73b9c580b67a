"""Nothing reported that is not stored: ``dsh -p`` whose session log cannot be written.

Each run caps the size of the files dsh may write (``RLIMIT_FSIZE``: see
tests/support/file_limit.py), so every write of its log fails as on a full disk
("File too large" where a full disk says "No space left on device"), with or without
root; tests/reliability/test_full_disk.py fills a real filesystem.

- A run none of whose session could be stored fails in every output format: exit 1,
  one ``dsh:`` line saying nothing was stored, a result record with ``subtype``
  ``error`` and no ``sessionId`` (the id names no stored session), no event printed
  in stream-json (none is stored), and no session left behind.
- Writes that fail for a while and then succeed (the disk freed) lose nothing: the
  writer keeps what failed and stores it once it can; the run ends as if nothing had
  happened, and stream-json prints every event, each once it is stored.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import TIMEOUT, Dsh, finish
from tests.reliability.runs import dicts
from tests.support.file_limit import lift, wrapper

SETTINGS = '[plugins]\nmodules = ["tests.support.echo_tool", "tests.support.gate_tool"]\n'
NOTHING_STORED = (
    "the session log cannot be written (File too large), so dsh stopped; nothing of this "
    "session was stored"
)


@pytest.fixture
def dsh(dsh: Dsh) -> Dsh:
    (dsh.home / "settings.toml").write_text(SETTINGS)
    dsh.wrapper = wrapper(0)  # no file dsh writes may hold a byte
    return dsh


def gate(path: Path) -> ToolCallSpec:
    return ToolCallSpec(name="gate", arguments={"path": str(path)})


@pytest.mark.parametrize("output", ["text", "json", "stream-json"])
async def test_a_run_none_of_whose_session_was_stored_fails_and_names_no_session(
    dsh: Dsh, fake_llm: FakeLLM, output: str
) -> None:
    fake_llm.add(Reply(text="Hello there."))
    done = await dsh.run("-p", "hi", "--output-format", output)

    assert done.code == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("dsh: ")]
    assert said == [f"dsh: {NOTHING_STORED}"], done.stderr
    assert await dsh.session_ids() == []
    if output == "text":
        assert done.stdout == "Hello there.\n"  # what the person watched stream in
        return
    [result] = done.json_lines()  # stream-json: not one event was stored, so none printed
    assert result["type"] == "result"
    assert (result["subtype"], result["isError"]) == ("error", True)
    assert result["error"] == NOTHING_STORED
    assert result["sessionId"] is None
    assert result["result"] == "Hello there."


async def test_writes_that_fail_for_a_while_lose_nothing_once_they_succeed_again(
    dsh: Dsh, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    opened = tmp_path / "gate"
    fake_llm.add(Reply(tool_calls=[gate(opened)]), Reply(text="Done."))
    child = await dsh.start("-p", "wait at the gate", "--output-format", "stream-json")
    assert child.stderr is not None
    # The first write (before the model's request) fails; the turn goes on to the
    # read-only gate call, which holds it while the disk is "freed".
    errors: list[bytes] = []
    while not any(b"write failed" in line for line in errors):
        line = await asyncio.wait_for(child.stderr.readline(), TIMEOUT)
        assert line, f"dsh ended before a write failed: {b''.join(errors)!r}"
        errors.append(line)
    lift(child.pid)
    opened.touch()
    done = await finish(child, b"")

    assert done.code == 0, b"".join(errors).decode() + done.stderr
    *printed, result = done.json_lines()
    assert (result["subtype"], result["sessionId"]) == ("success", printed[0]["sessionId"])
    events = await dsh.checked_events(printed[0]["sessionId"])
    # Every event was printed, once it was stored: the ones whose first write failed too.
    assert [{k: v for k, v in p.items() if k != "sessionId"} for p in printed] == dicts(events)
    assert events[-1].type == "turn/end"
    assert events[-1].data.reason.kind == "completed"
