"""Secrets dsh found in its environment at start, held in this process alone.

Every variable whose name (or value) looks like a credential (:func:`looks_secret`)
is taken out of the environment when dsh starts (:func:`hold`): out of ``os.environ``,
so no child process ever inherits one, and out of the process's initial environment
block, which Linux shows to every process of the user as ``/proc/<pid>/environ`` and
which ``os.environ`` and ``unsetenv`` never change. The values stay in a dictionary
of this module; the credential store reads them from here (:func:`value_of`), and a
child gets one only when the user's own settings name it (``[environment]
passthrough``, a user-level MCP server's ``env``).

Wiping the block in place costs a read of ``/proc/self/stat``, importing ``ctypes``
and a few ``memset`` calls: about 0.3 ms plus 2 ms for ``ctypes``, and this module's
import about 1.5 ms. Re-executing dsh with a cleaned environment would have paid the
interpreter's start-up and dsh's imports twice (tens of milliseconds, against the
0.5 s budget to ready) and needed the values handed over another way (an inherited
pipe); the block is the only place the kernel shows, so rewriting it is enough.
"""

from __future__ import annotations

import os
import re
from collections import ChainMap
from collections.abc import Iterable, Mapping

SECRET_WORD = re.compile(r"KEY|PASSWORD|SECRET|TOKEN", re.IGNORECASE)
"""Names holding one of these anywhere (``AWS_SECRET_ACCESS_KEY``, ``PGPASSWORD``)."""
SECRET_SUFFIX = re.compile(
    r"_(?:TOKEN|KEY|SECRET|PAT|PWD|PASSWORD|AUTH|CREDENTIALS?|DSN)$", re.IGNORECASE
)
"""Names ending so (``GITHUB_PAT``, ``MYSQL_PWD``, ``NPM_AUTH``, ``SENTRY_DSN``)."""
ADDRESS_NAME = re.compile(r"_(?:URL|URI)$", re.IGNORECASE)
USER_AND_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*:[^/@\s]+@")
"""An address carrying ``user:password@`` (``postgres://admin:pw@db/app``)."""
OWN_PREFIX = "DSH_"
"""dsh's own settings: read by dsh, never secrets, never held."""

_held: dict[str, str] = {}


def looks_secret(name: str, value: str = "") -> bool:
    """Whether a variable looks like a credential, by its name or, for an address
    (``*_URL``), by the password in its value."""
    if SECRET_WORD.search(name) or SECRET_SUFFIX.search(name):
        return True
    return bool(ADDRESS_NAME.search(name) and USER_AND_PASSWORD.match(value))


def hold(environ: os._Environ[str] | None = None) -> list[str]:
    """Take every secret-looking variable out of the environment into this module,
    and wipe it from the initial environment block. The names taken, sorted."""
    env = os.environ if environ is None else environ
    taken = sorted(
        name
        for name, value in env.items()
        if not name.startswith(OWN_PREFIX) and looks_secret(name, value)
    )
    for name in taken:
        # os.environ's deletion unsets the variable (and drops it from the bytes
        # copy, posix.environ, which os.environ's data is).
        _held[name] = env.pop(name)
    if taken and environ is None:
        _wipe_initial_block(taken)
    return taken


def held(name: str) -> str | None:
    return _held.get(name)


def held_names() -> frozenset[str]:
    return frozenset(_held)


def value_of(name: str) -> str | None:
    """A variable's value as dsh started with it: the environment, else what
    :func:`hold` took from it."""
    return os.environ.get(name) or _held.get(name) or None


def environment() -> Mapping[str, str]:
    """The environment as dsh started with it, secrets included (for credential
    lookups only; never a child's environment)."""
    return ChainMap(os.environ, _held)


def passed_through(names: Iterable[str]) -> dict[str, str]:
    """The held values of ``names`` (the user's own passthrough list)."""
    return {name: value for name in names if (value := _held.get(name))}


def _wipe_initial_block(names: list[str]) -> None:
    """Overwrite ``NAME=value`` of each of ``names`` in the environment block the
    kernel shows as ``/proc/self/environ`` (Linux only; elsewhere nothing shows it)."""
    bounds = _block_bounds()
    if bounds is None:
        return
    import ctypes  # about 2 ms, paid only when there is something to wipe

    start, end = bounds
    wanted = {os.fsencode(name) + b"=" for name in names}
    block = ctypes.string_at(start, end - start)
    offset = 0
    for entry in block.split(b"\0"):
        if any(entry.startswith(prefix) for prefix in wanted):
            # The C environ array no longer points here (unsetenv dropped it), so
            # nothing reads these bytes but /proc.
            ctypes.memset(start + offset, 0, len(entry))
        offset += len(entry) + 1


def _block_bounds() -> tuple[int, int] | None:
    """``env_start`` and ``env_end`` of this process (``/proc/self/stat`` fields 50
    and 51, after the command name, which may hold spaces and parentheses)."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2 :].split()
    try:
        start, end = int(fields[50 - 3]), int(fields[51 - 3])
    except (IndexError, ValueError):
        return None
    return (start, end) if 0 < start < end else None
