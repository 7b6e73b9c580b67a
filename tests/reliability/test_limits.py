"""Limits: huge inputs keep memory bounded and dsh responsive.

End to end through ``dsh -p`` (peak RSS of the child measured by the kernel, through
``RUSAGE_CHILDREN`` of a small launcher, and wall time):

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
import time
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
from plugins.fs.edit import WRITE_VIEWS
from tests.e2e.harness import TIMEOUT, Dsh, Finished, finish, of_type, text_of
from tests.reliability.logs import new_session
from tests.reliability.rss_probe import MARK
from tests.session.turns import complete_turn

MIB = 1024 * 1024
BASELINE_MIB = 150  # a headless run's own peak (Python, dsh, its plugins) with room
SETTINGS = '[plugins]\nmodules = ["tests.support.echo_tool", "tests.reliability.rss_probe"]\n'


async def measured(dsh: Dsh, *args: str, limit_s: float = 120.0) -> tuple[Finished, float, float]:
    """Run ``dsh ARGS``; returns what it did, its own peak RSS in MiB (the rss probe's
    report, which leaves out the programs it started) and the seconds taken."""
    (dsh.home / "settings.toml").write_text(SETTINGS)
    started = time.monotonic()
    child = await dsh.start(*args, stdin=asyncio.subprocess.DEVNULL)
    try:
        out, err = await asyncio.wait_for(child.communicate(), limit_s)
    except TimeoutError:
        child.kill()
        raise AssertionError(f"dsh {args} did not finish within {limit_s} s") from None
    elapsed = time.monotonic() - started
    lines = err.decode().splitlines()
    [peak] = [int(line.removeprefix(MARK)) for line in lines if line.startswith(MARK)]
    rest = "\n".join(line for line in lines if not line.startswith(MARK))
    assert child.returncode is not None
    return Finished(child.returncode, out.decode(), rest), peak / 1024, elapsed


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

    done, rss, elapsed = await measured(
        dsh, "-p", "flood", "--permission-mode", "bypass", limit_s=300
    )

    assert done.code == 0, done.stderr
    assert rss < BASELINE_MIB, f"peak RSS {rss:.0f} MiB for {FLOOD_MB} MB of output"
    print(f"\n{FLOOD_MB} MB of output: {elapsed:.1f} s, peak RSS {rss:.0f} MiB")
    [output] = tool_outputs(fake_llm)
    assert len(output.encode()) < 70_000  # the model reads the tail and where the rest is
    assert "[output truncated; full output: " in output
    assert "the full output file stops at 64 MiB" in output
    events = await dsh.checked_events()
    stored = sum(len(json.dumps(e.to_dict())) for e in events)
    assert stored < 1_000_000, f"the log holds {stored} bytes"


async def test_a_cancel_lands_while_a_flood_runs(dsh: Dsh, fake_llm: FakeLLM) -> None:
    # The loop stays responsive while it pumps output: a cancel sent mid-flood ends
    # the turn at once and stops the command's whole process group.
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
    sent = time.monotonic()
    child.stdin.write(b'{"type": "cancel"}\n')
    await child.stdin.drain()
    while True:
        line = await asyncio.wait_for(child.stdout.readline(), TIMEOUT)
        assert line, "dsh ended without ending the turn"
        event = json.loads(line)
        if event.get("type") == "turn/end":
            break
    waited = time.monotonic() - sent
    child.stdin.close()
    done = await finish(child, None)
    assert event["data"]["reason"]["kind"] == "aborted"
    assert waited < 6.0, f"the cancel took {waited:.1f} s to end the turn"
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

    done, rss, elapsed = await measured(
        dsh, "-p", "deal with big.log", "--permission-mode", "bypass"
    )

    assert done.code == 0, done.stderr
    assert rss < BASELINE_MIB, f"peak RSS {rss:.0f} MiB for a 200 MiB file"
    assert elapsed < 60
    read_out, grep_out, write_out = tool_outputs(fake_llm)
    assert "1000: 2024-01-01 12:00:00 INFO" in read_out
    assert len(read_out) < 50_000
    assert "the needle" in grep_out
    assert "Updated file" in write_out or "replacing a file of" in write_out
    assert big.read_bytes() == b"small now\n"
    await dsh.checked_events()


# ---------------------------------------------------------------------- a 10,000-line diff


async def test_a_10000_line_diff_is_logged_and_shown_quickly(dsh: Dsh, fake_llm: FakeLLM) -> None:
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

    done, rss, elapsed = await measured(
        dsh, "-p", "double every row", "--permission-mode", "bypass"
    )

    assert done.code == 0, done.stderr
    assert rss < BASELINE_MIB + 50, f"peak RSS {rss:.0f} MiB"
    assert elapsed < 60
    assert source.read_text() == new
    events = await dsh.checked_events()
    [result] = [e for e in of_type(events, "tool/result") if e.data.meta and "diff" in e.data.meta]
    meta = result.data.meta
    assert (meta["added"], meta["removed"]) == (lines, lines)

    # The transcript folds it and renders it, collapsed and whole, without a stall.
    started = time.monotonic()
    fold = TranscriptFold()
    for event in events:
        fold.apply(event)
    [entry] = [e for e in fold.entries if isinstance(e, ToolEntry) and e.name == "write"]
    view = WRITE_VIEWS[1](
        json.loads(entry.arguments),
        CallResult(text=entry.result or "", error_code=entry.error_code, meta=entry.meta),
    )
    console = Console(file=io.StringIO(), width=100, color_system="truecolor")
    console.print(render_presentation(view))
    collapsed = time.monotonic() - started
    console.print(render_presentation(view, expanded=True))
    whole = time.monotonic() - started - collapsed
    assert collapsed < 1.0, f"the collapsed diff took {collapsed:.2f} s"
    assert whole < 15.0, f"the expanded diff took {whole:.2f} s"
    print(
        f"\n20,000-line diff: run {elapsed:.1f} s, rss {rss:.0f} MiB, "
        f"collapsed {collapsed:.2f} s, expanded {whole:.2f} s"
    )


# ---------------------------------------------------------------------- 100,000 events


def long_session(events: int) -> Session:
    session = new_session()
    turn = 0
    while len(session.events) < events:
        turn += 1
        complete_turn(session, f"question {turn}", f"answer number {turn} " * 3)
    return session


async def test_a_session_of_100000_events_loads_folds_and_resumes_in_bounded_time(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    session = long_session(100_000)
    count = len(session.events)
    header = session.header.model_copy(update={"cwd": str(dsh.project)})
    backend = JsonlPersistence(dsh.home)
    path = backend.path_for(header)
    path.parent.mkdir(parents=True)
    path.write_text(export_jsonl(header, session.events))
    size = path.stat().st_size

    started = time.monotonic()
    try:
        loaded = await backend.load(SessionId(header.id))
    finally:
        await backend.close()
    load_s = time.monotonic() - started
    live = Session(loaded.header, loaded.events)
    history = live.derive_messages()
    derive_s = time.monotonic() - started - load_s
    fold = TranscriptFold()
    folded = time.monotonic()
    for event in live.events:
        fold.apply(event)
    fold_s = time.monotonic() - folded
    assert len(loaded.events) == count
    assert loaded.issues == []
    assert len(history) > 5_000
    assert len(fold.entries) > 10_000
    print(
        f"\n{count} events ({size / MIB:.0f} MiB): load {load_s:.2f} s, derive {derive_s:.2f} s, "
        f"fold {fold_s:.2f} s"
    )
    # The figures belong to bench/; these bounds catch only growth faster than linear
    # (hours, not seconds) and hold on a loaded two-core machine (fold: 6 s seen there).
    assert load_s < 120.0, f"loading took {load_s:.1f} s"
    assert derive_s < 60.0, f"deriving the history took {derive_s:.1f} s"
    assert fold_s < 60.0, f"the transcript fold took {fold_s:.1f} s"

    # A resumed run of it starts, takes a turn and is stored, in bounded time and memory.
    fake_llm.add(Reply(text="Still here."))
    done, rss, elapsed = await measured(dsh, "-p", "one more", "--resume", header.id, limit_s=300)
    assert done.code == 0, done.stderr
    assert done.stdout == "Still here.\n"
    print(f"resumed: {elapsed:.1f} s, peak RSS {rss:.0f} MiB")
    assert elapsed < 60, f"resuming took {elapsed:.1f} s"
    assert rss < 512, f"peak RSS {rss:.0f} MiB for {count} events"
    stored = await dsh.events(header.id)
    assert len(stored) > count
    assert check_log(stored) == []
    sent: Any = fake_llm.chat_requests[-1].body
    assert len(sent["messages"]) > 5_000  # the whole history went to the model
