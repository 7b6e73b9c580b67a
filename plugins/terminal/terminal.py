"""One program in a pseudo-terminal: what it printed, and what its screen shows.

Every byte the program writes goes two ways: to a ``pyte`` screen (so a full-screen
program such as ``less`` or a curses menu can be read as it looks), and, with escape
sequences stripped, to a bounded text log the model reads with a cursor ("what is new
since the last read"). Reading is event-driven (``loop.add_reader`` on the pty), so
nothing blocks the event loop.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import os
import re
import signal as signals
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dsh.processes import adopt, child_options
from dsh.sandbox import Wrapped, launch_options
from dsh_plugins.terminal.meaning import Meaning

ANSI = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC … BEL / ST
    r"|\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b[PX^_][^\x1b]*\x1b\\"  # DCS, SOS, PM, APC
    r"|\x1b[@-Z\\-_]"  # two-byte escapes
    r"|\x1b[()][0-9A-Za-z]"  # character sets
)
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
CLOSE_GRACE_S = 2.0


def sanitize(text: str) -> str:
    """Printable text from terminal output: no escapes, ``\\r\\n`` as ``\\n``."""
    text = ANSI.sub("", text).replace("\r\n", "\n")
    text = re.sub(r"\r+(?=\n)", "", text).replace("\r", "\n")
    return CONTROL.sub("", text)


class Terminal:
    def __init__(
        self,
        terminal_id: str,
        owner: str,
        argv: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        rows: int,
        cols: int,
        name: str,
        max_log_chars: int,
        wrapped: Wrapped | None = None,
    ) -> None:
        """``wrapped``: ``argv`` as the sandbox starts it (see
        :meth:`dsh.sandbox.Sandbox.wrap`); None runs ``argv`` as it is."""
        self.id = terminal_id
        self.owner = owner
        self.name = name
        self.cwd = cwd
        self.repl: str | None = None
        """The program typed into, when not a shell (see ``tools.repl_program``)."""
        self.line: str | None = ""
        """A shell's command line typed so far (None: edited by keys, unknown)."""
        self.meaning = Meaning()
        """What earlier lines typed into a shell did to the meaning of later ones."""
        self.rows, self.cols = rows, cols
        self.started = time.monotonic()
        import pyte  # 15-20 ms, paid when the first terminal opens, not at every start

        self.screen = _screen_class()(cols, rows)
        self._stream = pyte.ByteStream(self.screen)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._log: list[str] = []
        self._log_chars = 0
        self._max_log_chars = max_log_chars
        self._read_at = 0  # chars of the log already returned (counting dropped ones)
        self._dropped = 0
        self.last_output = time.monotonic()
        self.changed = asyncio.Event()
        self.exited = asyncio.Event()
        self.exit_code: int | None = None
        self.exit_signal: int | None = None
        self.listeners: list[Callable[[Terminal], None]] = []
        # A session of its own (ptyprocess's setsid), death with dsh, and whatever
        # the sandbox does in the child; ptyprocess closes every other descriptor
        # before preexec runs, so the ones it uses are passed.
        options = launch_options(wrapped) if wrapped is not None else child_options()
        # Imported with the first terminal (pty, termios and the rest), not when the
        # plugin loads.
        from ptyprocess import PtyProcess

        self.process = PtyProcess.spawn(
            wrapped.argv if wrapped is not None else argv,
            cwd=str(cwd),
            env=wrapped.env if wrapped is not None else env,
            dimensions=(rows, cols),
            preexec_fn=options.get("preexec_fn"),
            pass_fds=wrapped.fds if wrapped is not None else (),
        )
        self.pid: int = self.process.pid
        adopt(self.pid)
        self._fd: int = self.process.fd
        os.set_blocking(self._fd, False)
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._fd, self._on_readable)
        self._reaper: asyncio.Task[None] | None = None

    def current_cwd(self) -> Path:
        """Where what reads the terminal's input is now, which a line typed next runs in
        (a shell may have changed folders since it started, or started another shell):
        the foreground process group's leader, else the program dsh started, else where
        it started when neither can be read."""
        leaders = [self.pid]
        with contextlib.suppress(OSError):
            leaders.insert(0, os.tcgetpgrp(self._fd))
        for leader in leaders:
            with contextlib.suppress(OSError):
                return Path(os.readlink(f"/proc/{leader}/cwd"))
        return self.cwd

    # ------------------------------------------------------------------ output

    def _on_readable(self) -> None:
        try:
            data = os.read(self._fd, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: the program and everything holding the pty are gone
            data = b""
        if not data:
            self._stop_reading()
            return
        # A sequence the emulator chokes on costs the screen that chunk, not the
        # log: pyte's parser starts afresh on the next bytes, and the text below
        # still reaches the log.
        with contextlib.suppress(Exception):
            self._stream.feed(data)
        text = sanitize(self._decoder.decode(data))
        if text:
            self._append(text)
        self.last_output = time.monotonic()
        self.changed.set()
        for listener in list(self.listeners):
            listener(self)

    def _append(self, text: str) -> None:
        self._log.append(text)
        self._log_chars += len(text)
        while self._log_chars > self._max_log_chars and len(self._log) > 1:
            dropped = self._log.pop(0)
            self._log_chars -= len(dropped)
            self._dropped += len(dropped)

    def _stop_reading(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            self._loop.remove_reader(self._fd)
        if self._reaper is None:
            self._reaper = self._loop.create_task(self._reap())

    async def _reap(self) -> None:
        """Wait (without blocking) for the program's exit status."""
        for _ in range(200):  # 10 s at most: the pty closed, so it is exiting
            if not self.process.isalive():
                break
            await asyncio.sleep(0.05)
        self.exit_code = self.process.exitstatus
        self.exit_signal = self.process.signalstatus
        self.exited.set()
        self.changed.set()
        for listener in list(self.listeners):
            listener(self)

    @property
    def running(self) -> bool:
        return not self.exited.is_set()

    def unread(self) -> str:
        """The output not yet read, without moving the cursor."""
        text = "".join(self._log)
        start = max(0, self._read_at - self._dropped)
        return text[start:]

    def take(self, max_chars: int) -> tuple[str, int]:
        """The unread output (its last ``max_chars``), and how many chars were skipped
        (cut here, or dropped from the log before they were read)."""
        lost = max(0, self._dropped - self._read_at)
        text = self.unread()
        self._read_at = self._dropped + self._log_chars
        if len(text) > max_chars:
            lost += len(text) - max_chars
            text = text[-max_chars:]
        return text, lost

    def snapshot(self) -> tuple[list[str], tuple[int, int]]:
        """The screen's rows (right-trimmed, trailing blank rows dropped below the
        cursor) and the cursor's position (0-based row, column)."""
        rows = [line.rstrip() for line in self.screen.display]
        cursor = (self.screen.cursor.y, self.screen.cursor.x)
        while len(rows) > cursor[0] + 1 and not rows[-1]:
            rows.pop()
        return rows, cursor

    def status(self) -> str:
        if self.running:
            return "running"
        if self.exit_signal:
            return f"killed by {signals.Signals(self.exit_signal).name}"
        return f"exited code={self.exit_code}"

    # ------------------------------------------------------------------ input

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._fd, view)
            except BlockingIOError:
                time.sleep(0.005)  # the pty's input buffer is full: a few ms at most
                continue
            view = view[written:]

    def foreground_group(self) -> int:
        """The terminal's foreground process group; the program's own group when the
        pty cannot say. Never 0 or dsh's own group: killpg on those would signal dsh."""
        try:
            group = os.tcgetpgrp(self._fd)
        except OSError:
            return self.pid
        return group if group > 1 and group != os.getpgrp() else self.pid

    def send_signal(self, number: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.foreground_group(), number)

    # ------------------------------------------------------------------ closing

    def _session_members(self) -> list[int]:
        """Every process in the terminal's session (the shell made it the leader)."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[-1].split()
            if len(fields) > 3 and int(fields[3]) == self.pid:
                found.append(int(entry))
        return found

    async def close(self) -> None:
        """Hang up; after a grace period kill whatever is left of the session."""
        if self.running:
            for number in (signals.SIGHUP, signals.SIGCONT, signals.SIGTERM):
                for group in {self.foreground_group(), self.pid}:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(group, number)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.exited.wait(), CLOSE_GRACE_S)
        for pid in [self.pid, *self._session_members()]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signals.SIGKILL)
        self._stop_reading()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.exited.wait(), 5)
        with contextlib.suppress(OSError):
            self.process.close(force=True)


@functools.cache
def _screen_class() -> type[Any]:
    """pyte's screen, minus a crash: ``CSI ? Pp m`` (xterm's query of its key
    modifier options, which editors send) reaches ``select_graphic_rendition`` as a
    private sequence, and pyte's own screen raises a TypeError for it."""
    import pyte

    class Screen(pyte.Screen):
        def select_graphic_rendition(self, *attrs: int, private: bool = False) -> None:
            if not private:  # a query, not colours: nothing to draw
                super().select_graphic_rendition(*attrs)

    return Screen
