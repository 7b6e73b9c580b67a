"""Start-up without compiling the same source text again at every launch.

Python (3.11, 3.12) compiles text at every import that its bytecode cache does not
hold: each dataclass's ``__init__``, ``__repr__``, ``__eq__`` and so on, written as
source and run with ``exec`` when the class is made (some 1,400 functions on the way to
the TUI being ready), and each string annotation pydantic and ``typing`` evaluate,
compiled when its ``typing.ForwardRef`` is made (some 1,700). Together about 0.13
CPU-s, the largest single cost of start-up after the imports' own. The code a text
compiles to is the same at every launch.

:func:`install` (a front end, before its imports) gives the :mod:`dataclasses`
module an ``exec``, and :mod:`typing` a ``compile``, that look each text up among the
code objects compiled by earlier launches, kept in ``$DSH_HOME/cache/`` in a file named
for the interpreter's bytecode magic number, and compile (and remember) only what they
have not seen. :func:`save` (start-up done: :func:`dsh.bulk.start_up_done`) takes them
away and writes the file again if something was new, in a thread. The text is the key,
whole: a class whose fields change has another text and is compiled anew. A missing,
unreadable or foreign file (another owner's, writable by others, not this format) is
compiling as Python would.
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
import typing
from pathlib import Path
from types import CodeType
from typing import Any

from dsh.paths import dsh_home, private_dir

CACHE_DIR = "cache"
FORMAT = b"dsh-code-cache-1\n"
MAX_ENTRIES = 40_000
"""Beyond this (many dsh versions' texts in one file), a save keeps only this
launch's."""

_cached: dict[str, CodeType] | None = None
_used: dict[str, CodeType] = {}
_new = False
_path: Path | None = None


def cache_file(home: Path | None = None) -> Path:
    magic = importlib.util.MAGIC_NUMBER.hex()
    return (home or dsh_home()) / CACHE_DIR / f"code-{magic}.marshal"


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


def _compiled(source: str, mode: str) -> CodeType:
    global _new
    key = f"{mode}:{source}"
    table = _cached  # save() may end the cache meanwhile, from another thread
    code = table.get(key) if table is not None else None
    if code is None:
        # dont_inherit: compiled as the caller's own compile would be (neither
        # dataclasses nor typing has a __future__ import), not under this module's
        # ``from __future__ import annotations``. A SyntaxError goes to the caller.
        code = compile(source, "<string>", mode, dont_inherit=True)
        if table is not None:
            table[key] = code
            _new = True
    if table is not None:
        _used[key] = code
    return code


def _exec(source: Any, globals: Any = None, locals: Any = None, /) -> None:
    """The ``exec`` of :mod:`dataclasses`: its text, or the code it compiled to."""
    if isinstance(source, str):
        source = _compiled(source, "exec")
    exec(source, globals, locals)  # the text dataclasses wrote, or its compiled code


def _compile(source: Any, filename: Any, mode: str, *args: Any, **kwargs: Any) -> Any:
    """The ``compile`` of :mod:`typing` (a ``ForwardRef``'s expression)."""
    if isinstance(source, str) and (filename, mode, args, kwargs) == ("<string>", "eval", (), {}):
        return _compiled(source, "eval")
    return compile(source, filename, mode, *args, **kwargs)


_PATCHES = ((dataclasses, "exec", _exec), (typing, "compile", _compile))


def install(home: Path | None = None) -> None:
    """Read the cache and hand :mod:`dataclasses` and :mod:`typing` what uses it
    (once a process; a second call does nothing)."""
    global _cached, _path
    if _cached is not None or any(name in vars(module) for module, name, _ in _PATCHES):
        return
    _path = cache_file(home)  # where it is saved too, whatever DSH_HOME says by then
    _cached = _read(_path)
    for module, name, patch in _PATCHES:
        setattr(module, name, patch)


def save() -> threading.Thread | None:
    """Stop using the cache; write it again, in a thread, if this launch compiled
    something it did not hold. The thread (returned, else None) is not a daemon: the
    interpreter waits for it at exit, so a launch ended at once still leaves a whole
    file (written aside, 0600, then renamed over the old one)."""
    global _cached, _used, _new
    if _cached is None or _path is None:
        return None
    for module, name, patch in _PATCHES:
        if vars(module).get(name) is patch:
            delattr(module, name)
    table = _cached if len(_cached) <= MAX_ENTRIES else _used
    new, _cached, _used, _new = _new, None, {}, False
    if not new:
        return None
    writer = threading.Thread(target=_write, args=(_path, table), name="dsh-code-cache")
    writer.start()
    return writer


def _write(path: Path, table: dict[str, CodeType]) -> None:
    with contextlib.suppress(OSError):
        private_dir(path.parent)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".code-")
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(FORMAT + marshal.dumps(table))
            os.replace(temporary, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
