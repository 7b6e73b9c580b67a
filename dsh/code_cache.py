"""Start-up without compiling the same source text again at every launch.

Python (3.11 to 3.13) compiles text at every import that its bytecode cache does not
hold: each dataclass's ``__init__``, ``__repr__``, ``__eq__`` and so on, written as
source and run with ``exec`` when the class is made (some 1,400 functions on the way to
the TUI being ready); each string annotation pydantic and ``typing`` evaluate, compiled
when its ``typing.ForwardRef`` is made (some 1,700); each named tuple's ``__new__``;
and each regular expression a module compiles at import (some 170, parsed and
translated to the matcher's code in Python). Together about 0.15 CPU-s, the largest
single cost of start-up after the imports' own. What a text compiles to is the same at
every launch.

:func:`install` (a front end, before its imports) gives :mod:`dataclasses` an
``exec``, :mod:`typing` a ``compile``, :mod:`collections` an ``eval`` and ``re``'s
compiler a ``compile`` that look each text up among what earlier launches compiled,
kept in ``$DSH_HOME/cache/`` in a file named for the interpreter's bytecode magic
number and its regular expressions' code version, and compile (and remember) only
what they have not seen. :func:`save` (start-up done: :func:`dsh.bulk.start_up_done`)
takes them away and writes the file again, in a thread, if enough was new. The text
is the key, whole: a class whose fields change has another text and is compiled anew.
A missing, unreadable or foreign file (another owner's, writable by others, not this
format) is compiling as Python would.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import stat
import sys
import tempfile
import threading
import typing
from pathlib import Path
from re import _compiler as re_compiler  # type: ignore[attr-defined]
from re import _constants as re_constants  # type: ignore[attr-defined]
from re import _parser as re_parser  # type: ignore[attr-defined]
from types import CodeType
from typing import Any

from dsh.paths import dsh_home, private_dir

CACHE_DIR = "cache"
KNOWN_PYTHONS = frozenset({(3, 11), (3, 12), (3, 13)})
"""The versions whose ``dataclasses``, ``typing``, ``collections`` and ``re`` compile
as this module expects; on any other the cache is not used and Python compiles as
usual."""
FORMAT = b"dsh-code-cache-2\n"
MAX_ENTRIES = 40_000
"""Beyond this (many dsh versions' texts in one file), a save keeps only this
launch's."""
MIN_NEW = 8
"""A launch that compiled fewer new texts than this writes nothing: one regular
expression of the standard library's ``tokenize`` is built from a set, in another
order at every launch, and would have every launch write the whole file again."""

RegexCode = tuple[int, list[int], int, dict[str, int], tuple[str | None, ...]]
"""What ``_sre.compile`` makes a pattern from: its flags, code, groups and their names."""

_cached: dict[str, CodeType] | None = None
_used: dict[str, CodeType] = {}
_regexes: dict[str, RegexCode] = {}
_regexes_used: dict[str, RegexCode] = {}
_new = 0
_path: Path | None = None


def cache_file(home: Path | None = None) -> Path:
    magic = importlib.util.MAGIC_NUMBER.hex()
    return (home or dsh_home()) / CACHE_DIR / f"code-{magic}-{re_constants.MAGIC}.marshal"


def _read(path: Path) -> tuple[dict[str, CodeType], dict[str, RegexCode]]:
    try:
        with path.open("rb") as file:
            info = os.fstat(file.fileno())
            # The file is run as code: only ours, written by us.
            if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return {}, {}
            data = file.read()
        if not data.startswith(FORMAT):
            return {}, {}
        tables = marshal.loads(data[len(FORMAT) :])
    except (OSError, ValueError, EOFError, TypeError):
        return {}, {}
    if not (isinstance(tables, tuple) and len(tables) == 2):
        return {}, {}
    code, regexes = tables
    if not (isinstance(code, dict) and isinstance(regexes, dict)):
        return {}, {}
    return (
        {k: v for k, v in code.items() if isinstance(k, str) and isinstance(v, CodeType)},
        {k: v for k, v in regexes.items() if isinstance(k, str) and _is_regex_code(v)},
    )


def _is_regex_code(value: object) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) == 5
        and isinstance(value[0], int)
        and isinstance(value[1], list)
        and isinstance(value[2], int)
        and isinstance(value[3], dict)
        and isinstance(value[4], tuple)
    )


def _compiled(source: str, mode: str) -> CodeType:
    global _new
    key = f"{mode}:{source}"
    table = _cached  # save() may end the cache meanwhile, from another thread
    code = table.get(key) if table is not None else None
    if code is None:
        # dont_inherit: compiled as the caller's own compile would be (dataclasses,
        # typing and collections have no __future__ import), not under this module's
        # ``from __future__ import annotations``. A SyntaxError goes to the caller.
        code = compile(source, "<string>", mode, dont_inherit=True)
        if table is not None:
            table[key] = code
            _new += 1
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


def _eval(source: Any, globals: Any = None, locals: Any = None, /) -> Any:
    """The ``eval`` of :mod:`collections` (a named tuple's ``__new__``)."""
    if isinstance(source, str):
        source = _compiled(source, "eval")
    return eval(source, globals, locals)  # the text namedtuple wrote, or its code


_compile_regex = re_compiler.compile


def _regex(pattern: Any, flags: int = 0) -> Any:
    """The compiler of :mod:`re` (a pattern its own cache does not hold): what
    ``_sre.compile`` needs, from the cache or made as ``re._compiler.compile`` makes it."""
    global _new
    if not isinstance(pattern, str | bytes) or flags & re_constants.SRE_FLAG_DEBUG:
        return _compile_regex(pattern, flags)  # a parsed pattern, or debugging output
    if isinstance(pattern, str):
        key = f"{int(flags)}:s:{pattern}"
    else:
        key = f"{int(flags)}:b:{pattern.decode('latin-1')}"
    table, used = _regexes, _regexes_used  # save() may end the cache meanwhile
    made = table.get(key)
    if made is None:
        parsed = re_parser.parse(pattern, flags)
        code = re_compiler._code(parsed, flags)
        indexgroup: list[str | None] = [None] * parsed.state.groups
        for name, index in parsed.state.groupdict.items():
            indexgroup[index] = name
        made = (
            int(flags | parsed.state.flags),
            [int(op) for op in code],  # its opcodes are int subclasses marshal refuses
            parsed.state.groups - 1,
            dict(parsed.state.groupdict),
            tuple(indexgroup),
        )
        if _cached is not None:
            table[key] = made
            _new += 1
    if _cached is not None:
        used[key] = made
    all_flags, code, groups, groupindex, names = made
    return re_compiler._sre.compile(pattern, all_flags, code, groups, groupindex, names)


_PATCHES = (
    (dataclasses, "exec", _exec),
    (typing, "compile", _compile),
    (collections, "eval", _eval),
    (re_compiler, "compile", _regex),
)


def install(home: Path | None = None) -> None:
    """Read the cache and hand :mod:`dataclasses` and :mod:`typing` what uses it
    (once a process; a second call does nothing)."""
    global _cached, _regexes, _path
    if sys.version_info[:2] not in KNOWN_PYTHONS:
        return  # the internals it stands in for are those of these versions alone
    if _cached is not None or re_compiler.compile is not _compile_regex:
        return
    if any(name in vars(module) for module, name, _ in _PATCHES[:3]):
        return  # someone else's exec or compile there: left alone
    _path = cache_file(home)  # where it is saved too, whatever DSH_HOME says by then
    _cached, _regexes = _read(_path)
    for module, name, patch in _PATCHES:
        setattr(module, name, patch)


def save() -> threading.Thread | None:
    """Stop using the cache; write it again, in a thread, if this launch compiled
    :data:`MIN_NEW` texts or more that it did not hold. The thread (returned, else None) is not a daemon: the
    interpreter waits for it at exit, so a launch ended at once still leaves a whole
    file (written aside, 0600, then renamed over the old one)."""
    global _cached, _used, _regexes, _regexes_used, _new
    if _cached is None or _path is None:
        return None
    for module, name, patch in _PATCHES[:3]:  # builtins shadowed: unshadowed
        if vars(module).get(name) is patch:
            delattr(module, name)
    if re_compiler.compile is _regex:  # a module's own function, not a shadowed builtin
        re_compiler.compile = _compile_regex
    code = _cached if len(_cached) <= MAX_ENTRIES else _used
    regexes = _regexes if len(_regexes) <= MAX_ENTRIES else _regexes_used
    new, _cached, _used, _regexes, _regexes_used, _new = _new, None, {}, {}, {}, 0
    if new < MIN_NEW:
        return None
    writer = threading.Thread(target=_write, args=(_path, (code, regexes)), name="dsh-code-cache")
    writer.start()
    return writer


def _write(path: Path, tables: tuple[dict[str, CodeType], dict[str, RegexCode]]) -> None:
    with contextlib.suppress(OSError, ValueError):  # no cache: the next launch compiles
        data = FORMAT + marshal.dumps(tables)
        private_dir(path.parent)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".code-")
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            os.replace(temporary, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
