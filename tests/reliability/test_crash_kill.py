"""SIGKILL ``dsh -p`` at random moments of scripted multi-step sessions, then resume.

Each session is a chain: ``dsh -p`` (stream-json in and out) runs a prompt against the
scripted server and is killed by SIGKILL in one of three phases, chosen in turn:

- *streaming*: while the model's answer streams in (20 ms between chunks);
- *tool*: while the echo tool sleeps in the middle of a step;
- *approval*: while a ``shout`` call waits for an approval nobody gives.

The next link continues the session (``--continue``: the folder also holds an older
session, which it must never pick instead) with a new prompt and is killed again; the
last link continues it to a completed turn. After every kill the stored log must
load, pass ``check_log`` once crash repair has closed the open turn, and hold:

- every event the process reported as written (the flush probe's reports);
- every event it printed, exactly as printed (stream-json prints an event only once
  it is stored), and every event earlier links stored, unchanged;
- the session every printed line names.

No ``seq`` is ever printed twice for different events, by any link, and the final log
holds every event any link printed.

The log is written as a turn goes (the writer's window is 200 ms), not only at its
end: in most kills the probe had already reported events of the turn being killed as
written. How soon is bench/'s business; no bound here depends on the machine's speed.

The last link must exit 0 with a clean log, and every request any link sent must be
rebuildable from the final log alone (``check_requests`` per link: a killed link may
have sent one request whose header never reached the file, or written one header
whose request never left).

CI: 100 kills (``DSH_LONG_TESTS=1``: 1,000). Most links are forks of a server that
has dsh imported (:mod:`tests.reliability.zygote`), which makes a kill cheap; every
tenth chain runs ``python -m dsh`` itself. ``DSH_CRASH_SEED`` reproduces a choice of
phases and delays (the kill moments still depend on timing).
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsh.session import SessionStore, check_log
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import Dsh
from tests.reliability.procs import ExecLauncher, ForkLauncher, Launcher
from tests.reliability.runs import (
    LONG,
    Line,
    Watched,
    dicts,
    installation,
    kept,
    rebuilt_bodies,
    stored,
)
from tests.session.turns import complete_turn

KILLS = int(os.environ.get("DSH_CRASH_KILLS", 1000 if LONG else 100))
CHAIN = 5  # kills per session before it is resumed to its end
CONCURRENT = 4
EXEC_EVERY = 10  # every tenth chain runs `python -m dsh`, the rest are forks
MASTER_SEED = int(os.environ.get("DSH_CRASH_SEED", "20250617"))
PHASES = ("streaming", "tool", "approval")
CHAIN_TIMEOUT = 600.0
STORY = " ".join(f"word{i}" for i in range(100))  # ~590 chars: 148 chunks, 3 s at 20 ms


def echo(text: str, delay: float = 0.0) -> ToolCallSpec:
    arguments: dict[str, Any] = {"text": text}
    if delay:
        arguments["delay"] = delay
    return ToolCallSpec(name="echo", arguments=arguments)


# ---------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Kill:
    phase: str
    delay: float  # seconds from the moment the phase is seen to the kill


@dataclass(frozen=True)
class Chain:
    index: int
    seed: int
    kills: tuple[Kill, ...]
    launcher: str  # "fork" or "exec"


def plan() -> list[Chain]:
    rng = random.Random(MASTER_SEED)
    chains = []
    for index in range((KILLS + CHAIN - 1) // CHAIN):
        count = min(CHAIN, KILLS - index * CHAIN)
        kills = []
        for k in range(count):
            phase = PHASES[(index * CHAIN + k) % len(PHASES)]
            longest = {"streaming": 1.2, "tool": 1.5, "approval": 1.5}[phase]
            # One kill in eight lands the moment the phase is seen.
            delay = 0.0 if rng.random() < 0.125 else rng.uniform(0, longest)
            kills.append(Kill(phase, delay))
        launcher = "exec" if index % EXEC_EVERY == 0 else "fork"
        chains.append(Chain(index, rng.getrandbits(32), tuple(kills), launcher))
    return chains


def script(phase: str, link: int) -> list[Reply]:
    first = Reply(reasoning=f"Link {link}: look first.", tool_calls=[echo(f"link {link}")])
    match phase:
        case "streaming":
            return [first, Reply(text=STORY, chunk_size=4, chunk_delay_ms=20)]
        case "tool":
            return [first, Reply(tool_calls=[echo(f"slow {link}", delay=5.0)]), Reply(text="x")]
        case _:
            shout = ToolCallSpec(name="shout", arguments={"text": f"link {link}"})
            return [first, Reply(tool_calls=[shout])]


def trigger(phase: str) -> Callable[[dict[str, Any]], bool]:
    """The printed line that says the run is in ``phase``."""
    match phase:
        case "streaming":
            return lambda v: (
                v.get("type") == "assistant/chunk" and v["data"]["chunk"]["type"] == "text-delta"
            )
        case "tool":
            return lambda v: v.get("type") == "tool/call" and '"delay"' in v["data"]["arguments"]
        case _:
            return lambda v: v.get("type") == "approval-request"


# What would show the phase was over before the kill.
PHASE_OVER = {
    "streaming": "assistant/message",
    "tool": "tool/result",
    "approval": "approval/resolved",
}


# ---------------------------------------------------------------------- one chain


@dataclass
class Link:
    """One process of a chain: where its events start, and what it sent the server."""

    first_seq: int | None
    bodies: list[dict[str, Any]]
    finished: bool = False


@dataclass
class ChainState:
    chain: Chain
    dsh: Dsh
    older: str  # a session of the same folder, finished before the chain began
    session_id: str | None = None
    stored: list[dict[str, Any]] = field(default_factory=list)  # the file, as checked last
    printed: dict[int, dict[str, Any]] = field(default_factory=dict)  # by seq, every link's
    links: list[Link] = field(default_factory=list)
    mid_turn: int = 0  # kills after which events of the killed turn were reported written

    def note_printed(self, run: Watched, where: str) -> dict[int, Line]:
        """What ``run`` printed, by seq, checked against what earlier links printed: a
        seq printed again must be the same event."""
        named = {line.value["sessionId"] for line in run.lines if "sessionId" in line.value}
        if self.session_id is not None:
            assert named <= {self.session_id}, f"{where}: continued {named}, not {self.session_id}"
        printed = {line.value["seq"]: line for line in run.events}
        for seq, line in printed.items():
            earlier = self.printed.setdefault(seq, line.value)
            assert earlier == line.value, f"{where}: seq {seq} printed again, as another event"
        return printed


async def older_session(dsh: Dsh) -> str:
    """A finished session of the project's folder, older than any the chain makes: what
    ``--continue`` would wrongly pick if it missed the session a kill left."""
    store = SessionStore.at(dsh.home)
    try:
        session = await store.create(str(dsh.project.resolve()))
        complete_turn(session, "an older conversation", "long done")
        await store.close(session)
    finally:
        await store.aclose()
    return session.id


async def run_chain(chain: Chain, root: Path, launchers: dict[str, Launcher]) -> ChainState:
    launcher = launchers[chain.launcher]
    state: ChainState | None = None
    for link, kill in enumerate(chain.kills):
        async with FakeLLM(script(kill.phase, link)) as server:
            if state is None:
                dsh = installation(root, server)
                state = ChainState(chain, dsh, await older_session(dsh))
            state.dsh.server = server
            await kill_link(state, launcher, server, link, kill)
    assert state is not None
    async with FakeLLM([Reply(tool_calls=[echo("final")]), Reply(text="All done.")]) as server:
        state.dsh.server = server
        await finish_chain(state, launcher, server)
    return state


async def kill_link(
    state: ChainState, launcher: Launcher, server: FakeLLM, link: int, kill: Kill
) -> None:
    where = f"chain {state.chain.index} (seed {state.chain.seed}), link {link} ({kill.phase})"
    argv = ["-p", "--input-format", "stream-json", "--output-format", "stream-json"]
    if state.session_id is not None:
        argv += ["--continue"]
    run = await Watched.start(launcher, state.dsh, argv)
    await run.send({"type": "prompt", "text": f"link {link}: work"})
    seen = await run.until(trigger(kill.phase), f"the {kill.phase} phase")
    if kill.delay:
        await asyncio.sleep(kill.delay)
    await run.kill()

    # The kill landed in its phase: nothing printed says the phase had ended.
    after = [line.value for line in run.lines if line.at >= seen.at]
    assert not any(v.get("type") == PHASE_OVER[kill.phase] for v in after), (
        f"{where}: the phase was over before the kill"
    )
    printed = state.note_printed(run, where)
    state.links.append(Link(min(printed, default=None), [r.body for r in server.chat_requests]))

    if state.session_id is None:
        ids = [i for i in await state.dsh.session_ids() if i != state.older]
        if not ids:
            # Killed before anything reached the disk: only allowed if nothing was
            # reported written, nor printed. The chain starts over with a new session.
            assert run.last_written == -1, f"{where}: written events but no session"
            named = [line.value for line in run.lines if line.value.get("sessionId")]
            assert named == [], f"{where}: printed a session that was never stored: {named}"
            state.links.clear()
            state.printed.clear()
            return
        [state.session_id] = ids
    loaded = await stored(state.dsh.home, state.session_id)
    events = kept(loaded)
    problems = check_log(loaded.events)
    assert problems == [], f"{where}: {problems}"
    kinds = {issue.kind for issue in loaded.issues}
    assert kinds <= {"torn-tail", "interrupted-turn"}, f"{where}: {loaded.issues}"

    # Nothing an earlier link stored is lost or changed.
    now = dicts(events)
    assert now[: len(state.stored)] == state.stored, f"{where}: earlier events changed"
    # Every event this link stored is exactly what it printed.
    for event in now:
        line = printed.get(event["seq"])
        if line is not None:
            assert event == line.value, f"{where}: seq {event['seq']} differs from the printed"
    # And every event it printed was stored: printed means stored.
    lost = sorted(set(printed) - {event["seq"] for event in now})
    assert lost == [], f"{where}: printed, then lost with the process: seqs {lost}"
    # Every event reported written is there.
    assert len(events) > run.last_written, (
        f"{where}: written through {run.last_written}, the file holds {len(events)}"
    )
    # Written while the turn ran: the kill found some of its events on disk already.
    state.mid_turn += bool(printed) and run.last_written >= min(printed)
    state.stored = now


async def finish_chain(state: ChainState, launcher: Launcher, server: FakeLLM) -> None:
    where = f"chain {state.chain.index} (seed {state.chain.seed}), the last link"
    argv = ["-p", "finish the work", "--output-format", "stream-json"]
    if state.session_id is not None:
        argv += ["--continue"]
    run = await Watched.start(launcher, state.dsh, argv)
    code = await run.finish()
    assert code == 0, f"{where}: exit {code}\n{run.tail()}"
    printed = {seq: line.value for seq, line in state.note_printed(run, where).items()}
    state.links.append(Link(min(printed), [r.body for r in server.chat_requests], True))
    if state.session_id is None:
        [state.session_id] = [i for i in await state.dsh.session_ids() if i != state.older]

    loaded = await stored(state.dsh.home, state.session_id)
    assert loaded.issues == [], f"{where}: {loaded.issues}"
    assert loaded.repaired == [], where
    assert check_log(loaded.events) == [], where
    now = dicts(loaded.events)
    assert now[: len(state.stored)] == state.stored, f"{where}: earlier events changed"
    assert {e["seq"]: e for e in now if e["seq"] in printed} == printed, where
    # Nothing any link printed was lost or given to another event later.
    assert {e["seq"]: e for e in now if e["seq"] in state.printed} == state.printed, where
    assert now[-1]["type"] == "turn/end"
    assert now[-1]["data"]["reason"]["kind"] == "completed"

    # Every request of every link can be rebuilt from the final log.
    rebuilt = rebuilt_bodies(loaded.events)
    starts = [link.first_seq for link in state.links]
    for number, link in enumerate(state.links):
        assert link.first_seq is not None
        end = next((s for s in starts[number + 1 :] if s is not None), len(loaded.events))
        expected = [body for seq, body in rebuilt if link.first_seq <= seq < end]
        sent = link.bodies
        if link.finished:
            assert sent == expected, f"{where}: its requests differ from the rebuilt ones"
        else:
            common = min(len(sent), len(expected))
            assert sent[:common] == expected[:common], f"{where}: link {number}'s requests"
            assert abs(len(sent) - len(expected)) <= 1, f"{where}: link {number}: {sent}"
    # The finished link's model saw the whole story, from the first stored prompt on.
    first_prompt = next(
        e["data"]
        for e in now
        if e["type"] == "user/message" and e["data"]["source"]["kind"] == "user"
    )
    wanted = first_prompt["content"][0]["text"]
    texts = [str(m.get("content")) for m in state.links[-1].bodies[0]["messages"]]
    assert any(wanted in text for text in texts), f"{where}: {wanted!r} was not sent"


# ---------------------------------------------------------------------- the test


@pytest.fixture
async def launchers(tmp_path: Path) -> AsyncIterator[dict[str, Launcher]]:
    fork = await ForkLauncher.open(os.environ, tmp_path / "zygote.log")
    exec_ = ExecLauncher()
    try:
        yield {"fork": fork, "exec": exec_}
    finally:
        await fork.aclose()
        await exec_.aclose()


async def test_sessions_killed_in_every_phase_resume_with_every_flushed_event(
    tmp_path: Path, launchers: dict[str, Launcher]
) -> None:
    chains = plan()
    gate = asyncio.Semaphore(CONCURRENT)

    async def one(chain: Chain) -> ChainState:
        async with gate:
            root = tmp_path / f"chain-{chain.index:03d}"
            return await asyncio.wait_for(run_chain(chain, root, launchers), CHAIN_TIMEOUT)

    results = await asyncio.gather(*(one(c) for c in chains), return_exceptions=True)
    failures = [
        (c, r) for c, r in zip(chains, results, strict=True) if isinstance(r, BaseException)
    ]
    if failures:
        lines = [f"chain {c.index} seed {c.seed}: {type(e).__name__}: {e}" for c, e in failures]
        raise AssertionError(
            f"{len(failures)} of {len(chains)} chains failed:\n" + "\n".join(lines)
        ) from failures[0][1]
    states = [r for r in results if isinstance(r, ChainState)]
    kills = {phase: 0 for phase in PHASES}
    for chain in chains:
        for kill in chain.kills:
            kills[kill.phase] += 1
    assert sum(kills.values()) == KILLS
    assert all(count >= KILLS // 4 for count in kills.values()), kills
    # Written as the turn goes, as a rule, not only at its end.
    mid_turn = sum(state.mid_turn for state in states)
    print(f"\n{KILLS} kills {kills}; the killed turn was partly on disk in {mid_turn}")
    assert mid_turn > KILLS // 2, f"only {mid_turn} of {KILLS} kills found their turn written"
