"""Whether a shell pattern could name a path that a table or a rule covers.

A command's word with unquoted ``*``, ``?``, ``[...]``, an extglob or a brace expansion
is replaced by bash with file names when it runs, so what it names is decided then,
not when dsh reads it: ``cp x .gi?/config`` writes ``.git/config``. Comparing the
word's text with a protected path misses that; expanding it on disk now misses a file
the command (or the one before it) creates first. So a pattern is compared with each
protected or denied pattern as a language: *could* some path match both?

Two pattern dialects meet here:

- **bash** (a command's word): ``*``, ``?`` and classes stop at ``/``, and a name
  starting with a dot is matched only by a literal dot at the start of a pattern's
  part (unless ``dotglob`` is on); ``\\x`` is a literal ``x``; extglob groups
  (``@(a|b)``, ``!(x)``) are read as ``*``, which matches more, never less;
- **fnmatch** (dsh's tables, and ``read(...)``/``edit(...)`` rules as
  :func:`dsh.policy.permissions._glob_path` matches them): ``*`` and ``?`` cross ``/``.

Both are read into a list of one-character tests plus stars, and a walk over pairs of
positions decides whether a string exists that both accept.
"""

from __future__ import annotations

import functools
import glob as globbing
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

MAX_ALTERNATIVES = 64
"""Brace expansions beyond this many words are read as ``*`` (matches more)."""
MAX_MATCHES = 512
"""On-disk matches looked at per pattern; a pattern matching more is asked about."""
MAX_PATTERNS = 64
"""Pattern words compared per command; a command with more is asked about."""
MAX_PATTERN_LENGTH = 1024
"""Longer pattern words (longer than any path) are asked about, not compared."""
_OTHER = "\ue000"  # a character no pattern names: stands for "any other character"
_OPTIONS = re.compile(r"dotglob|globstar|nocaseglob|GLOBIGNORE|BASHOPTS|shopt")


@dataclass(frozen=True, slots=True, eq=False)  # hashed by identity: cheap as a key
class _Token:
    kind: str
    """``lit``, ``any`` (one character), ``star`` (any run), ``class``; ``all`` (any
    run, ``/`` and leading dots included: everything under a folder)."""
    chars: str = ""
    """``lit``: the character; ``class``: its single characters."""
    ranges: tuple[tuple[str, str], ...] = ()
    negated: bool = False
    first: bool = False
    """bash: the first token of a path part (only it may match a leading dot)."""

    def accepts(self, char: str, *, slash: bool) -> bool:
        """Whether this token takes ``char``; ``slash``: whether ``/`` can be matched
        by anything but a literal (fnmatch)."""
        if self.kind == "lit":
            return char == self.chars
        if self.kind == "all":
            return True
        if char == "/" and not slash:
            return False
        if self.kind in ("any", "star"):
            return True
        inside = char in self.chars or any(lo <= char <= hi for lo, hi in self.ranges)
        return inside != self.negated

    def candidates(self) -> Iterable[str]:
        yield from self.chars
        for lo, hi in self.ranges:
            yield lo
            yield hi


Tokens = tuple[_Token, ...]


# ---------------------------------------------------------------------- reading


def literal(text: str) -> Tokens:
    return tuple(_Token("lit", c) for c in text)


ANYTHING: Tokens = (_Token("star"),)
"""fnmatch's ``*``: any string, ``/`` included."""
UNDER: Tokens = (_Token("lit", "/"), _Token("all"))
"""Appended to a folder's bash tokens: any path under it."""


def _bracket(text: str, pos: int, *, escapes: bool) -> tuple[_Token, int] | None:
    """A ``[...]`` class starting at ``pos`` (after the ``[``), or None when it is not
    closed (then ``[`` is a literal)."""
    negated = pos < len(text) and text[pos] in "!^"
    if negated:
        pos += 1
    chars: list[str] = []
    ranges: list[tuple[str, str]] = []
    start = pos
    while pos < len(text):
        c = text[pos]
        if c == "]" and pos > start:
            return _Token("class", "".join(chars), tuple(ranges), negated), pos + 1
        if c == "\\" and escapes and pos + 1 < len(text):
            pos += 1
            c = text[pos]
        elif c == "[" and text.startswith("[:", pos):
            end = text.find(":]", pos + 2)
            if end > 0:  # a character class such as [:alpha:]: anything
                ranges.append(("\x00", "\U0010ffff"))
                pos = end + 2
                continue
        if pos + 2 < len(text) and text[pos + 1] == "-" and text[pos + 2] != "]":
            ranges.append((c, text[pos + 2]))
            pos += 3
            continue
        chars.append(c)
        pos += 1
    return None


def bash_tokens(text: str) -> Tokens:
    """A bash pattern without braces (see :func:`expand_braces`), ``\\`` escaping."""
    tokens: list[_Token] = []
    pos = 0
    first = True
    while pos < len(text):
        c = text[pos]
        if c == "\\" and pos + 1 < len(text):
            tokens.append(_Token("lit", text[pos + 1], first=first))
            pos += 2
        elif c in "?*+@!" and text.startswith("(", pos + 1):
            end = _group_end(text, pos + 2)
            tokens.append(_Token("star", first=first))
            pos = end
        elif c == "*":
            if not (tokens and tokens[-1].kind == "star" and not first):
                tokens.append(_Token("star", first=first))  # ** is * but for globstar
            pos += 1
        elif c == "?":
            tokens.append(_Token("any", first=first))
            pos += 1
        elif c == "[" and (found := _bracket(text, pos + 1, escapes=True)) is not None:
            token, pos = found
            tokens.append(_Token("class", token.chars, token.ranges, token.negated, first))
        else:
            tokens.append(_Token("lit", c, first=first))
            pos += 1
        first = c == "/" and tokens[-1].kind == "lit"
    return tuple(tokens)


def _group_end(text: str, pos: int) -> int:
    depth = 1
    while pos < len(text):
        if text[pos] == "\\":
            pos += 2
            continue
        if text[pos] == "(":
            depth += 1
        elif text[pos] == ")":
            depth -= 1
            if depth == 0:
                return pos + 1
        pos += 1
    return len(text)


def fn_tokens(text: str) -> Tokens:
    """An fnmatch pattern (no escapes; ``*`` and ``?`` cross ``/``)."""
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        c = text[pos]
        if c == "*":
            if not (tokens and tokens[-1].kind == "star"):
                tokens.append(_Token("star"))
            pos += 1
        elif c == "?":
            tokens.append(_Token("any"))
            pos += 1
        elif c == "[" and (found := _bracket(text, pos + 1, escapes=False)) is not None:
            token, pos = found
            tokens.append(token)
        else:
            tokens.append(_Token("lit", c))
            pos += 1
    return tuple(tokens)


def expand_braces(text: str) -> list[str]:
    """bash's brace expansion of a pattern (``.gi{t,x}`` is ``.git`` and ``.gix``);
    quotes inside braces are dropped and ``{1..9}``-style sequences read as ``*``."""
    found: list[str] = []
    pending = [text]
    while pending:
        word = pending.pop()
        span = _first_brace(word)
        if span is None:
            found.append(word)
        else:
            start, end, parts = span
            head, tail = word[:start], word[end:]
            for part in reversed(parts):
                pending.append(head + part + tail)
        if len(found) + len(pending) > MAX_ALTERNATIVES:
            return [_BRACE.sub("*", text)]
    return found


_BRACE = re.compile(r"\{[^{}]*\}")


def _first_brace(word: str) -> tuple[int, int, list[str]] | None:
    """The first unescaped ``{...}`` holding a ``,`` or ``..`` at its own level."""
    pos = 0
    while pos < len(word):
        c = word[pos]
        if c == "\\":
            pos += 2
            continue
        if c == "{":
            depth, index, parts, part_start = 1, pos + 1, [], pos + 1
            while index < len(word) and depth:
                d = word[index]
                if d == "\\":
                    index += 2
                    continue
                if d == "{":
                    depth += 1
                elif d == "}":
                    depth -= 1
                elif d == "," and depth == 1:
                    parts.append(word[part_start:index])
                    part_start = index + 1
                index += 1
            if depth == 0:
                inner = word[pos + 1 : index - 1]
                if parts:
                    parts.append(word[part_start : index - 1])
                    return pos, index, [_unquoted(p) for p in parts]
                if ".." in inner:
                    return pos, index, ["*"]
        pos += 1
    return None


def _unquoted(part: str) -> str:
    # The word reader left a brace's text as written: its quotes make literal text.
    out = []
    quote = ""
    for c in part:
        if c in "'\"" and (not quote or quote == c):
            quote = "" if quote else c
        elif quote and c in "\\*?[]{}(),|":
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


# ---------------------------------------------------------------------- deciding


def options_possible(command: str) -> bool:
    """Whether the command could turn on ``dotglob``, ``globstar`` or ``nocaseglob``
    before its patterns expand (a fresh ``bash -c`` starts with them off)."""
    return bool(_OPTIONS.search(command))


def could_match(pattern: Tokens, other: Tokens, *, dotglob: bool = False) -> bool:
    """Whether some string is matched by both ``pattern`` (bash) and ``other``
    (fnmatch). ``dotglob``: a wildcard may match a name's leading dot (and ``**``
    may cross ``/``: the options come together)."""
    head, other_head = _head(pattern), _head(other)
    if not (head.startswith(other_head) or other_head.startswith(head)):
        return False  # most pairs: two paths that part before any wildcard
    return _walk(pattern, other, dotglob=dotglob)


def _walk(pattern: Tokens, other: Tokens, *, dotglob: bool) -> bool:
    start = (0, 0, True)
    seen = {start}
    stack = [start]
    end = (len(pattern), len(other))
    while stack:
        i, j, fresh = stack.pop()
        if (i, j) == end:
            return True
        moves: list[tuple[int, int, bool]] = []
        a = pattern[i] if i < len(pattern) else None
        b = other[j] if j < len(other) else None
        if a is not None and a.kind in ("star", "all"):
            moves.append((i + 1, j, fresh))
        if b is not None and b.kind == "star":
            moves.append((i, j + 1, fresh))
        if a is not None and b is not None and a.kind == b.kind == "lit":
            # Most steps: two literal characters (a folder's path against a table's).
            if a.chars == b.chars:
                leading = a.chars == "." and fresh and not dotglob and not a.first
                if not leading:
                    moves.append((i + 1, j + 1, a.chars == "/"))
        elif a is not None and b is not None:
            if a.kind == "lit" or b.kind == "lit":
                chars = {a.chars if a.kind == "lit" else b.chars}
            else:
                chars = _candidates(a, b)
            for char in chars:
                if not a.accepts(char, slash=dotglob and a.kind == "star"):
                    continue
                if not b.accepts(char, slash=True):
                    continue
                leading = char == "." and fresh and not dotglob
                if leading and a.kind != "all" and not (a.kind == "lit" and a.first):
                    continue  # bash's wildcards never match a leading dot
                stays = a.kind in ("star", "all")
                moves.append((i if stays else i + 1, j if b.kind == "star" else j + 1, char == "/"))
        for move in moves:
            if move not in seen:
                seen.add(move)
                stack.append(move)
    return False


@functools.lru_cache(maxsize=1024)
def _head(tokens: Tokens) -> str:
    """The literal text a pattern starts with."""
    out = []
    for token in tokens:
        if token.kind != "lit":
            break
        out.append(token.chars)
    return "".join(out)


_RULE_CHARACTERS = frozenset(("/", ".", _OTHER))


def _candidates(a: _Token, b: _Token) -> set[str]:
    """Characters that stand for every way both tokens can match one: their own,
    and the few that decide the rules (``/``, a dot, any other)."""
    return {*a.candidates(), *b.candidates(), *_RULE_CHARACTERS}


def suffixes_after(pattern: Tokens, prefix: str) -> list[Tokens]:
    """What is left of a bash ``pattern`` once it has matched the folder ``prefix``
    and a ``/``: the pattern of the paths it names under that folder, relative to it
    (one per way to match; none when it names nothing there)."""
    states = {0}
    fresh = True
    for char in prefix + "/":
        closure = set(states)
        stack = list(states)
        while stack:
            i = stack.pop()
            if i < len(pattern) and pattern[i].kind in ("star", "all") and i + 1 not in closure:
                closure.add(i + 1)
                stack.append(i + 1)
        states = set()
        for i in closure:
            if i >= len(pattern):
                continue
            token = pattern[i]
            if not token.accepts(char, slash=token.kind == "all"):
                continue
            leading = char == "." and fresh and token.kind != "all"
            if leading and not (token.kind == "lit" and token.first):
                continue
            states.add(i if token.kind in ("star", "all") else i + 1)
        fresh = char == "/"
        if not states:
            return []
    return [_first(pattern[i:]) for i in sorted(states)]


def _first(tokens: Tokens) -> Tokens:
    if not tokens or tokens[0].first or tokens[0].kind == "all":
        return tokens
    head = tokens[0]
    return (_Token(head.kind, head.chars, head.ranges, head.negated, True), *tokens[1:])


@functools.lru_cache(maxsize=256)
def _folded(tokens: Tokens) -> Tokens:
    def fold(t: _Token) -> _Token:
        ranges = tuple((lo.lower(), hi.lower()) for lo, hi in t.ranges)
        ranges += tuple((lo.upper(), hi.upper()) for lo, hi in t.ranges)
        chars = t.chars.lower() + t.chars.upper() if t.kind == "class" else t.chars.lower()
        return _Token(t.kind, chars, ranges, t.negated, t.first)

    return tuple(fold(t) for t in tokens)


def could_match_any(pattern: Tokens, others: Iterable[Tokens], *, options: bool = False) -> bool:
    """:func:`could_match` against any of ``others``; ``options``: the command may
    have set bash's glob options (``nocaseglob`` too: letters in either case)."""
    if options:
        pattern = _folded(pattern)
    for other in others:
        if could_match(pattern, _folded(other) if options else other, dotglob=options):
            return True
    return False


def on_disk(pattern: Tokens, *, hidden: bool) -> list[Path] | None:
    """What ``pattern`` (absolute) matches on disk now, as Python's glob sees it;
    None when it matches more than :data:`MAX_MATCHES`."""
    text = "".join(_python_glob(t) for t in pattern)
    found: list[Path] = []
    try:
        for match in globbing.iglob(text, include_hidden=hidden):
            found.append(Path(match))
            if len(found) > MAX_MATCHES:
                return None
    except (ValueError, UnicodeError):
        return []  # a NUL or a lone surrogate: no file has such a name
    return found


def pattern_text(tokens: Tokens) -> str:
    """The pattern written out again, for messages (``/p/.gi?/config``)."""
    out = []
    for t in tokens:
        if t.kind == "class":
            ranges = "".join(f"{lo}-{hi}" for lo, hi in t.ranges)
            out.append(f"[{'!' if t.negated else ''}{t.chars}{ranges}]")
        else:
            out.append({"lit": t.chars, "any": "?", "star": "*", "all": "**"}[t.kind])
    return "".join(out)


def is_literal(tokens: Tokens) -> bool:
    return all(t.kind == "lit" for t in tokens)


def escape(text: str) -> str:
    """``text`` as a bash pattern naming exactly it."""
    return _escaped(text)


def _python_glob(token: _Token) -> str:
    if token.kind == "lit":
        return globbing.escape(token.chars) if token.chars in "*?[" else token.chars
    if token.kind == "any":
        return "?"
    if token.kind == "star":
        return "*"
    body = "".join(f"[{c}]" if c in "]!^-" else c for c in token.chars)
    if "]" in token.chars or "!" in token.chars or "^" in token.chars or "-" in token.chars:
        # Python's classes have no escapes: a class with them matches more, as "?".
        return "?"
    body += "".join(f"{lo}-{hi}" for lo, hi in token.ranges)
    return f"[{'!' if token.negated else ''}{body}]"


def absolute_patterns(word: str, cwd: Path, variables: dict[str, str]) -> list[str]:
    """A word's pattern (:attr:`~dsh.policy.shell_words.Word.pattern`) as absolute
    bash patterns, one per brace alternative: ``~`` and the ``variables`` expanded,
    relative ones taken from ``cwd``, ``..`` and ``.`` parts folded. Alternatives with
    any other variable are left out (what they name is computed)."""
    found: list[str] = []
    for alternative in expand_braces(word):
        text = _substitute(alternative, variables)
        if text is None:
            continue
        if text.startswith("~"):
            head, slash, rest = text.partition("/")
            home = variables.get("HOME", "~") if head == "~" else os.path.expanduser(head)
            if not home.startswith("~"):  # ~user of a user that does not exist stays
                text = _escaped(home) + slash + rest
        if not text.startswith("/"):
            text = _escaped(os.fspath(cwd)) + "/" + text
        found.append(_folded_dots(text))
    return list(dict.fromkeys(found))


_VARIABLE = re.compile(r"\$\{(\w+)\}")


def _substitute(text: str, variables: dict[str, str]) -> str | None:
    unknown = False

    def value(match: re.Match[str]) -> str:
        nonlocal unknown
        if match.group(1) not in variables:
            unknown = True
            return ""
        return _escaped(variables[match.group(1)])

    text = _VARIABLE.sub(value, text)
    return None if unknown else text


_SPECIAL = re.compile(r"([\\*?\[\]{}(),|])")


def _escaped(text: str) -> str:
    return _SPECIAL.sub(r"\\\1", text) if _SPECIAL.search(text) else text


def plain_path(pattern: str) -> str | None:
    """A pattern that names one path (no pattern character, escaped or not) as that
    path's text; None for any other."""
    return None if _SPECIAL.search(pattern) else pattern


def _folded_dots(text: str) -> str:
    """``a/./b`` is ``a/b`` and ``a/x/../b`` is ``a/b``, as the kernel reads them (a
    pattern part before ``..`` must match a folder; read as if it does)."""
    parts: list[str] = []
    for part in text.split("/"):
        if part in ("", "."):
            continue
        if part == ".." and parts:
            parts.pop()
        elif part != "..":
            parts.append(part)
    return "/" + "/".join(parts)
