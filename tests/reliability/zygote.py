"""A fork server for ``dsh``: imports it once, then forks one real process per run.

Starting Python and importing dsh costs about a second of CPU; a crash test that kills
``dsh -p`` hundreds of times would spend nearly all its time there. This server
(``python -m tests.reliability.zygote FD``) imports dsh and the bundled plugins, then
waits on the ``SOCK_SEQPACKET`` socket ``FD``. Each request forks a child that takes
the stdin, stdout and stderr descriptors sent with the request, the request's
environment and working directory, and runs ``dsh.cli.main(argv)``, exactly what
``python -m dsh ARGV`` runs after its imports. The child is a process of its own:
it is killed by SIGKILL like any other, and its files and pipes are its own.

Messages are JSON objects, one per packet:

- ``{"op": "spawn", "id": N, "argv": [...], "env": {...}, "cwd": "..."}`` with three
  descriptors; answered by ``{"op": "spawned", "id": N, "pid": PID}``;
- ``{"op": "kill", "pid": PID}``: SIGKILL to that child, if it has not been reaped (so a
  recycled pid is never hit);
- ``{"op": "exit", "pid": PID, "code": C}`` is sent when a child ends (C < 0: the
  signal that ended it).

When the socket closes, every child still running is killed and the server exits.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import pkgutil
import selectors
import signal
import socket
import sys
import traceback
from typing import Any

PRELOAD = (
    "dsh.cli",
    "dsh.ui.headless",
    "dsh.runtime",
    "dsh_plugins._shared.chat_completions",
    "dsh.session.jsonl",
    "dsh.session.catalog",
    "httpx",
    "tests.support.echo_tool",
    "tests.reliability.flush_probe",
)


def preload() -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    import dsh_plugins

    for module in pkgutil.iter_modules(dsh_plugins.__path__):
        # A plugin that cannot import here fails the same way in the child, which
        # reports it as dsh would.
        with contextlib.suppress(Exception):
            importlib.import_module(f"dsh_plugins.{module.name}")


def run_child(request: dict[str, Any], fds: list[int], closing: list[int]) -> None:
    """In the forked child: become ``dsh ARGV`` and never return."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in closing:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        argv = list(request["argv"])
        sys.argv = ["dsh", *argv]
        from dsh.cli import main

        code = main(argv)
    except SystemExit as error:
        code = error.code if isinstance(error.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve(control: socket.socket) -> None:
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    live: set[int] = set()

    def send(message: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            control.send(json.dumps(message).encode())

    def reap() -> None:
        while live:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            live.discard(pid)
            send({"op": "exit", "pid": pid, "code": os.waitstatus_to_exitcode(status)})

    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    send({"op": "ready", "pid": os.getpid()})
    try:
        while True:
            for key, _ in selector.select():
                if key.fileobj == wake_read:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(wake_read, 4096):
                            pass
                    reap()
                    continue
                data, fds, _, _ = socket.recv_fds(control, 1 << 20, 3)
                if not data:
                    return  # the test went away
                request = json.loads(data)
                if request["op"] == "kill":
                    if request["pid"] in live:
                        os.kill(request["pid"], signal.SIGKILL)
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    run_child(request, fds, [control.fileno(), wake_read, wake_write])
                live.add(pid)
                for fd in fds:
                    os.close(fd)
                send({"op": "spawned", "id": request["id"], "pid": pid})
                reap()
    finally:
        for pid in list(live):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in list(live):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    preload()
    serve(control)


if __name__ == "__main__":
    main()
