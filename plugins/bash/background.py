"""A command running as a background job: no timeout, output read in pieces.

Each stream has one consuming cursor: ``job_output`` returns what was printed since
the previous read. Memory keeps the last ``TAIL_BYTES`` of a stream as for any
command, so a read that comes late may have missed part of it; it then names the
stream's spill file, which has everything.
"""

from __future__ import annotations

import asyncio

from dsh_plugins.bash.capture import StreamCapture
from dsh_plugins.bash.jobs import JobEnd
from dsh_plugins.bash.process import GRACE_S, ShellProcess
from dsh_plugins.bash.render import signal_name, stream_section


class BashJob:
    def __init__(self, shell: ShellProcess, stdout: StreamCapture, stderr: StreamCapture) -> None:
        self.shell = shell
        self.stdout = stdout
        self.stderr = stderr
        self._cursors = {"stdout": 0, "stderr": 0}

    async def run(self) -> JobEnd:
        finished = False
        try:
            returncode = await self.shell.wait()
            await self.shell.drain(GRACE_S)
            finished = True
        except asyncio.CancelledError:
            await self.shell.terminate()
            raise
        finally:
            if not finished:
                self.shell.kill()  # a second cancel cut the graceful stop short
            self.shell.close()
            self.stdout.close()
            self.stderr.close()
        if returncode == 0:
            return JobEnd("completed")
        if returncode < 0:
            return JobEnd("failed", f"killed by signal: {signal_name(-returncode)}")
        return JobEnd("failed", f"exit code: {returncode}")

    async def stop(self) -> None:
        await self.shell.terminate()

    def read(self, final: bool) -> str:
        lines: list[str] = []
        for name, capture in (("stdout", self.stdout), ("stderr", self.stderr)):
            text, self._cursors[name], lost = capture.read_since(self._cursors[name], final=final)
            if not text and not lost:
                continue
            section = stream_section(text, capture.notes() if lost else [])
            lines += ["[stderr]", *section] if name == "stderr" else section
        return "\n".join(lines)
