"""What the sandbox tests share: a home folder the sandbox can see.

The sandbox gives every program a private ``/tmp``, so a home under pytest's
``tmp_path`` (in ``/tmp``) is simply not there inside, and a test that a write to
``~/.bashrc`` is refused would pass for that reason alone. A home under ``/var/tmp``
is seen as the user's home is: read-only, its secret stores hidden.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
