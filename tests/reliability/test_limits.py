"""Limits: huge inputs keep memory bounded and dsh responsive.

End to end through ``dsh -p`` (peak RSS of the child measured by the kernel, through
``RUSAGE_CHILDREN`` of a small launcher). How long these take is bench/'s business
(bench/session_store.py, bench/transcript.py): no test here asserts a duration.

- a command printing 1 GB (CI: 200 MB; ``DSH_LONG_TESTS=1``: 1 GB), and a cancel that
  lands while the flood runs;
- a 200 MB file read, grepped, and overwritten;
- a 10,000-line file rewritten whole: a 20,000-line diff, shown collapsed and
  expanded by the transcript renderer;
- a session of 100,000 events: loaded, folded into the transcript, and resumed.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import uuid
from typing import Any

from rich.console import Console

from dsh.llm import SessionId
from dsh.session import Session, check_log
from dsh.session.jsonl import JsonlPersistence, export_jsonl
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools.presentation import CallResult
from dsh.ui.entries import ToolEntry, TranscriptFold
from dsh.ui.render import render_presentation
from dsh_plugins.fs.edit import WRITE_VIEWS
from tests.e2e.harness import TIMEOUT, Dsh, Finished, finish, of_type, text_of
from tests.reliability.logs import new_session
from tests.reliability.rss_probe import MARK
from tests.session.turns import complete_turn
from tests.support.waits import HANG_S

MIB = 1024 * 1024
BASELINE_MIB = 150  # a headless run's own peak (Python, dsh, its plugins) with room
LIMIT_S = 10 * HANG_S  # a hang guard for a whole run over a huge input
SETTINGS = '[plugins]\nmodules = ["tests.support.echo_tool", "tests.reliability.rss_probe"]\n'


async def measured(dsh: Dsh, *args: str) -> tuple[Finished, float]:
    """Run ``dsh ARGS``; returns what it did and its own peak RSS in MiB (the rss
    probe's report, which leaves out the programs it started)."""
    (dsh.home / "settings.toml").write_text(SETTINGS)
    child = await dsh.start(*args, stdin=asyncio.subprocess.DEVNULL)
    try:
        out, err = await asyncio.wait_for(child.communicate(), LIMIT_S)
    except TimeoutError:
        child.kill()
        raise AssertionError(f"dsh {args} hung: not finished after {LIMIT_S} s") from None
    lines = err.decode().splitlines()
    [peak] = [int(line.removeprefix(MARK)) for line in lines if line.startswith(MARK)]
    rest = "\n".join(line for line in lines if not line.startswith(MARK))
    assert child.returncode is not None
    return Finished(child.returncode, out.decode(), rest), peak / 1024


def bash(command: str) -> Reply:
    arguments = {"command": command, "description": "big"}
    return Reply(tool_calls=[ToolCallSpec(name="bash", arguments=arguments)])


def tool_outputs(server: FakeLLM) -> list[str]:
    body = server.chat_requests[-1].body
    return [text_of(m) for m in body["messages"] if m["role"] == "tool"]


# ---------------------------------------------------------------------- command output

FLOOD_MB = 1000


async def test_a_flood_of_command_output_keeps_memory_bounded(dsh: Dsh, fake_llm: FakeLLM) -> None:
    size = FLOOD_MB * 1_000_000
    fake_llm.add(bash(f"head -c {size} /dev/zero | tr '\\0' 'a'"), Reply(text="Seen it."))

    done, rss = await measured(dsh, "-p", "flood", "--permission-mode", "bypass")

    assert done.code == 0, done.stderr
    assert rss < BASELINE_MIB, f"peak RSS {rss:.0f} MiB for {FLOOD_MB} MB of output"
    [output] = tool_outputs(fake_llm)
    assert len(output.encode()) < 70_000  # the model reads the tail and where the rest is
    assert "[output truncated; full output: " in output
    assert "the full output file stops at 64 MiB" in output
    events = await dsh.checked_events()
    stored = sum(len(json.dumps(e.to_dict())) for e in events)
    assert stored < 1_000_000, f"the log holds {stored} bytes"


async def test_a_cancel_lands_while_a_flood_runs(dsh: Dsh, fake_llm: FakeLLM) -> None:
    # The loop stays responsive while it pumps output: a cancel sent mid-flood ends
    # the turn (the command alone never would) and stops its whole process group.
    marker = f"flooding the pipe {uuid.uuid4().hex}"  # this test's own, to find survivors
    fake_llm.add(bash(f"yes '{marker}'"))
    child = await dsh.start(
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--permission-mode",
        "bypass",
    )
    assert child.stdin is not None
    assert child.stdout is not None
    child.stdin.write(b'{"type": "prompt", "text": "flood forever"}\n')
    await child.stdin.drain()
    while True:
        line = await asyncio.wait_for(child.stdout.readline(), TIMEOUT)
        assert line, "dsh ended before the command started"
        if json.loads(line).get("type") == "tool/call":
            break
    await asyncio.sleep(1.5)  # well into the flood
    child.stdin.write(b'{"type": "cancel"}\n')
    await child.stdin.drain()
    while True:
        line = await asyncio.wait_for(child.stdout.readline(), TIMEOUT)
        assert line, "dsh ended without ending the turn"
        event = json.loads(line)
        if event.get("type") == "turn/end":
            break
    child.stdin.close()
    done = await finish(child, None)
    assert event["data"]["reason"]["kind"] == "aborted"
    assert done.code == 130, done.stderr  # cancelled
    ps = await asyncio.create_subprocess_exec("pgrep", "-f", marker, stdout=asyncio.subprocess.PIPE)
    survivors, _ = await ps.communicate()
    assert survivors.strip() == b"", "the command outlived the cancel"


# ---------------------------------------------------------------------- a 200 MB file


async def test_a_200_mb_file_is_read_grepped_and_replaced_in_bounded_memory(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    big = dsh.project / "big.log"
    line = b"2024-01-01 12:00:00 INFO a line of an enormous log file, padded out\n"
    with big.open("wb") as handle:
        block = line * 10_000
        for _ in range(200 * MIB // len(block) + 1):
            handle.write(block)
        handle.write(b"the needle\n")
    read = ToolCallSpec(
        name="read", arguments={"file_path": "big.log", "offset": 1000, "limit": 50}
    )
    grep = ToolCallSpec(name="grep", arguments={"pattern": "needle", "path": "big.log"})
    write = ToolCallSpec(name="write", arguments={"file_path": "big.log", "content": "small now\n"})
    fake_llm.add(
        Reply(tool_calls=[read]),
        Reply(tool_calls=[grep]),
        Reply(tool_calls=[write]),
        Reply(text="Done with it."),
    )

    done, rss = await measured(dsh, "-p", "deal with big.log", "--permission-mode", "bypass")

    assert done.code == 0, done.stderr
    assert rss < BASELINE_MIB, f"peak RSS {rss:.0f} MiB for a 200 MiB file"
    read_out, grep_out, write_out = tool_outputs(fake_llm)
    assert "1000: 2024-01-01 12:00:00 INFO" in read_out
    assert len(read_out) < 50_000
    assert "the needle" in grep_out
    assert "Updated file" in write_out or "replacing a file of" in write_out
    assert big.read_bytes() == b"small now\n"
    await dsh.checked_events()


# ---------------------------------------------------------------------- a 10,000-line diff


async def test_a_10000_line_diff_is_logged_and_shown(dsh: Dsh, fake_llm: FakeLLM) -> None:
    lines = 10_000
    source = dsh.project / "table.py"
    source.write_text("".join(f"ROW_{n} = {n}\n" for n in range(lines)))
    new = "".join(f"ROW_{n} = {n * 2}  # doubled\n" for n in range(lines))
    read = ToolCallSpec(name="read", arguments={"file_path": "table.py", "limit": 5})
    write = ToolCallSpec(name="write", arguments={"file_path": "table.py", "content": new})
    # 16 characters a delta, as a model streams a few tokens at a time: ~20,000 chunk
    # events carry the file, each kept in the live log (about 1 KiB apiece).
    fake_llm.add(
        Reply(tool_calls=[read]), Reply(tool_calls=[write], chunk_size=16), Reply(text="Doubled.")
    )

    done, rss = await measured(dsh, "-p", "double every row", "--permission-mode", "bypass")

    assert done.code == 0, done.stderr
    assert rss < BASELINE_MIB + 50, f"peak RSS {rss:.0f} MiB"
    assert source.read_text() == new
    events = await dsh.checked_events()
    [result] = [e for e in of_type(events, "tool/result") if e.data.meta and "diff" in e.data.meta]
    meta = result.data.meta
    assert (meta["added"], meta["removed"]) == (lines, lines)

    # The transcript folds it and renders it, collapsed and whole (how fast: see
    # bench/transcript.py).
    fold = TranscriptFold()
    for event in events:
        fold.apply(event)
    [entry] = [e for e in fold.entries if isinstance(e, ToolEntry) and e.name == "write"]
    view = WRITE_VIEWS[1](
        json.loads(entry.arguments),
        CallResult(text=entry.result or "", error_code=entry.error_code, meta=entry.meta),
    )
    collapsed, whole = (
        rendered(render_presentation(view, expanded=expanded)) for expanded in (False, True)
    )
    assert len(collapsed.splitlines()) < 30, collapsed
    assert re.search(r"… \d+ more lines$", collapsed.rstrip()), collapsed
    assert len(whole.splitlines()) > 2 * lines
    assert whole.rstrip().endswith(f"+ROW_{lines - 1} = {(lines - 1) * 2}  # doubled")


def rendered(renderable: Any) -> str:
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


# ---------------------------------------------------------------------- 100,000 events


def long_session(events: int) -> Session:
    session = new_session()
    turn = 0
    while len(session.events) < events:
        turn += 1
        complete_turn(session, f"question {turn}", f"answer number {turn} " * 3)
    return session


async def test_a_session_of_100000_events_loads_folds_and_resumes_in_bounded_memory(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    session = long_session(100_000)
    count = len(session.events)
    header = session.header.model_copy(update={"cwd": str(dsh.project)})
    backend = JsonlPersistence(dsh.home)
    path = backend.path_for(header)
    path.parent.mkdir(parents=True)
    path.write_text(export_jsonl(header, session.events))

    # How long loading, deriving and folding take: bench/session_store.py.
    try:
        loaded = await backend.load(SessionId(header.id))
    finally:
        await backend.close()
    live = Session(loaded.header, loaded.events)
    history = live.derive_messages()
    fold = TranscriptFold()
    for event in live.events:
        fold.apply(event)
    assert len(loaded.events) == count
    assert loaded.issues == []
    assert len(history) > 5_000
    assert len(fold.entries) > 10_000

    # A resumed run of it starts, takes a turn and is stored, in bounded memory.
    fake_llm.add(Reply(text="Still here."))
    done, rss = await measured(dsh, "-p", "one more", "--resume", header.id)
    assert done.code == 0, done.stderr
    assert done.stdout == "Still here.\n"
    assert rss < 512, f"peak RSS {rss:.0f} MiB for {count} events"
    stored = await dsh.events(header.id)
    assert len(stored) > count
    assert check_log(stored) == []
    sent: Any = fake_llm.chat_requests[-1].body
    assert len(sent["messages"]) > 5_000  # the whole history went to the model
