"""One dsh process through many model requests, watched from outside (issue 34).

:func:`soak` runs ``dsh --plain`` (the real binary) reading a script on stdin: sessions
of turns of tool steps, each session ended by ``/new``, so that the history any
request carries stays the same size however long the day: what grows with the run,
then, is what the process fails to let go of. The scripted server answers each request
with an ``echo`` tool call, or at a turn's last step with an answer, and switches
between keeping connections alive and closing each after its response, a session
each way in turn (a proxy that closes, a server that keeps them). Every ``every``
requests, as the server answers, the process is read from ``/proc``: its resident
memory, open file descriptors and sockets, and the CPU it has used.

The test (tests/reliability/test_long_day.py) runs 1,000 requests; bench/soak.py runs
10,000 and plots the readings.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from dsh.testing import FakeLLM, RecordedRequest, Reply, Script, ToolCallSpec

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = """\
[plugins]
modules = ["tests.support.echo_tool"]

[plugins.title]
auto = "never"
"""
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Reading:
    """The process as ``/proc`` shows it once the server had answered ``requests``."""

    requests: int
    at_s: float
    """Seconds since the process started."""
    rss_kib: int
    fds: int
    sockets: int
    cpu_s: float
    """User and system CPU the process has used so far."""


def read_process(pid: int, requests: int, started: float) -> Reading | None:
    """``pid`` now, or None once it is gone."""
    try:
        rss = 0
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        cpu = (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
        fds = sockets = 0
        for entry in os.scandir(f"/proc/{pid}/fd"):
            fds += 1
            with contextlib.suppress(OSError):  # closed between the listing and the link
                if os.readlink(entry.path).startswith("socket:"):
                    sockets += 1
    except (OSError, IndexError, ValueError):
        return None
    return Reading(requests, time.monotonic() - started, rss, fds, sockets, cpu)


@dataclass(frozen=True)
class Plan:
    """``sessions`` sessions of ``turns`` turns of ``steps`` requests each."""

    sessions: int
    turns: int
    steps: int

    @property
    def per_session(self) -> int:
        return self.turns * self.steps

    @property
    def requests(self) -> int:
        return self.sessions * self.per_session

    def replies(self) -> list[Reply]:
        replies = []
        for number in range(self.requests):
            if (number + 1) % self.steps:
                text = f"step {number}"
                replies.append(
                    Reply(tool_calls=[ToolCallSpec(name="echo", arguments={"text": text})])
                )
            else:
                replies.append(Reply(text=f"Turn done after request {number + 1}."))
        return replies

    def stdin(self) -> bytes:
        lines = []
        for session in range(self.sessions):
            if session:
                lines.append("/new")
            lines += [f"echo your way through turn {turn + 1}" for turn in range(self.turns)]
        return ("\n".join(lines) + "\n").encode()

    def keeps_alive(self, answered: int) -> bool:
        """Whether the server keeps connections alive for the request after
        ``answered``: the even sessions yes, the odd ones no."""
        return (answered // self.per_session) % 2 == 0


@dataclass
class Soak:
    plan: Plan
    code: int | None = None
    readings: list[Reading] = field(default_factory=list)
    requests: list[RecordedRequest] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""


async def soak(
    root: Path,
    plan: Plan,
    *,
    every: int,
    limit_s: float,
    python: str = sys.executable,
    code_root: Path = ROOT,
) -> Soak:
    """Run ``plan`` through one ``dsh --plain`` in ``root`` (its home and project
    made there), reading the process every ``every`` requests. ``limit_s`` only guards
    against a hang."""
    home, project = root / "home", root / "project"
    home.mkdir(parents=True, exist_ok=True)
    project.mkdir(parents=True, exist_ok=True)
    (home / "settings.toml").write_text(SETTINGS)
    result = Soak(plan)
    started = time.monotonic()
    child: asyncio.subprocess.Process | None = None

    answered_count = 0

    def answered(record: RecordedRequest) -> None:
        nonlocal answered_count
        if record.reply is None:
            return  # not a chat request the script answered (a model listing, say)
        answered_count += 1
        count = answered_count
        # Whether the next connection is kept: flipped as a session's last reply goes.
        keep = plan.keeps_alive(count)
        if keep != server.script.keep_alive:
            server.script = server.script.model_copy(update={"keep_alive": keep})
        if child is not None and count % every == 0:
            reading = read_process(child.pid, count, started)
            if reading is not None:
                result.readings.append(reading)

    script = Script(replies=plan.replies(), keep_alive=plan.keeps_alive(0))
    async with FakeLLM(script, on_response=answered) as server:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DSH_", "DEEPSEEK_", "OPENAI_"))
        }
        env.update(
            DSH_HOME=str(home),
            DEEPSEEK_BASE_URL=server.base_url,
            DEEPSEEK_API_KEY="sk-soak",
            PYTHONPATH=str(code_root),
            TERM="dumb",
        )
        started = time.monotonic()
        child = await asyncio.create_subprocess_exec(
            python,
            "-m",
            "dsh",
            "--plain",
            cwd=project,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(child.communicate(plan.stdin()), limit_s)
        except TimeoutError:
            child.kill()
            await child.wait()
            out, err = b"", b""
        finally:
            if child.returncode is None:
                child.kill()
                await child.wait()
        result.code = child.returncode
        result.stdout = out.decode(errors="replace")
        result.stderr = err.decode(errors="replace")
        result.requests = list(server.chat_requests)
    return result
