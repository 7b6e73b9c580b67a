"""Dataclasses made at start-up without compiling their methods again at every launch.

Python (3.11, 3.12) writes each dataclass's ``__init__``, ``__repr__``, ``__eq__`` and
so on as source text and compiles it with ``exec`` when the class is made, at every
import: some 1,400 functions on the way to the TUI being ready, about 0.1 CPU-s, the
largest single cost of start-up after the imports' own bytecode, which Python caches
but these it does not. The text depends only on the class's fields and options, so
what it compiles to is the same at every launch.

:func:`install` (a front end, before its imports) gives the :mod:`dataclasses` module
an ``exec`` that looks each text up among the code objects compiled by earlier
launches, kept in ``$DSH_HOME/cache/`` in a file named for the interpreter's bytecode
magic number, and compiles (and remembers) only what it has not seen. :func:`save`
(start-up done: :func:`dsh.bulk.start_up_done`) writes the file again if something
was new, in a thread, and takes the ``exec`` away. The text is the key, whole: a class
whose fields change has another text and is compiled anew. A missing, unreadable or
foreign file (another owner, writable by others, not this format) is compiling as
Python would.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import marshal
import os
import stat
import tempfile
import threading
from pathlib import Path
from types import CodeType
from typing import Any

from dsh.paths import dsh_home, private_dir

CACHE_DIR = "cache"
FORMAT = b"dsh-dataclass-code-1\n"
MAX_ENTRIES = 20_000
"""Beyond this (many dsh versions' classes in one file), a save keeps only this
launch's."""

_cached: dict[str, CodeType] | None = None
_path: Path | None = None
_used: dict[str, CodeType] = {}
_new = False


def cache_file(home: Path | None = None) -> Path:
    magic = importlib.util.MAGIC_NUMBER.hex()
    return (home or dsh_home()) / CACHE_DIR / f"dataclass-code-{magic}.marshal"


def _read(path: Path) -> dict[str, CodeType]:
    try:
        with path.open("rb") as file:
            info = os.fstat(file.fileno())
            # The file is run as code: only ours, written by us.
            if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return {}
            data = file.read()
        if not data.startswith(FORMAT):
            return {}
        table = marshal.loads(data[len(FORMAT) :])
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if not isinstance(table, dict):
        return {}
    return {k: v for k, v in table.items() if isinstance(k, str) and isinstance(v, CodeType)}


def _exec(source: Any, globals: Any = None, locals: Any = None, /) -> None:
    global _new
    table = _cached  # save() may end the cache meanwhile, from another thread
    if isinstance(source, str) and table is not None:
        code = table.get(source)
        if code is None:
            # dont_inherit: compiled as dataclasses' own exec would, not under this
            # module's ``from __future__ import annotations``.
            code = compile(source, "<string>", "exec", dont_inherit=True)
            table[source] = code
            _new = True
        _used[source] = code
        source = code
    exec(source, globals, locals)  # the text dataclasses wrote, or its compiled code


def install(home: Path | None = None) -> None:
    """Read the cache and hand :mod:`dataclasses` the ``exec`` that uses it (once a
    process; a second call does nothing)."""
    global _cached, _path
    if _cached is not None or "exec" in vars(dataclasses):
        return
    _path = cache_file(home)  # where it is saved too, whatever DSH_HOME says by then
    _cached = _read(_path)
    dataclasses.exec = _exec  # type: ignore[attr-defined]


def save() -> threading.Thread | None:
    """Stop using the cache; write it again, in a thread, if this launch compiled
    something it did not hold. The thread (returned, else None) is not a daemon: the
    interpreter waits for it at exit, so a launch ended at once still leaves a whole
    file (written aside (0600), then renamed over the old one)."""
    global _cached, _used, _new
    if _cached is None or _path is None:
        return None
    if vars(dataclasses).get("exec") is _exec:
        del dataclasses.exec  # type: ignore[attr-defined]
    table = _cached if len(_cached) <= MAX_ENTRIES else _used
    new, _cached, _used, _new = _new, None, {}, False
    if not new:
        return None
    writer = threading.Thread(target=_write, args=(_path, table), name="dsh-dataclass-code")
    writer.start()
    return writer


def _write(path: Path, table: dict[str, CodeType]) -> None:
    with contextlib.suppress(OSError):
        private_dir(path.parent)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".dataclass-code-")
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(FORMAT + marshal.dumps(table))
            os.replace(temporary, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
