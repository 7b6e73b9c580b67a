"""The TUI as a person meets it: how soon a message can go out, what the processes
weigh then, and how streaming an answer costs and keeps up, on a real terminal.

Every figure is the median of 5 runs with the fastest and slowest beside it and the
machine's load sampled before the runs (bench/report.py); the verdict is the median's.

The terminal: ``python -m dsh`` runs in a pseudo-terminal of 100x30 (ptyprocess)
whose output feeds a terminal emulator (pyte); the harness reads the screen as a
person sees it. The children keep their bytecode cached in the temporary folder
(``PYTHONPYCACHEPREFIX``; this environment sets ``PYTHONDONTWRITEBYTECODE``, and an
installed dsh runs from cached bytecode), filled by one unmeasured launch first.
The clocks are ``time.monotonic`` in the harness.

Definitions:

- **ready**: a message sent now would go out. The status line (the screen's last
  line) shows the agent ``idle`` with no note beside it: not ``starting…`` (the
  runtime is still loading, a message would wait for it) nor ``loading…`` (the
  read-only preview of a resumed session, shown while the runtime loads). dsh clears
  the note when the session is attached to the screen, just before it takes
  messages (``DshApp.attach``, then ``ready``).
- **launch to ready**: from the spawn of ``dsh`` in a new, empty project until ready.
  Target <= 0.5 s.
- **launch to typing echoed** (for information): from the spawn until typed keys show
  in the prompt; the keys are typed as soon as the prompt's placeholder is painted,
  in the same runs.
- **memory at ready**: the resident memory (``VmRSS``) of dsh's whole process tree
  (dsh and every process below it) at the moment it is ready, in the same runs.
  Target <= 80 MB.
- **launch to ready, three stdio MCP servers**: the same launch with three stdio MCP
  servers configured (the tests' fixture server). The TUI does not wait for servers
  to send a message (their tools join as they come up), so ready is defined as
  above; the tree's memory then, which holds the servers started so far, is printed
  for information. Target <= 0.5 s.
- **resume to ready**: ``dsh --resume ID`` of a realistic session, 20 turns of 19
  tool calls (about 13,200 events, bench/fixtures.py: streamed reasoning, text and
  tool calls, ``read`` and ``bash`` results of a few KB), written by the JSONL
  backend in the batches its writer makes, then resumed once and left with ``/quit``
  (as a person leaves a session: closed, its snapshot written), from the spawn until
  ready: the runtime loaded, the session opened and its last turns shown (the preview
  before it does not count; older turns fold in as the person scrolls up). Target
  <= 0.6 s; the tree's memory then, target <= 120 MB (issue 44). For information, in the
  same runs: from the spawn until the session is on screen (the ``Resumed session``
  line, shown first by the read-only preview while the runtime loads).
- **streaming**: in a new session, the prompt ``stream please`` is typed and Enter
  pressed once dsh is ready; the model answers 2,000 four-character tokens (8,000
  characters of paragraphs, lists and code blocks, then a last line
  ``END-OF-ANSWER``) at 500 tokens/s: one token an SSE event, the server sleeping
  2 ms before each write. The server is ``python -m dsh.testing.fake_llm`` in a
  process of its own (as bench/loop.py runs it), so the harness does not slow its
  pace. The run fails (an exception, a non-zero exit) if the answer's last line is
  not on screen within 30 s.

  - **CPU per 1,000 tokens**: the CPU time (user + system) of dsh's whole process
    tree (``/proc``, children waited for included) from Enter until the answer's last
    line is on the pyte screen, divided by 2. Target <= 0.5 CPU-s.
  - **last chunk on screen**: the last chunk "arrived" when the server finished
    writing the response: its last text event, then the finish event (with the
    usage) and ``[DONE]``, each after a 2 ms sleep, all written to the socket and
    drained. The server then logs a line on stderr; the harness waits on that pipe
    and the terminal in one ``select`` loop, reads the pipe first, and stamps the
    line when it reads it. The figure runs from that stamp until the harness sees the
    answer's last line on the pyte screen. The last text event left the server at
    least 4 ms before the stamp, and the stamp may be late by the time the harness
    takes to feed one read of terminal output to pyte (a few ms), so the figure is
    a few ms kinder than one counted from the last text event's write. Target
    <= 150 ms.
  - for information: the same CPU counted on to the turn's end (the status line
    ``idle`` again and the turn's ``completed`` line on screen), and the stream's wall
    time from Enter (4 s if nothing falls behind).
  - **below 20 turns of tool cards** (issue 44): the same stream and CPU figure in
    the resumed session of "resume to ready" (restored as it was left before each
    run), its last turns' tool cards on screen above the answer; target <= 0.5
    CPU-s, and its ratio to the figure in a new session is printed ("how it
    grows": flat is ~1).

  Automatic session titles are off for these runs (``[plugins.title] generate =
  false``), so that no title request joins the answer's; everything else is the
  default configuration.

Run: .venv/bin/python bench/tui.py
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import ptyprocess  # type: ignore[import-untyped]
import pyte
from fixtures import a_header, a_working_session, replay, writer_batches  # beside this script
from report import (  # bench/report.py, beside this script
    RUNS,
    Sample,
    code_root,
    figure,
    load_now,
    machine,
    tree_cpu_s,
    tree_rss_mb,
    versions,
)

ROOT = Path(__file__).resolve().parent.parent
# The dsh measured: this tree's, or the one bench/run --against names. The harness's
# own parts (the scripted server, the MCP fixture) always come from this tree.
sys.path.insert(0, str(code_root()))

READY_TARGET = 0.5  # s
RSS_TARGET = 80  # MB
RESUME_TARGET = 0.6  # s
RESUME_RSS_TARGET = 120  # MB
CPU_TARGET = 0.5  # CPU-s per 1,000 tokens
LAG_TARGET = 0.150  # s
TOKENS = 2_000
END = "END-OF-ANSWER"
COLUMNS, LINES = 100, 30
NOTES = ("starting…", "loading…")


class Terminal:
    """``dsh`` in a pty, its screen kept by pyte."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.screen = pyte.Screen(COLUMNS, LINES)
        self.stream = pyte.ByteStream(self.screen)
        self.began = time.monotonic()
        self.process = ptyprocess.PtyProcess.spawn(
            argv, cwd=str(cwd), env=env, dimensions=(LINES, COLUMNS)
        )
        self.pid: int = self.process.pid
        self.server: Server | None = None
        """A scripted server whose log is read in the same loop, before the screen."""

    def text(self) -> str:
        return "\n".join(self.screen.display)

    def status(self) -> str:
        return self.screen.display[-1]

    def ready(self) -> bool:
        status = self.status()
        return " idle" in status and not any(note in status for note in NOTES)

    def pump(self, wait: float) -> None:
        """Feed the screen what dsh wrote, waiting up to ``wait`` s for some."""
        server = self.server
        watched = [self.process.fd] if server is None else [server.fd, self.process.fd]
        readable, _, _ = select.select(watched, [], [], wait)
        if server is not None and server.fd in readable:
            server.take()
        if self.process.fd in readable:
            with contextlib.suppress(OSError):  # the child has gone; wait_for says so
                self.stream.feed(os.read(self.process.fd, 1 << 16))

    def wait_for(self, found: Callable[[], bool], limit: float = 30.0) -> float:
        """The ``time.monotonic()`` when ``found`` first holds."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            self.pump(0.005)
            if found():
                return time.monotonic()
        raise RuntimeError(f"not seen on screen in {limit} s; the screen:\n{self.text()}")

    def close(self) -> None:
        self.process.terminate(force=True)


@contextlib.contextmanager
def terminal(argv: list[str], cwd: Path, env: dict[str, str]) -> Iterator[Terminal]:
    term = Terminal(argv, cwd, env)
    try:
        yield term
    finally:
        term.close()


def environment(root: Path, home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "DEEPSEEK_"))}
    env.pop("NO_COLOR", None)
    # Cached bytecode, outside the source tree (this environment forbids writing it
    # beside the sources): as an installed dsh runs.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(
        PYTHONPYCACHEPREFIX=str(root / "pycache"),
        DSH_HOME=str(home),
        DEEPSEEK_API_KEY="sk-bench",
        TERM="xterm-256color",
        COLUMNS=str(COLUMNS),
        LINES=str(LINES),
        **extra,
    )
    return env


def dsh_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "dsh", *args]


def three_servers() -> str:
    """Settings naming three stdio MCP servers (the tests' fixture server)."""
    fixture = ROOT / "tests" / "fixtures" / "mcp" / "server.py"
    return "".join(
        f"[mcp.servers.s{n}]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(fixture))}, "stdio"]\n'
        for n in range(1, 4)
    )


def places(root: Path, name: str, settings: str = "") -> tuple[Path, Path]:
    project, home = root / name, root / f"{name}-home"
    project.mkdir()
    home.mkdir(mode=0o700)
    if settings:
        (home / "settings.toml").write_text(settings)
    return project, home


def info(label: str, taken: Sample, load: str, unit: str = "s", digits: int = 2) -> str:
    """A figure with no target: no verdict, so bench/run does not count it."""
    return f"{label}: {taken.shown(unit, digits)}; {load}; for information)"


# ---------------------------------------------------------------------- launch


def bench_launch(root: Path, settings: str = "", label: str = "") -> None:
    project, home = places(root, f"launch{'-mcp' if settings else ''}", settings)
    env = environment(root, home)
    with terminal(dsh_argv(), project, env) as warm:  # fills the bytecode cache
        warm.wait_for(warm.ready, 60)
    load = load_now()
    ready, typed, rss = [], [], []
    for _ in range(RUNS):
        with terminal(dsh_argv(), project, env) as term:
            term.wait_for(lambda t=term: "Ask dsh anything" in t.text())
            term.process.write(b"hello")
            echoed = term.wait_for(lambda t=term: "│ hello" in t.text())
            at = term.wait_for(term.ready)
            rss.append(tree_rss_mb(term.pid))
            ready.append(at - term.began)
            typed.append(echoed - term.began)
    print(figure(f"launch to ready{label}", Sample(tuple(ready)), target=READY_TARGET, load=load))
    if settings:
        print(
            info(
                "  the process tree's memory at ready, the MCP servers started by then included",
                Sample(tuple(rss)),
                load,
                "MB",
                0,
            )
        )
        return
    print(info("  launch to typing echoed", Sample(tuple(typed)), load))
    print(
        figure(
            "memory at ready, the process tree",
            Sample(tuple(rss)),
            target=RSS_TARGET,
            unit="MB",
            digits=0,
            load=load,
        )
    )


# ---------------------------------------------------------------------- resume


@dataclass
class Resumed:
    """The session bench_resume measured, left as a person leaves it: where it is, its
    id and its files as they were then (restored before each run)."""

    project: Path
    home: Path
    session_id: str
    folder: Path
    kept: dict[str, bytes]
    events: int

    def restore(self) -> None:
        for name, data in self.kept.items():
            (self.folder / name).write_bytes(data)


def bench_resume(root: Path) -> Resumed:
    from dsh.session.jsonl import JsonlPersistence
    from dsh.session.store import make_persistence

    project, home = places(root, "resume")
    header = a_header("tui-resume-working", str(project))
    events = replay(header, a_working_session(random.Random(5))).events

    async def build() -> None:
        persistence = make_persistence("jsonl", home)
        await persistence.create(header)
        for batch in writer_batches(events):
            await persistence.append(header.id, batch)
        await persistence.close()

    asyncio.run(build())
    folder = JsonlPersistence(home).path_for(header).parent
    env = environment(root, home)
    argv = dsh_argv("--resume", header.id)
    with terminal(argv, project, env) as warm:
        warm.wait_for(warm.ready, 60)
        warm.process.write(b"/quit\r")  # as a person leaves it: closed, its snapshot written
        warm.wait_for(lambda t=warm: not t.process.isalive(), 60)
    # every run resumes the session as that one left it (a resume adds a few events)
    kept = {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}
    resumed = Resumed(project, home, header.id, folder, kept, len(events))
    load = load_now()
    ready, shown, rss = [], [], []
    for _ in range(RUNS):
        resumed.restore()
        with terminal(argv, project, env) as term:
            seen = term.wait_for(lambda t=term: "Resumed session" in t.text())
            at = term.wait_for(lambda t=term: t.ready() and "Resumed session" in t.text())
            rss.append(tree_rss_mb(term.pid))
            ready.append(at - term.began)
            shown.append(seen - term.began)
    print(
        figure(
            f"resume a {len(events):,}-event session (20 turns of 19 tool calls) to ready",
            Sample(tuple(ready)),
            target=RESUME_TARGET,
            load=load,
        )
    )
    print(info("  resume to the transcript on screen (the preview)", Sample(tuple(shown)), load))
    print(
        figure(
            "  memory at resumed and ready, the process tree",
            Sample(tuple(rss)),
            target=RESUME_RSS_TARGET,
            unit="MB",
            digits=0,
            load=load,
        )
    )
    return resumed


# ---------------------------------------------------------------------- streaming


def an_answer(characters: int = 4 * TOKENS) -> str:
    """Exactly ``characters`` of paragraphs, lists and a code block now and then, the
    last line END (a paragraph of its own, so that no wrapping splits it)."""
    words = ["alpha", "beta", "gamma", "delta", "omega", "kappa"]
    rng = random.Random(3)
    tail = f"{END}"
    room = characters - len(tail)
    body = ""
    while True:
        kind = rng.random()
        if kind < 0.1:
            piece = "```python\n" + "x = 1\n" * rng.randint(2, 6) + "```\n\n"
        elif kind < 0.25:
            piece = "".join(f"- {rng.choice(words)} item\n" for _ in range(4)) + "\n"
        else:
            piece = " ".join(rng.choice(words) for _ in range(40)) + ".\n\n"
        if len(body) + len(piece) > room - 40:
            break
        body += piece
    filler = room - len(body) - 3  # a last paragraph to the exact length: text, ".\n\n"
    body += (" ".join(rng.choice(words) for _ in range(filler)))[:filler].rstrip().ljust(
        filler, "a"
    ) + ".\n\n"
    return body + tail


class Server:
    """``python -m dsh.testing.fake_llm`` in a process of its own, so that it streams at
    its own pace. It logs a line on stderr once a response is completely written; the
    harness reads those lines in the loop that reads the terminal (``Terminal.pump``)
    and stamps each with its clock as it reads it."""

    def __init__(self, script: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dsh.testing.fake_llm", "--script", str(script)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        assert self.process.stderr is not None
        line = self.process.stdout.readline().decode()
        if "listening on " not in line:
            raise RuntimeError(f"the scripted server did not start: {line!r}")
        self.base_url = line.rsplit(" ", 1)[1].strip()
        self.fd: int = self.process.stderr.fileno()
        os.set_blocking(self.fd, False)
        self.ended: list[float] = []
        """When each chat response was completely written, as the harness read it."""
        self._pending = b""

    def take(self) -> None:
        now = time.monotonic()
        with contextlib.suppress(BlockingIOError):
            self._pending += os.read(self.fd, 1 << 16)
        *lines, self._pending = self._pending.split(b"\n")
        self.ended += [now for line in lines if line.startswith(b"POST /chat/completions ->")]

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def bench_streaming(root: Path, below: Resumed | None = None, empty: float | None = None) -> float:
    """The streaming figures in a new session, or ``below`` the turns of a resumed one
    (compared with ``empty``, the figure in a new session); returns the CPU figure."""
    answer = an_answer()
    assert len(answer) == 4 * TOKENS
    assert answer.endswith(f"\n\n{END}")
    reply = {"text": answer, "chunk_size": 4, "chunk_delay_ms": 2}
    script = root / f"stream{'-below' if below else ''}.json"
    script.write_text(json.dumps({"replies": [reply] * (RUNS + 1)}))
    server = Server(script)
    no_titles = "[plugins.title]\ngenerate = false\n"
    if below is None:
        project, home = places(root, "stream", no_titles)
        argv = dsh_argv()
    else:
        project, home = below.project, below.home
        (home / "settings.toml").write_text(no_titles)
        argv = dsh_argv("--resume", below.session_id)
    env = environment(root, home, DEEPSEEK_BASE_URL=server.base_url)
    cpu, lag, wall, whole = [], [], [], []
    try:
        load = load_now()
        for run in range(RUNS + 1):  # the first fills the bytecode cache, unmeasured
            if below is not None:
                below.restore()
            with terminal(argv, project, env) as term:
                term.server = server
                term.wait_for(term.ready, 60)
                before = len(server.ended)
                term.process.write(b"stream please")
                term.wait_for(lambda t=term: "stream please" in t.text())
                began = time.monotonic()
                cpu_before = tree_cpu_s(term.pid)
                term.process.write(b"\r")
                shown = term.wait_for(lambda t=term: END in t.text())
                cpu_after = tree_cpu_s(term.pid)
                term.wait_for(lambda n=before: len(server.ended) > n)
                finished = server.ended[before]
                # The turn's own "completed" line, below the answer (a resumed
                # session shows earlier turns' above it).
                term.wait_for(
                    lambda t=term: t.ready() and "completed" in t.text().rpartition(END)[2]
                )
                cpu_idle = tree_cpu_s(term.pid)
            if run:
                cpu.append((cpu_after - cpu_before) / (TOKENS / 1000))
                whole.append((cpu_idle - cpu_before) / (TOKENS / 1000))
                lag.append(shown - finished)
                wall.append(shown - began)
    finally:
        server.close()
    where = (
        f", below 20 turns of tool cards (the {below.events:,}-event session resumed)"
        if below is not None
        else ""
    )
    taken = Sample(tuple(cpu))
    print(
        figure(
            f"stream {TOKENS:,} tokens at 500 tokens/s on a pty{where}, the process tree's "
            "CPU per 1,000 tokens",
            taken,
            target=CPU_TARGET,
            unit="CPU-s",
            load=load,
        )
    )
    if below is not None and empty:
        print(
            f"  how it grows: {taken.median / empty:.2f}x the CPU of a stream in a new "
            "session (flat is ~1)"
        )
    print(
        figure(
            "  last chunk on screen after the response ended",
            Sample(tuple(lag)),
            target=LAG_TARGET * 1000,
            unit="ms",
            digits=0,
            scale=1000,
            load=load,
        )
    )
    print(info("  the same to the turn's end (idle again)", Sample(tuple(whole)), load, "CPU-s"))
    print(
        info(
            "  the stream's wall time, Enter to the last line on screen", Sample(tuple(wall)), load
        )
    )
    return taken.median


def main() -> None:
    print(f"machine: {machine()}")
    print(f"versions: {versions()}")
    with tempfile.TemporaryDirectory(prefix="dsh-bench-tui-") as folder:
        root = Path(folder)
        bench_launch(root)
        bench_launch(root, three_servers(), ", three stdio MCP servers configured")
        resumed = bench_resume(root)
        empty = bench_streaming(root)
        bench_streaming(root, below=resumed, empty=empty)


if __name__ == "__main__":
    main()
