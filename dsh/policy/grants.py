"""Signed session grants: "allow for this session" holds only when this installation's
user gave it.

A session log is a file anyone can edit, export and import. Were every
``allow-session`` event in it obeyed, a log written by hand (or by someone else's dsh)
would grant itself ``bash`` on resume. So each grant is signed when the person makes it,
with HMAC-SHA256 under a secret of this installation, ``$DSH_HOME/installation.key``
(32 random bytes, stored as hex, mode 0600 in the private home), over the session, the
request, the tool, the outcome and the pattern. A grant copied into another session, or
onto another request, tool or pattern, or made by another installation, does not verify.

The key is made on first need. Two processes making it at once agree on one: each
writes a temporary file and links it into place, which only the first can do. A key
file that another user owns, or that others could read or write, is refused: no grant
is signed or restored with it, and the refusal says why (never what the key is).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import os
import secrets
import stat
import time
from collections.abc import Sequence
from pathlib import Path

from dsh.paths import INSTALLATION_KEY_FILE, PRIVATE_FILE, dsh_home, private_dir

KEY_BYTES = 32
DOMAIN = "dsh session grant v1"
"""The first signed field: a MAC made for something else can never pass for a grant."""

# A key file just created without a link (see _publish_in_place) may be read before
# its contents are: how long a reader waits for them.
_EMPTY_RETRIES = 50
_EMPTY_WAIT_S = 0.01


class KeyRefused(Exception):
    """The installation key cannot be used; the message says why, never what it is."""


def grant_fields(
    session_id: str, request_id: str, tool: str, outcome: str, pattern: str
) -> list[str]:
    """What a session grant's MAC covers, in a fixed order."""
    return [DOMAIN, session_id, request_id, tool, outcome, pattern]


def _message(fields: Sequence[str]) -> bytes:
    # JSON of a list: each field is quoted and escaped, so no field can spill into the
    # next (as "a|b" + "c" and "a" + "b|c" would with a plain separator).
    return json.dumps(list(fields), ensure_ascii=True, separators=(",", ":")).encode()


def sign(key: bytes, fields: Sequence[str]) -> str:
    return hmac.new(key, _message(fields), hashlib.sha256).hexdigest()


def verify(key: bytes, fields: Sequence[str], mac: object) -> bool:
    """Whether ``mac`` (as read from a log: anything) is the MAC of ``fields``."""
    if not isinstance(mac, str):
        return False
    given = mac.encode("utf-8", "surrogateescape")
    return hmac.compare_digest(sign(key, fields).encode(), given)


class InstallationKey:
    """``$DSH_HOME/installation.key``, read (or made) when first needed and then kept.

    ``home`` None: where :func:`dsh.paths.dsh_home` says at that moment."""

    def __init__(self, home: Path | None = None) -> None:
        self._home = home
        self._key: bytes | None = None

    def __repr__(self) -> str:
        return f"InstallationKey({str(self.path)!r})"  # never the key

    @property
    def path(self) -> Path:
        return (self._home or dsh_home()) / INSTALLATION_KEY_FILE

    def get(self, *, create: bool) -> bytes | None:
        """The key; None when there is none and ``create`` is false (then no grant can
        have been made here). Raises :class:`KeyRefused` for a key that must not be used."""
        if self._key is not None:
            return self._key
        path = self.path
        key = _read(path)
        if key is None and create:
            key = _create(path)
        self._key = key
        return key


def _read(path: Path) -> bytes | None:
    for _ in range(_EMPTY_RETRIES):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise KeyRefused(f"{path} is a symbolic link") from None
            raise KeyRefused(f"{path} cannot be read: {error.strerror}") from None
        try:
            status = os.fstat(fd)
            _check(path, status)
            data = os.read(fd, 4 * KEY_BYTES)
        except OSError as error:
            raise KeyRefused(f"{path} cannot be read: {error.strerror}") from None
        finally:
            os.close(fd)
        if data:
            return _decode(path, data)
        time.sleep(_EMPTY_WAIT_S)  # being written by the process that made it
    raise KeyRefused(f"{path} is empty")


def _check(path: Path, status: os.stat_result) -> None:
    if not stat.S_ISREG(status.st_mode):
        raise KeyRefused(f"{path} is not a regular file")
    if status.st_uid != os.geteuid():
        raise KeyRefused(f"{path} is owned by another user (uid {status.st_uid})")
    mode = stat.S_IMODE(status.st_mode)
    if mode & 0o077:
        raise KeyRefused(
            f"{path} can be read or written by other users (mode {mode:04o}); "
            f"make it {PRIVATE_FILE:04o} (chmod {PRIVATE_FILE:o})"
        )


def _decode(path: Path, data: bytes) -> bytes:
    try:
        key = bytes.fromhex(data.decode("ascii").strip())
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise KeyRefused(f"{path} does not hold a dsh installation key")
    return key


def _create(path: Path) -> bytes:
    """A new key, or the one another process put in place first."""
    try:
        private_dir(path.parent)
        temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE)
    except OSError as error:
        raise KeyRefused(f"{path} cannot be made: {error.strerror}") from None
    key = secrets.token_bytes(KEY_BYTES)
    try:
        try:
            _write(fd, key)
        finally:
            os.close(fd)
        try:
            # link() fails if the name exists, so it publishes a whole file or nothing:
            # of two processes racing, the second reads the first one's key.
            os.link(temp, path)
        except FileExistsError:
            pass
        except OSError:
            _publish_in_place(path, key)  # a file system without hard links
    except OSError as error:
        raise KeyRefused(f"{path} cannot be made: {error.strerror}") from None
    finally:
        with contextlib.suppress(OSError):
            temp.unlink()
    key_read = _read(path)
    if key_read is None:
        raise KeyRefused(f"{path} vanished as it was made")
    return key_read


def _publish_in_place(path: Path, key: bytes) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE)
    except FileExistsError:
        return  # another process won; _read waits for its contents
    try:
        _write(fd, key)
    finally:
        os.close(fd)


def _write(fd: int, key: bytes) -> None:
    os.fchmod(fd, PRIVATE_FILE)  # exactly 0600, whatever the umask left
    os.write(fd, (key.hex() + "\n").encode())
    os.fsync(fd)
