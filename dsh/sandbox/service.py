"""The ``sandbox`` service: what the policy is, whether the sandbox works here, and the
command line that runs a program inside it.

It costs nothing at start-up: the first :meth:`Sandbox.ready` (a front end calls it
once the UI is up, and :meth:`Sandbox.wrap` before the first command) finds ``bwrap``,
makes the private temp folder, runs one sandboxed ``true`` to learn whether the
sandbox works on this machine, and starts the network holder. When it does not work,
:attr:`SandboxStatus.reason` says why in bwrap's words, and every :meth:`wrap` raises
:class:`SandboxUnavailable`: nothing runs unsandboxed unless the policy is ``off``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh.kernel import ServiceKey
from dsh.processes import child_options
from dsh.sandbox.bubblewrap import Layout, Network, NetworkHolder, arguments, find_program, probe
from dsh.sandbox.policy import Policy, Widening

if TYPE_CHECKING:
    from dsh.settings_tables import SandboxTable

BACKEND = "bubblewrap"

INSTALLED = Path(__file__).resolve().parents[2]
"""Where dsh (and its bundled plugins) is installed: a clone, or site-packages."""

SOCKETS = ("/run/docker.sock", "/var/run/docker.sock", "/run/podman/podman.sock")
"""Sockets that hand out the powers of whoever runs their daemon."""


class SandboxUnavailable(Exception):
    """The sandbox cannot start here, and the policy is not ``off``."""


@dataclass(frozen=True)
class SandboxStatus:
    policy: Policy
    active: bool
    """Commands run inside the sandbox."""
    backend: str | None = None
    program: str | None = None
    reason: str | None = None
    """Why the sandbox cannot start (``active`` False, ``policy`` not off)."""

    @property
    def unavailable(self) -> bool:
        """Asked for, but cannot start: every command must be asked for."""
        return self.policy != "off" and not self.active

    def summary(self) -> str:
        """One line for the status bar and ``/status``."""
        if self.policy == "off":
            return "sandbox off"
        if self.active:
            return f"sandbox {self.policy}"
        return "no sandbox"

    def label(self) -> str:
        """:meth:`summary` as short as the status bar needs it, where a long line is
        cut: the usual case (``workspace-write``, working) is one word."""
        if self.active and self.policy == "workspace-write":
            return "sandboxed"
        if self.active:
            return f"sandboxed {self.policy}"
        return self.summary()

    def warning(self) -> str | None:
        """What the user must be told once at start-up, if anything."""
        if self.policy == "off":
            return (
                "the sandbox is off (--sandbox off or [sandbox] policy): commands the "
                "model runs have all of your powers"
            )
        if not self.active:
            return (
                f"the sandbox cannot start: {self.reason}. Every command will be asked "
                "for, in every permission mode (--sandbox off runs them unsandboxed "
                "without asking; docs/security.md says how to fix this)"
            )
        return None


@dataclass(frozen=True)
class Wrapped:
    """A program's command line and environment as they must be started."""

    argv: list[str]
    env: dict[str, str]
    preexec: Callable[[], None] | None = None
    """Run in the child before it executes ``argv`` (``launch_options`` adds it)."""
    sandboxed: bool = False
    fds: tuple[int, ...] = ()
    """Descriptors ``preexec`` uses: a spawn that closes the child's descriptors
    before ``preexec`` (ptyprocess) must keep these open (they close at exec)."""


def launch_options(wrapped: Wrapped) -> dict[str, Any]:
    """Keyword arguments for ``asyncio.create_subprocess_exec``, ``subprocess.Popen``
    (and, taking ``preexec_fn`` alone, ``PtyProcess.spawn``): a process group of its
    own, death with dsh, and whatever the sandbox must do in the child."""
    options = child_options()
    if wrapped.preexec is not None:
        options["preexec_fn"] = wrapped.preexec
    return options


class Sandbox:
    """One per process (the runtime provides it as ``SANDBOX``)."""

    def __init__(
        self,
        table: SandboxTable,
        policy: Policy,
        *,
        root: Path,
        home: Path,
        user_home: Path | None = None,
    ) -> None:
        self.table = table
        self.policy = policy
        self._root = root
        self._home = home
        self._user_home = user_home or Path.home()
        self._status: SandboxStatus | None = None
        self._lock = asyncio.Lock()
        self._program: str | None = None
        self._temp: Path | None = None
        self._holder: NetworkHolder | None = None
        self._layouts: dict[Policy, Layout] = {}
        self._mount_points_made = False

    @property
    def status(self) -> SandboxStatus | None:
        """Known once :meth:`ready` has run."""
        return self._status

    async def ready(self) -> SandboxStatus:
        """Whether the sandbox works here (learned once)."""
        if self._status is not None:
            return self._status
        async with self._lock:
            if self._status is None:
                self._status = await asyncio.to_thread(self._start)
        return self._status

    def _start(self) -> SandboxStatus:
        if self.policy == "off":
            return SandboxStatus(self.policy, active=False)
        if not sys.platform.startswith("linux"):
            return self._unavailable(f"no sandbox is available on {sys.platform}")
        program, why = find_program(self.table.program)
        if program is None:
            return self._unavailable(why or "bwrap not found")
        self._program = program
        try:
            # In the temp folder named: with no folder, tempfile first proves one by
            # writing a file, which a file-size limit refuses.
            where = os.environ.get("TMPDIR") or "/tmp"
            self._temp = Path(tempfile.mkdtemp(prefix="dsh-sandbox-", dir=where))
        except OSError as error:
            return self._unavailable(f"no private temp folder: {error}")
        failure = probe(program, self._layout(self.policy), self._root)
        if failure is not None:
            return self._unavailable(failure)
        try:
            self._holder = NetworkHolder.start(program)
        except OSError as error:
            return self._unavailable(f"no network namespace: {error}")
        return SandboxStatus(self.policy, active=True, backend=BACKEND, program=program)

    def _unavailable(self, reason: str) -> SandboxStatus:
        return SandboxStatus(self.policy, active=False, program=self._program, reason=reason)

    async def wrap(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        widening: Widening | None = None,
        shared_network: bool = True,
    ) -> Wrapped:
        """``argv`` as it must be started to run inside the sandbox (unchanged when the
        policy is off or ``widening`` says unsandboxed). Raises
        :class:`SandboxUnavailable` when the sandbox cannot start."""
        status = await self.ready()
        widening = widening or Widening()
        if self.policy == "off" or widening.unsandboxed:
            return Wrapped(list(argv), dict(env))
        if not status.active or self._program is None:
            raise SandboxUnavailable(status.reason or "the sandbox cannot start")
        network: Network = "host" if widening.network else "shared"
        if network == "shared" and not shared_network:
            network = "private"
        preexec = None
        fds: tuple[int, ...] = ()
        if network == "shared":
            holder = await self._live_holder()
            # The parent-death signal only where child_options would set it.
            preexec = holder.preexec(die_with_dsh="preexec_fn" in child_options())
            fds = holder.fds
        writable, protected, shown = await asyncio.to_thread(self._now, widening.writable, argv)
        layout = replace(self._layout(self.policy), read_only=protected)
        prefix = arguments(
            self._program, layout, cwd=cwd, network=network, writable=writable, shown=shown
        )
        inside = {**env, "TMPDIR": "/tmp"}
        return Wrapped([*prefix, *argv], inside, preexec, sandboxed=True, fds=fds)

    def _now(
        self, widening: Sequence[Path], argv: Sequence[str]
    ) -> tuple[list[Path], tuple[Path, ...], list[Path]]:
        """What this command's layout reads from the disk as it is now (blocking):
        the widened folders' real paths, the protected paths in the project, which a
        command may have created since the last one (``git init``), and the files its
        command line names under ``/tmp`` (a server's script)."""
        shown = _named_under_tmp(argv)
        if self.policy != "workspace-write":
            return _real_all(widening), (), shown
        if not self._mount_points_made:
            self._mount_points_made = True
            _make_mount_points(self._root)
        return _real_all(widening), tuple(_protected_inside(self._root)), shown

    async def _live_holder(self) -> NetworkHolder:
        holder = self._holder
        if holder is not None and holder.alive:
            return holder
        async with self._lock:
            if self._holder is None or not self._holder.alive:
                if self._holder is not None:
                    await asyncio.to_thread(self._holder.close)
                assert self._program is not None
                try:
                    self._holder = await asyncio.to_thread(NetworkHolder.start, self._program)
                except OSError as error:
                    raise SandboxUnavailable(f"no network namespace: {error}") from None
            return self._holder

    def _layout(self, policy: Policy) -> Layout:
        layout = self._layouts.get(policy)
        if layout is None:
            assert self._temp is not None
            layout = self._layouts[policy] = self._make_layout(policy, self._temp)
        return layout

    def _make_layout(self, policy: Policy, temp: Path) -> Layout:
        writable: list[Path] = []
        read_only: list[Path] = []
        visible: list[Path] = []
        # The rest of the filesystem is seen, read-only, even where it lies under the
        # host's /tmp (which the private one replaces): the home, and the Python and
        # the dsh installation its servers run from (a clone and its venv in /tmp).
        for folder in (self._user_home, Path(sys.prefix), Path(sys.base_prefix), INSTALLED):
            real = _real(folder)
            if real.is_relative_to("/tmp") and real not in visible:
                visible.append(real)
        if policy == "read-only":
            visible.append(self._root)
        if policy == "workspace-write":
            writable.append(self._root)
            writable += [_real(Path(p).expanduser()) for p in self.table.writable]
            read_only += _protected_inside(self._root)  # as they are now; see _now
        hidden = self._hidden()
        return Layout(
            temp=temp,
            visible=tuple(visible),
            writable=tuple(writable),
            read_only=tuple(read_only),
            hidden_folders=tuple(path for path in hidden if path.is_dir()),
            hidden_files=tuple(path for path in hidden if not path.is_dir()),
        )

    def _hidden(self) -> list[Path]:
        from dsh.policy.protected import SECRET_STORES

        home = self._user_home
        found = [home / entry.rstrip("/") for entry in SECRET_STORES]
        found.append(self._home)
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        if runtime:
            found.append(Path(runtime))
        agent = os.environ.get("SSH_AUTH_SOCK")
        if agent:
            found.append(Path(agent).parent)
        found += [Path(socket) for socket in SOCKETS]
        found += [Path(p).expanduser() for p in self.table.hidden]
        unique: dict[Path, None] = {}
        for path in found:
            unique[_real(path)] = None
        return [path for path in unique if path != Path("/") and _exists(path)]

    async def aclose(self) -> None:
        holder, self._holder = self._holder, None
        if holder is not None:
            await asyncio.to_thread(holder.close)
        temp, self._temp = self._temp, None
        if temp is not None:
            await asyncio.to_thread(shutil.rmtree, temp, True)


def _named_under_tmp(argv: Sequence[str]) -> list[Path]:
    """The regular files under ``/tmp`` that a command line names, a server's script
    (blocking). Files alone, never their folders: a command line the model wrote must
    not be able to show a sandboxed program what else lies in the host's ``/tmp`` (a
    terminal multiplexer's socket)."""
    found: list[Path] = []
    for word in argv:
        if not word.startswith("/tmp/"):
            continue
        path = _real(Path(word))
        if path.is_relative_to("/tmp") and path.is_file() and path not in found:
            found.append(path)
    return found


def _real_all(paths: Sequence[Path]) -> list[Path]:
    return [_real(path) for path in paths]


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _exists(path: Path) -> bool:
    with contextlib.suppress(OSError):
        return path.exists() or path.is_symlink()
    return False


def _protected_inside(root: Path) -> list[Path]:
    """What stays read-only inside a writable project: what git runs and obeys, and
    dsh's own project settings (bound only where they exist)."""
    paths: list[Path] = []
    git = root / ".git"
    if git.is_dir():
        paths += [git / "hooks", git / "config"]
    paths.append(root / ".dsh")
    return paths


def _make_mount_points(root: Path) -> None:
    """Before the first command: a missing ``.dsh`` (and ``.git/hooks`` in a
    repository) is made, empty, so that it can be bound read-only: else a command could
    create it and write there what dsh or git would obey later. (A repository that a
    command creates and plants hooks in, in one go, is not covered.)"""
    git = root / ".git"
    with contextlib.suppress(OSError):
        if git.is_dir():
            (git / "hooks").mkdir(exist_ok=True)
        (root / ".dsh").mkdir(exist_ok=True)


SANDBOX: ServiceKey[Sandbox] = ServiceKey("sandbox")
"""The OS sandbox every program the model starts runs in (``wrap``), its policy and
whether it works here (``ready``)."""
