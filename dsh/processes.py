"""Every process dsh starts ends when dsh ends, however dsh ends.

A command the model runs may start its own children (``make`` starts compilers, a
test runner starts servers, ``sleep 40 &``); if dsh is killed, nothing would end
them. So every program a tool or plugin starts:

1. runs in a process group of its own (``start_new_session``), so that it and all
   it starts can be ended together;
2. gets a parent-death signal (``PR_SET_PDEATHSIG``, SIGKILL): the kernel kills it
   the moment dsh dies;
3. is *adopted* (:func:`adopt`): its group is told to a small watchdog process that
   dsh starts with its first child, which waits for dsh's end of a pipe to close
   (dsh died, or exited) and then kills every group it was told about whose leader
   is gone or still the same process (matched by PID and start time, never by
   name); and it is written to ``$DSH_HOME/children/<dsh pid>-<start>``.
4. When dsh starts, :func:`sweep` ends the groups recorded by earlier dsh processes
   that are dead, in case their watchdog died with them (matched the same way).

Public API: ``child_options()`` (keyword arguments for ``asyncio`` and
``subprocess``: a new session and the parent-death signal), ``helper_command(argv)``
(the same for a short helper such as ``git``, cheaper to start), ``adopt(pid)``,
``sweep(home)``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["adopt", "child_options", "die_with_parent", "helper_command", "sweep"]

PR_SET_PDEATHSIG = 1
REGISTRY = "children"

# The watchdog: it ignores the signals a terminal sends a job (Ctrl+C, a hang-up),
# reads "+ PGID START" lines until dsh's end of the pipe closes, then kills the
# groups whose leader is gone or still the process it was told about.
_WATCHDOG = r"""
import os, signal, sys
for name in ("SIGINT", "SIGHUP", "SIGTERM", "SIGQUIT", "SIGTSTP", "SIGPIPE"):
    signal.signal(getattr(signal, name), signal.SIG_IGN)
def started(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return f.read().rpartition(b")")[2].split()[19].decode()
    except (OSError, IndexError):
        return None
groups = {}
for line in sys.stdin.buffer:
    parts = line.split()
    if len(parts) == 3 and parts[0] == b"+":
        groups[int(parts[1])] = parts[2].decode()
for pgid, start in groups.items():
    now = started(pgid)
    if now is None or now == start:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
"""


_prctl: Any = None


def _load_prctl() -> Any:
    """libc's ``prctl``, loaded in dsh before any fork (never in a child), or None
    where there is none (not Linux: the watchdog still ends the children)."""
    global _prctl
    if _prctl is None and sys.platform.startswith("linux"):
        import ctypes
        import ctypes.util

        try:
            name = ctypes.util.find_library("c") or "libc.so.6"
            _prctl = ctypes.CDLL(name, use_errno=True).prctl
        except (OSError, AttributeError):
            _prctl = False
    return _prctl or None


def die_with_parent() -> None:
    """``preexec_fn``: the kernel sends SIGKILL to this child when dsh dies. (If dsh
    died between the fork and this call, the child ends itself at once.) Call
    :func:`child_options` first, which loads what it needs."""
    prctl = _prctl
    if not prctl:
        return
    parent = os.getppid()
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def child_options() -> dict[str, Any]:
    """Keyword arguments for ``asyncio.create_subprocess_exec`` (or ``Popen``): a
    process group of its own, and death with dsh. The parent-death signal follows
    the *thread* that forks, so it is set only when the main thread (where dsh's
    event loop runs) starts the child; the watchdog covers the others."""
    options: dict[str, Any] = {"start_new_session": True}
    if threading.current_thread() is threading.main_thread() and _load_prctl() is not None:
        options["preexec_fn"] = die_with_parent
    return options


def helper_command(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    """The command line and keyword arguments for a short helper that starts nothing
    of its own (``git``): it dies with dsh too. With util-linux's ``setpriv`` the
    death signal is set by a wrapper that then runs the helper, which spares the
    slower fork a ``preexec_fn`` forces on every start (about 3 ms in a process the
    size of dsh); without it, :func:`child_options`."""
    setpriv = _setpriv()
    if setpriv is not None:
        return [setpriv, "--pdeathsig", "KILL", "--", *argv], {"start_new_session": True}
    return argv, child_options()


@functools.cache
def _setpriv() -> str | None:
    return shutil.which("setpriv") if sys.platform.startswith("linux") else None


def start_time(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[19].decode()
    except (OSError, IndexError):
        return None


class _Guard:
    """This process's watchdog and registry file, made with the first child."""

    def __init__(self) -> None:
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._registry: int | None = None
        self._registry_path: Path | None = None

    def adopt(self, pid: int) -> None:
        start = start_time(pid)
        if start is None:
            return  # already gone
        line = f"+ {pid} {start}\n".encode()
        watchdog = self._ensure_watchdog()
        if watchdog is not None and watchdog.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                watchdog.stdin.write(line)
                watchdog.stdin.flush()
        registry = self._ensure_registry()
        if registry is not None:
            with contextlib.suppress(OSError):
                os.write(registry, line)

    def _ensure_watchdog(self) -> subprocess.Popen[bytes] | None:
        if self._watchdog is not None and self._watchdog.poll() is None:
            return self._watchdog
        try:
            self._watchdog = subprocess.Popen(
                [sys.executable, "-S", "-I", "-c", _WATCHDOG],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # not in the terminal's job: no Ctrl+C reaches it
                close_fds=True,
            )
        except OSError:
            self._watchdog = None
        return self._watchdog

    def _ensure_registry(self) -> int | None:
        if self._registry is not None:
            return self._registry
        from dsh.paths import dsh_home

        me = os.getpid()
        folder = dsh_home() / REGISTRY
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            path = folder / f"{me}-{start_time(me) or 0}"
            self._registry = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600
            )
            self._registry_path = path
        except OSError:
            return None
        return self._registry


_guard = _Guard()


def adopt(pid: int) -> None:
    """Make sure process ``pid`` (a group leader started with :func:`child_options`)
    and its group end when dsh does. Call it right after starting the process."""
    _guard.adopt(pid)


def sweep(home: Path) -> int:
    """End what dead dsh processes of ``home`` left running: the groups in their
    registry files whose leader is still the process recorded (PID and start time)
    or gone while other members live. Returns how many groups it signalled."""
    folder = home / REGISTRY
    try:
        files = list(folder.iterdir())
    except OSError:
        return 0
    ended = 0
    for path in files:
        owner, _, owner_start = path.name.partition("-")
        if not owner.isdigit():
            continue
        if start_time(int(owner)) == owner_start:
            continue  # that dsh still runs: its children are its own
        try:
            lines = path.read_bytes().splitlines()
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) != 3 or parts[0] != b"+" or not parts[1].isdigit():
                continue
            pgid, start = int(parts[1]), parts[2].decode()
            if start_time(pgid) not in (None, start):
                continue  # the PID now belongs to another process
            try:
                os.killpg(pgid, signal.SIGKILL)
                ended += 1
            except OSError:
                pass
        with contextlib.suppress(OSError):
            path.unlink()
    return ended
