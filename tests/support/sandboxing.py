"""What the sandbox tests share: a home folder the sandbox can see, and a server
outside it that counts who connects.

The sandbox gives every program a private ``/tmp``, so a home under pytest's
``tmp_path`` (in ``/tmp``) is simply not there inside, and a test that a write to
``~/.bashrc`` is refused would pass for that reason alone. A home under ``/var/tmp``
is seen as the user's home is: read-only, its secret stores hidden.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.waits import HANG_S

SECRET_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nsandbox-test-secret-key\n"


@contextmanager
def visible_home() -> Iterator[Path]:
    """An empty home outside ``/tmp`` with a ``~/.ssh/id_rsa`` (:data:`SECRET_KEY`),
    removed afterwards."""
    home = Path(tempfile.mkdtemp(prefix="dsh-test-home-", dir="/var/tmp")).resolve()
    try:
        (home / ".ssh").mkdir(mode=0o700)
        (home / ".ssh" / "id_rsa").write_text(SECRET_KEY)
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


class Listener:
    """A TCP server on 127.0.0.1, outside the sandbox, that counts the connections it
    accepts (in a thread: the test's loop may be blocked in a subprocess call)."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.settimeout(0.2)
        self.port: int = self.socket.getsockname()[1]
        self.accepted = 0
        self._counted = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.socket.accept()
            except OSError:
                continue
            with self._counted:
                self.accepted += 1
                self._counted.notify_all()
            connection.close()

    def reached(self, count: int) -> int:
        """The connections accepted, once ``count`` of them were (or after HANG_S). A
        client says "connected" as soon as the kernel has its connection queued, before
        this thread accepts it: a busy machine showed 0 just after a client connected."""
        with self._counted:
            self._counted.wait_for(lambda: self.accepted >= count, HANG_S)
            return self.accepted

    def close(self) -> None:
        self._stop.set()
        self._thread.join(HANG_S)
        self.socket.close()


@contextmanager
def listening() -> Iterator[Listener]:
    server = Listener()
    try:
        yield server
    finally:
        server.close()
