"""The agent loop: its overhead per step, and a whole ``dsh -p`` run.

Targets (the agent-loop issue):

- loop overhead per step, excluding model and tools: <= 1 ms. In process: the runtime
  as ``dsh -p`` builds it (bundled plugins, JSONL sessions, the catalog), plus an
  in-process model adapter on the provider route ``bench`` that answers instantly
  and a trivial ``noop`` tool. Turns of 20 steps (19 tool calls, then an answer), 10
  turns, 200 steps in all, after a warm-up turn; 5 runs, each in a runtime of its own.
  Per step: the wall time from the previous ``step/end`` (or the prompt) to this
  ``step/end``, less the time spent inside the adapter's stream and inside the tool.
  A run's figure is its mean (total wall time of the turns, less adapter and tool,
  over the steps); the median of the runs' means is judged, with their range. For the
  median run, the per-step median and p90 are printed, and where the time goes: prompt assembly (the environment plugin
  runs git at the first step of each turn and after a tool with effects, so the
  mean carries one git run per 20 steps; the median mostly none), the flushes a step
  waits for (before a tool with effects: none here, ``noop`` is read-only; the log is
  otherwise written in the background), and the rest of the loop. For information,
  the same with ``os.fsync`` a no-op and the environment plugin disabled.
- a whole ``dsh -p`` run whose reply is 2,000 short tokens (chunk_size 4), streamed as
  fast as the scripted server can (``python -m dsh.testing.fake_llm --script FILE``,
  a process of its own), from spawn to exit with the whole reply printed: wall time
  <= 0.45 s (issue 44; 0.5 s before) and peak RSS of the dsh process <= 80 MB
  (``/usr/bin/time``'s ``%M``: see :func:`run_child`), medians of 5 runs after one
  unmeasured run. For reference, a
  bare Python process streaming the same reply with httpx, dsh's imports alone, and
  ``python -c pass``. The children run from cached bytecode, as an installed dsh does
  (the figure without the cache is printed too).

Run: .venv/bin/python bench/loop.py
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel
from report import Sample, figure, load_now, machine  # bench/report.py, beside this script

from dsh.agent import AgentOptions
from dsh.kernel import Candidate, Context, Plugin
from dsh.llm import (
    BlockEnd,
    BlockStart,
    CallId,
    Finish,
    FinishStop,
    FinishToolCalls,
    GenerateOptions,
    LlmAdapter,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    UsageChunk,
    user_text,
)
from dsh.llm.stream import BlockType
from dsh.runtime import start_runtime
from dsh.services import LLM, TOOLS
from dsh.session import SessionEvent, check_log
from dsh.tools import ToolContext, ToolDefinition

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")

STEP_TARGET = 0.001  # s per step
RUN_TARGET = 0.45  # s (issue 44)
RSS_TARGET = 80  # MB

STEPS_PER_TURN = 20
TURNS = 10
REPLY_TOKENS = 2_000
RUNS = 5
LOOP_RUNS = 5


@contextlib.contextmanager
def fsync_excluded() -> Iterator[None]:
    """``os.fsync`` does nothing in this process while inside."""
    real = os.fsync
    os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = real


# ---------------------------------------------------------------------- 1. loop overhead


@dataclass
class Spent:
    """Seconds spent in each part since the last step ended."""

    model: float = 0.0
    tool: float = 0.0
    assemble: float = 0.0
    flush: float = 0.0

    def take(self) -> Spent:
        taken = Spent(self.model, self.tool, self.assemble, self.flush)
        self.model = self.tool = self.assemble = self.flush = 0.0
        return taken


@dataclass
class Step:
    wall: float
    spent: Spent

    @property
    def overhead(self) -> float:
        return self.wall - self.spent.model - self.spent.tool


class InstantModel(LlmAdapter):
    """Answers at once: a tool call at every step but the last of a turn. Only the
    time spent in its own code is counted as the model's."""

    def __init__(self, spent: Spent) -> None:
        self.spent = spent
        self.calls = 0

    def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        return self._stream()

    async def _stream(self) -> AsyncIterator[StreamChunk]:
        began = time.perf_counter()
        self.calls += 1
        usage = UsageChunk(usage=TokenUsage(input_tokens=1_000, output_tokens=10))
        if self.calls % STEPS_PER_TURN:
            call_id = CallId(f"call_{self.calls:05d}")
            arguments = f'{{"n": {self.calls}}}'
            block = ToolCallBlock(id=call_id, name="noop", arguments=arguments)
            kind: BlockType = "tool-call"
            chunks: list[StreamChunk] = [
                BlockStart(index=0, block_type=kind),
                ToolCallDelta(index=0, id=call_id, name="noop", arguments_delta=arguments),
                BlockEnd(index=0, block=block),
                usage,
                Finish(reason=FinishToolCalls()),
            ]
        else:
            chunks = [
                BlockStart(index=0, block_type="text"),
                TextDelta(index=0, text="Done."),
                BlockEnd(index=0, block=TextBlock(text="Done.")),
                usage,
                Finish(reason=FinishStop()),
            ]
        for chunk in chunks:
            self.spent.model += time.perf_counter() - began
            yield chunk
            began = time.perf_counter()
        self.spent.model += time.perf_counter() - began


class NoopArguments(BaseModel):
    n: int = 0


def bench_plugin(spent: Spent) -> Plugin:
    async def noop(arguments: NoopArguments, context: ToolContext) -> str:
        began = time.perf_counter()
        result = f"ok {arguments.n}"
        spent.tool += time.perf_counter() - began
        return result

    def apply(ctx: Context, config: object) -> None:
        ctx.get(LLM).register_adapter(["bench"], InstantModel(spent))
        ctx.get(TOOLS).register(
            "noop",
            ToolDefinition(
                name="noop",
                description="Does nothing.",
                arguments=NoopArguments,
                execute=noop,
                read_only=True,
            ),
        )

    return Plugin(name="bench-loop", inject=(LLM, TOOLS), apply=apply)


def timed(
    method: Callable[..., Coroutine[Any, Any, T]], spent: Spent, part: str
) -> Callable[..., Coroutine[Any, Any, T]]:
    async def wrapper(*args: Any, **kwargs: Any) -> T:
        began = time.perf_counter()
        try:
            return await method(*args, **kwargs)
        finally:
            setattr(spent, part, getattr(spent, part) + time.perf_counter() - began)

    return wrapper


async def loop_run(root: Path, *, disabled: tuple[str, ...] = ()) -> tuple[list[Step], float]:
    """The measured steps, and the total overhead (wall time of the measured turns
    less model and tool time)."""
    home, project = root / "home", root / "project"
    project.mkdir(parents=True)
    spent = Spent()
    runtime = await start_runtime(home=home, cwd=project, disabled_plugins=disabled)
    try:
        await runtime.plugins.load([Candidate("bench-loop", "bench/loop.py", bench_plugin(spent))])
        agent = await runtime.agents.create(
            project, AgentOptions(provider="bench", model="instant")
        )
        # Each turn assembles its prompt through the agents' prompt service, and waits
        # for its flushes through the session store (the agent's sink calls it), so
        # wrapping these two times them.
        prompt = runtime.agents.services.prompt
        prompt.assemble = timed(prompt.assemble, spent, "assemble")  # type: ignore[method-assign]
        store = runtime.sessions
        store.flush = timed(store.flush, spent, "flush")  # type: ignore[method-assign]
        steps: list[Step] = []
        mark = [time.perf_counter()]

        def on_event(event: SessionEvent) -> None:
            if event.type == "step/end":
                now = time.perf_counter()
                steps.append(Step(now - mark[0], spent.take()))
                mark[0] = now

        agent.session.subscribe(on_event, from_seq=len(agent.session.events))

        async def a_turn(number: int) -> float:
            spent.take()
            began = mark[0] = time.perf_counter()
            agent.followup(user_text(f"turn {number}: call noop until done"))
            await agent.when_idle()
            return time.perf_counter() - began

        await a_turn(0)  # warm-up: imports, first writes, caches
        steps.clear()
        model = tool = wall = 0.0
        for number in range(1, TURNS + 1):
            first = len(steps)
            wall += await a_turn(number)
            # What ran after the turn's last step/end (turn/end, its flush) is in wall.
            tail = spent.take()
            model += sum(s.spent.model for s in steps[first:]) + tail.model
            tool += sum(s.spent.tool for s in steps[first:]) + tail.tool
        assert len(steps) == TURNS * STEPS_PER_TURN, len(steps)
        await runtime.sessions.flush(agent.session)
        assert check_log(agent.session.events) == []
        return steps, wall - model - tool
    finally:
        await runtime.aclose()


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


async def loop_runs(
    root: Path, *, disabled: tuple[str, ...] = ()
) -> list[tuple[list[Step], float]]:
    """LOOP_RUNS runs, each in a runtime of its own, ordered by overhead per step."""
    runs = [await loop_run(root / str(n), disabled=disabled) for n in range(LOOP_RUNS)]
    return sorted(runs, key=lambda run: run[1] / len(run[0]))


async def bench_loop(root: Path) -> None:
    load = load_now()
    runs = await loop_runs(root / "loop")
    means = Sample(tuple(overhead / len(steps) for steps, overhead in runs))
    steps, _ = runs[len(runs) // 2]  # the median run
    count = len(steps)
    per_step = sorted(s.overhead for s in steps)
    print(
        figure(
            "loop overhead per step, model and tool excluded, the mean of a run's "
            f"{count} steps ({TURNS} turns of {STEPS_PER_TURN})",
            means,
            target=STEP_TARGET * 1000,
            unit="ms",
            scale=1000,
            load=load,
        )
    )
    print(
        f"  the median run's steps: median {ms(statistics.median(per_step))}, "
        f"p90 {ms(per_step[int(0.9 * count)])}"
    )
    assemble = sum(s.spent.assemble for s in steps) / count
    flush = sum(s.spent.flush for s in steps) / count
    model = sum(s.spent.model for s in steps) / count
    tool = sum(s.spent.tool for s in steps) / count
    rest = sum(s.overhead for s in steps) / count - assemble - flush
    print(
        f"  where a step's time goes (means): prompt assembly {ms(assemble)} (git "
        f"included), flushes waited for {ms(flush)}, "
        f"the rest of the loop {ms(rest)}; in the adapter {ms(model)}, in the tool {ms(tool)}"
    )
    quarter = count // 4
    early = statistics.median(s.overhead for s in steps[:quarter])
    late = statistics.median(s.overhead for s in steps[-quarter:])
    print(
        f"  history growth: median {ms(early)} over the first {quarter} steps, "
        f"{ms(late)} over the last {quarter}"
    )
    with fsync_excluded():
        lean_runs = await loop_runs(root / "lean", disabled=("environment",))
    lean = Sample(tuple(overhead / len(steps) for steps, overhead in lean_runs))
    print(
        "  with os.fsync a no-op and the environment plugin disabled (for information): "
        f"{lean.shown('ms', 2, 1000)})"
    )


# ---------------------------------------------------------------------- 2. a whole run

HTTPX_CLIENT = """
import sys, time
began = time.perf_counter()
import httpx
body = {"model": "deepseek-v4-flash", "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "go"}]}
events = 0
with httpx.Client(base_url=sys.argv[1], timeout=30) as client:
    with client.stream("POST", "/chat/completions", json=body,
                       headers={"Authorization": "Bearer sk-bench"}) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data: "):
                events += 1
print(events, time.perf_counter() - began)
"""


@dataclass
class Child:
    wall: float
    rss_mb: float
    code: int
    stdout: bytes
    stderr: bytes = b""


TIME = Path("/usr/bin/time")


def run_child(args: list[str], *, cwd: Path, env: dict[str, str]) -> Child:
    """Run to the end; wall time from spawn to exit, and the child's own peak RSS.

    Linux carries ``ru_maxrss`` across ``execve``, so a child forked from this process
    (some 40 MB by now) would report at least that much: the child is started through
    ``/usr/bin/time``, whose own footprint is a few hundred KB, and its ``%M`` read.
    Without it, ``os.wait4``'s figure is given, with that caveat."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss_file:
        measured = [str(TIME), "-f", "%M", "-o", rss_file.name, *args] if TIME.exists() else args
        began = time.perf_counter()
        with subprocess.Popen(
            measured, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as child:  # fmt: skip
            out, err = _drain(child)
            _, status, usage = os.wait4(child.pid, 0)
            wall = time.perf_counter() - began
            child.returncode = os.waitstatus_to_exitcode(status)
        if TIME.exists():
            kib = int(rss_file.read().split()[-1])
        else:
            # ru_maxrss is in KiB on Linux (bytes on macOS).
            kib = usage.ru_maxrss // (1024 if sys.platform == "darwin" else 1)
    return Child(wall, kib * 1024 / 1e6, child.returncode, out, err)


def _drain(child: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """Read both pipes to their end without reaping the child (``communicate`` would
    wait for it, and its rusage would be lost to us)."""
    assert child.stdout is not None
    assert child.stderr is not None
    chunks: dict[int, list[bytes]] = {child.stdout.fileno(): [], child.stderr.fileno(): []}
    with selectors.DefaultSelector() as selector:
        for stream in (child.stdout, child.stderr):
            selector.register(stream, selectors.EVENT_READ)
        while selector.get_map():
            for key, _ in selector.select():
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    selector.unregister(key.fileobj)
    return b"".join(chunks[child.stdout.fileno()]), b"".join(chunks[child.stderr.fileno()])


@contextlib.contextmanager
def scripted_server(script: Path) -> Iterator[str]:
    """``python -m dsh.testing.fake_llm`` in a process of its own; yields its base URL."""
    server = subprocess.Popen(
        [sys.executable, "-m", "dsh.testing.fake_llm", "--script", str(script)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if "listening on " not in line:
            raise RuntimeError(f"the scripted server did not start: {line!r}")
        yield line.rsplit(" ", 1)[1].strip()
    finally:
        server.terminate()
        server.wait(10)


def best(children: list[Child]) -> tuple[float, float]:
    return min(c.wall for c in children), min(c.rss_mb for c in children)


def walls(children: list[Child]) -> Sample:
    return Sample(tuple(c.wall for c in children))


def rsss(children: list[Child]) -> Sample:
    return Sample(tuple(c.rss_mb for c in children))


def bench_run(root: Path) -> None:
    text = "tok " * REPLY_TOKENS  # 2,000 four-character tokens, one an event
    reply = {"text": text, "chunk_size": 4}
    script = root / "script.json"
    script.write_text(json.dumps({"replies": [reply] * (3 * RUNS + 2)}))
    home, project = root / "run-home", root / "run-project"
    home.mkdir()
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "DEEPSEEK_"))}
    # An installed dsh runs from cached bytecode; this environment may forbid writing
    # it (PYTHONDONTWRITEBYTECODE), so the children cache it under the temporary folder
    # instead, never in the source tree. The first, unmeasured run fills the cache.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    uncached = {**env, "PYTHONDONTWRITEBYTECODE": "1"}
    del uncached["PYTHONPYCACHEPREFIX"]
    dsh = [sys.executable, "-m", "dsh", "-p", "say tok 2,000 times"]

    def dsh_runs(environment: dict[str, str], count: int) -> list[Child]:
        runs = [run_child(dsh, cwd=project, env=environment) for _ in range(count)]
        for child in runs:
            if child.code != 0 or child.stdout.decode() != text + "\n":
                raise RuntimeError(f"dsh -p failed ({child.code}): {child.stderr.decode()}")
        return runs

    with scripted_server(script) as base_url:
        for environment in (env, uncached):
            environment.update(
                DSH_HOME=str(home), DEEPSEEK_API_KEY="sk-bench", DEEPSEEK_BASE_URL=base_url
            )
        load = load_now()
        measured = dsh_runs(env, RUNS + 1)[1:]
        label = f"dsh -p, a {REPLY_TOKENS:,}-token reply from the scripted server, bytecode cached"
        print(figure(f"{label}: wall", walls(measured), target=RUN_TARGET, digits=3, load=load))
        print(
            figure(
                f"{label}: peak RSS", rsss(measured), target=RSS_TARGET, unit="MB", digits=1,
                load=load,
            )
        )  # fmt: skip
        wall, _ = best(dsh_runs(uncached, RUNS))
        print(f"  the same with no bytecode cache (PYTHONDONTWRITEBYTECODE=1): wall {wall:.3f} s")
        client = [sys.executable, "-c", HTTPX_CLIENT, base_url]
        plain = [run_child(client, cwd=project, env=env) for _ in range(RUNS)]
        streamed = min(float(c.stdout.split()[1]) for c in plain)
        events = int(plain[0].stdout.split()[0])
        wall, rss = best(plain)
        print(
            f"  reference, a bare Python process streaming the same reply with httpx "
            f"({events:,} events): wall {wall:.3f} s ({streamed:.3f} s from importing httpx "
            f"to the last event), peak RSS {rss:.1f} MB"
        )
    imports = [sys.executable, "-c", "import dsh.ui.headless, dsh.runtime"]
    wall, rss = best([run_child(imports, cwd=project, env=env) for _ in range(RUNS)])
    print(
        f"  reference, python -c 'import dsh.ui.headless, dsh.runtime': wall {wall:.3f} s, "
        f"peak RSS {rss:.1f} MB"
    )
    bare = [run_child([sys.executable, "-c", "pass"], cwd=project, env=env) for _ in range(RUNS)]
    wall, rss = best(bare)
    print(f"  reference, python -c pass: wall {wall:.3f} s, peak RSS {rss:.1f} MB")


async def main() -> None:
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as temp:
        await bench_loop(Path(temp))
        bench_run(Path(temp))


if __name__ == "__main__":
    asyncio.run(main())
