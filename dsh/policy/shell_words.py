"""One bash word, read as bash would read it, without running anything.

tree-sitter-bash finds the statements of a command, but inside a word it is not
exact: it reads ``${x:-`touch PWNED`}`` as a variable with a plain-text default. So
every word is read again here, character by character, by the rules bash uses for
quotes, escapes and expansions. Reading a word gives:

- its *value* when it is the same whatever happens at run time (quotes and escapes
  removed, ``$'\\x72m'`` decoded), else None;
- the scripts it would run (``$(...)``, backticks, ``<(...)``, ``>(...)``), which the
  caller analyses like any command, however deep they sit in the word;
- why no rule can vouch for it (an expansion that runs something, or that the reader
  does not know), and whether that could hide a command from the reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL = frozenset("@*#?$!-0123456789")
_PLAIN_ARITHMETIC = re.compile(r"[0-9\s+\-*/%()<>!&|^~?:]*")
# ${NAME<op>word} operators whose word is only expanded (scanned for substitutions).
_OPERATORS = re.compile(r"(:?[-=+?]|##?|%%?|//?|/#|/%|\^\^?|,,?)")
_EXTGLOB = frozenset("?*+@!")


@dataclass(slots=True)
class Word:
    raw: str
    value: str | None = None
    """The word as the program receives it, when static; None when computed."""
    template: str | None = None
    """The value with plain ``$NAME``/``${NAME}`` kept as ``${NAME}`` (for paths such
    as ``$HOME/.ssh``); None when anything else is computed."""
    glob: bool = False
    """Has unquoted pattern characters: bash may replace it with file names."""
    pattern: str | None = None
    """For a word bash may replace with file names (unquoted ``*?[``, extglob, or a
    brace expansion ``{a,b}``): the word as a pattern, quoted characters escaped with
    a backslash, braces and ``${NAME}`` kept as written. None for other words, and for
    words with anything computed but plain variables."""
    scripts: list[str] = field(default_factory=list)
    """What its substitutions run, innermost text as written."""
    unchecked: list[str] = field(default_factory=list)
    """Why no rule can vouch for this word."""
    hides: bool = False
    """Something in it may run that the reader cannot see."""

    @property
    def static(self) -> bool:
        return self.value is not None and not self.glob


class _Reader:
    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.pos = 0
        self.out: list[str] = []
        self.dynamic = False
        self.only_variables = True
        self.word = Word(raw)
        self.pattern: list[str] = []  # as out, with quoted pattern characters escaped
        self.braces = False

    def run(self) -> Word:
        raw, word = self.raw, self.word
        first = True
        while self.pos < len(raw):
            c = raw[self.pos]
            if c == "\\":
                self.escape(quoted=False)
            elif c == "'":
                end = raw.find("'", self.pos + 1)
                if end < 0:
                    return self.broken("an unterminated quote")
                self.out.append(raw[self.pos + 1 : end])
                self.pattern.append(_literal(raw[self.pos + 1 : end]))
                self.pos = end + 1
            elif c == '"':
                self.pos += 1
                if not self.double_quoted():
                    return self.broken("an unterminated quote")
            elif c == "$" and raw.startswith("$'", self.pos):
                self.ansi_c()
            elif c == "$" and raw.startswith('$"', self.pos):
                self.pos += 2
                if not self.double_quoted():
                    return self.broken("an unterminated quote")
            elif c == "$":
                self.dollar()
            elif c == "`":
                self.backticks()
            elif c in "<>" and raw.startswith("(", self.pos + 1):
                self.pos += 1
                self.substitution("process substitution")
            elif (c in _EXTGLOB and raw.startswith("(", self.pos + 1)) or c in "*?[":
                word.glob = True
                self.out.append(c)
                self.pattern.append(c)
                self.pos += 1
            elif c == "{" and self.brace():
                pass
            elif c == "~" and first:
                self.out.append(c)  # kept: paths are compared with ~ as written
                self.pattern.append(c)
                self.pos += 1
            else:
                self.out.append(c)
                self.pattern.append(c)
                self.pos += 1
            first = False
        return self.finish()

    def finish(self) -> Word:
        text = "".join(self.out)
        word = self.word
        if not self.dynamic:
            word.value = text
        if not self.dynamic or self.only_variables:
            word.template = text
        if (word.glob or self.braces) and self.nothing_hidden():
            word.pattern = "".join(self.pattern)
        return word

    def nothing_hidden(self) -> bool:
        """Nothing computed in the word but plain variables and brace expansions."""
        return not (self.word.scripts or self.word.unchecked or self.word.hides)

    def broken(self, what: str) -> Word:
        self.word.unchecked.append(f"{what} in {self.raw[:60]!r}")
        self.word.hides = True
        self.dynamic = True
        self.only_variables = False
        return self.finish()

    def escape(self, *, quoted: bool) -> None:
        raw = self.raw
        if self.pos + 1 >= len(raw):
            self.out.append("\\")
            self.pattern.append("\\\\")
            self.pos += 1
            return
        nxt = raw[self.pos + 1]
        if nxt == "\n":
            pass  # a line continuation
        elif quoted and nxt not in '$`"\\':
            self.out.append("\\" + nxt)
            self.pattern.append(_literal("\\" + nxt))
        else:
            self.out.append(nxt)
            self.pattern.append(_literal(nxt))
        self.pos += 2

    def double_quoted(self, *, heredoc: bool = False) -> bool:
        """Up to the closing quote (a heredoc body: to the end, quotes are text)."""
        raw = self.raw
        while self.pos < len(raw):
            c = raw[self.pos]
            if c == '"' and not heredoc:
                self.pos += 1
                return True
            if c == "\\":
                self.escape(quoted=True)
            elif c == "$":
                self.dollar()
            elif c == "`":
                self.backticks()
            else:
                self.out.append(c)
                self.pattern.append(_literal(c))
                self.pos += 1
        return False

    def computed(self, why: str | None = None, *, hides: bool = False) -> None:
        self.dynamic = True
        self.only_variables = False
        if why is not None:
            self.word.unchecked.append(why)
        self.word.hides = self.word.hides or hides

    def dollar(self) -> None:
        raw, start = self.raw, self.pos
        nxt = raw[start + 1] if start + 1 < len(raw) else ""
        if raw.startswith("$((", start):
            end = _closing(raw, start + 3, "(", ")", depth=2)
            inner = raw[start + 3 : end - 2] if end > 0 else raw[start + 3 :]
            self.pos = end if end > 0 else len(raw)
            self.scan_operand(inner)
            if end < 0:
                self.computed("an unterminated arithmetic expansion", hides=True)
            elif _PLAIN_ARITHMETIC.fullmatch(inner):
                self.computed()
            else:
                # Names in arithmetic are evaluated, and a value such as a[$(cmd)] runs.
                self.computed(f"arithmetic on variables: $(({inner[:40]}))", hides=True)
        elif nxt == "(":
            self.pos += 1
            self.substitution("command substitution")
        elif nxt == "[":
            end = raw.find("]", start)
            self.pos = end + 1 if end > 0 else len(raw)
            self.computed("an arithmetic expansion $[...]", hides=True)
        elif nxt == "{":
            self.braced()
        elif nxt and (nxt in _SPECIAL or _NAME.match(nxt)):
            match = _NAME.match(raw, start + 1)
            end = match.end() if match else start + 2
            name = raw[start + 1 : end]
            self.pos = end
            self.variable(name)
        else:
            self.out.append("$")
            self.pattern.append("$")
            self.pos += 1

    def variable(self, name: str) -> None:
        """A plain ``$NAME``: computed, harmless, kept in the template."""
        self.dynamic = True
        self.out.append("${" + name + "}")
        self.pattern.append("${" + name + "}")

    def braced(self) -> None:
        raw, start = self.raw, self.pos
        end = _closing(raw, start + 2, "{", "}", depth=1)
        if end < 0:
            self.pos = len(raw)
            self.computed("an unterminated ${...} expansion", hides=True)
            return
        inner = raw[start + 2 : end - 1]
        self.pos = end
        if _NAME.fullmatch(inner) or (len(inner) == 1 and inner in _SPECIAL):
            self.variable(inner)
            return
        name = _NAME.match(inner)
        rest = inner[name.end() :] if name else inner
        operator = _OPERATORS.match(rest)
        if name and operator:
            self.scan_operand(rest[operator.end() :])
            self.computed(f"the expansion ${{{inner[:40]}}}")
            return
        # Indirection (${!x}), transformations (${x@P} evaluates the value as a prompt),
        # lengths and slices of arrays: what they evaluate is not visible here.
        self.scan_operand(rest)
        self.computed(f"the expansion ${{{inner[:40]}}}", hides=True)

    def scan_operand(self, text: str) -> None:
        """The word inside an expansion: only its substitutions matter."""
        self.adopt(_Reader(text).run())

    def adopt(self, inner: Word) -> None:
        self.word.scripts.extend(inner.scripts)
        self.word.unchecked.extend(inner.unchecked)
        self.word.hides = self.word.hides or inner.hides

    def substitution(self, what: str) -> None:
        """``$(`` or ``<(`` at ``pos`` + 1: the script up to the matching parenthesis."""
        raw, start = self.raw, self.pos + 1
        end = _closing(raw, start, "(", ")", depth=1)
        if end < 0:
            self.pos = len(raw)
            self.computed(f"an unterminated {what}", hides=True)
            return
        self.word.scripts.append(raw[start : end - 1])
        self.pos = end
        self.computed(f"a {what} runs {raw[start : end - 1][:60]!r}")

    def backticks(self) -> None:
        raw, pos = self.raw, self.pos + 1
        script: list[str] = []
        while pos < len(raw) and raw[pos] != "`":
            if raw[pos] == "\\" and pos + 1 < len(raw) and raw[pos + 1] in "$`\\":
                script.append(raw[pos + 1])
                pos += 2
                continue
            script.append(raw[pos])
            pos += 1
        if pos >= len(raw):
            self.pos = len(raw)
            self.computed("an unterminated backquote", hides=True)
            return
        self.pos = pos + 1
        self.word.scripts.append("".join(script))
        self.computed(f"a command substitution runs {''.join(script)[:60]!r}")

    def ansi_c(self) -> None:
        raw, pos = self.raw, self.pos + 2
        while pos < len(raw) and raw[pos] != "'":
            if raw[pos] == "\\" and pos + 1 < len(raw):
                decoded, pos = _ansi_escape(raw, pos)
                self.out.append(decoded)
                self.pattern.append(_literal(decoded))
                continue
            self.out.append(raw[pos])
            self.pattern.append(_literal(raw[pos]))
            pos += 1
        if pos >= len(raw):
            self.pos = len(raw)
            self.computed("an unterminated $'...' string", hides=True)
            return
        self.pos = pos + 1

    def brace(self) -> bool:
        """An unquoted ``{a,b}`` or ``{1..3}``: several words, so not one static value."""
        raw, start = self.raw, self.pos
        end = _closing(raw, start + 1, "{", "}", depth=1)
        if end < 0:
            return False
        inner = raw[start + 1 : end - 1]
        if "," not in inner and ".." not in inner:
            return False
        self.scan_operand(inner)
        self.out.append(raw[start:end])
        self.pattern.append(raw[start:end])  # quotes inside are the pattern reader's
        self.braces = True
        self.pos = end
        self.computed()
        return True


_PATTERN_CHARACTERS = re.compile(r"([\\*?\[\]{}(),|])")


def _literal(text: str) -> str:
    """Quoted text in a pattern: its pattern characters escaped."""
    return _PATTERN_CHARACTERS.sub(r"\\\1", text)


def _closing(text: str, pos: int, opening: str, closing: str, *, depth: int) -> int:
    """The index after the ``closing`` that brings ``depth`` to zero, skipping quoted
    text and escapes; -1 when there is none."""
    while pos < len(text):
        c = text[pos]
        if c == "\\":
            pos += 2
            continue
        if c == "'":
            end = text.find("'", pos + 1)
            if end < 0:
                return -1
            pos = end + 1
            continue
        if c == '"' or c == "`":
            pos = _quote_end(text, pos + 1, c)
            if pos < 0:
                return -1
            continue
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return pos + 1
        pos += 1
    return -1


def _quote_end(text: str, pos: int, quote: str) -> int:
    while pos < len(text):
        c = text[pos]
        if c == "\\":
            pos += 2
            continue
        if c == quote:
            return pos + 1
        if quote == '"' and text.startswith("$(", pos):
            pos = _closing(text, pos + 2, "(", ")", depth=1)
            if pos < 0:
                return -1
            continue
        pos += 1
    return -1


_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def _ansi_escape(raw: str, pos: int) -> tuple[str, int]:
    """The character a ``$'...'`` escape at ``pos`` stands for, and where it ends."""
    c = raw[pos + 1]
    if c in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[c], pos + 2
    digits = {"x": (16, 2), "u": (16, 4), "U": (16, 8)}
    if c in digits:
        base, most = digits[c]
        match = re.match(f"[0-9A-Fa-f]{{1,{most}}}", raw[pos + 2 :])
        if not match:
            return "\\" + c, pos + 2
        return _character(int(match.group(), base)), pos + 2 + match.end()
    if c in "01234567":
        match = re.match(r"[0-7]{1,3}", raw[pos + 1 :])
        assert match is not None
        return _character(int(match.group(), 8)), pos + 1 + match.end()
    if c == "c" and pos + 2 < len(raw):
        return chr(ord(raw[pos + 2]) & 0x1F), pos + 3
    return "\\" + c, pos + 2


def _character(code: int) -> str:
    try:
        return chr(code)
    except (ValueError, OverflowError):
        return "\ufffd"


_SPECIAL_CHARACTERS = re.compile(r"[\\'\"$`<>*?\[{~!@+(]")
_QUOTED = re.compile(r"'([^']*)'|\"([^\"$`\\]*)\"", re.S)


_PLAIN: dict[str, Word] = {}


def read_word(raw: str) -> Word:
    """The word ``raw`` (its text in the command, as written). Do not change what it
    returns: plain words are shared."""
    plain = _PLAIN.get(raw)
    if plain is not None:
        return plain
    if not _SPECIAL_CHARACTERS.search(raw):
        if len(_PLAIN) > 4096:
            _PLAIN.clear()
        plain = _PLAIN[raw] = Word(raw, value=raw, template=raw)  # most words
        return plain
    quoted = _QUOTED.fullmatch(raw)
    if quoted is not None:  # one quoted string with nothing to expand: a long message
        value = quoted.group(1) if quoted.group(1) is not None else quoted.group(2)
        return Word(raw, value=value, template=value)
    return _Reader(raw).run()


def read_heredoc(body: str) -> Word:
    """A heredoc body whose delimiter is unquoted: expanded as a quoted word is."""
    reader = _Reader(body)
    reader.double_quoted(heredoc=True)
    return reader.finish()
