"""The quick path of the command analysis: scripts of simple commands, split without
the grammar.

Most commands a model sends are lists and pipelines of simple commands: words,
quotes, ``$HOME``, redirections such as ``2>&1`` or ``> out.txt``, separated by ``&&``,
``||``, ``|``, ``;``, ``&`` and newlines. Splitting those with one regular expression
is many times quicker than walking the parse tree, and bash splits them the same
way. Anything more (a substitution, ``${...}``, a heredoc, parentheses, a reserved
word, an assignment, a syntax error) returns None: the caller parses the script with
the bash grammar instead. So this path never has to be right about anything hard.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

RESERVED = frozenset(
    [
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "for",
        "while",
        "until",
        "do",
        "done",
        "case",
        "esac",
        "in",
        "function",
        "select",
        "time",
        "coproc",
        "{",
        "}",
        "!",
        "[[",
        "]]",
    ]
)
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")

# What needs the grammar, wherever it is: substitutions and the expansions that can
# hold spaces or other words, heredocs and here-strings, arithmetic.
_NEEDS_GRAMMAR = re.compile(r"\$[({\['\"]|`|<<|\(\(")
_TOKEN = r"""
    [ \t]*
    (?:
      ([0-9]*(?:>>|>&|<&|>\||<>|>|<)|&>>|&>)                                   # redirection
    | ((?:[^\s|&;()<>'"\\\#]|(?<=[^\s|&;()<>])\#|\\.|'[^']*'|"(?:[^"\\]|\\.)*")+)  # word
    | (&&|\|\||\|&|[|;&\n])                                                       # separator
    | \#[^\n]*                                                                   # comment
    | ($)                                                                        # the end
    | (.)                                                                        # other
    )
    """
"""One token: (redirection, word, separator, end, other), all empty for a comment.
``findall`` gives them as tuples without a Python call per token. Compiled on first
use (by ``re``'s cache), not when dsh starts."""


@dataclass
class SimpleCommand:
    words: list[str] = field(default_factory=list)
    """As written (quotes and escapes kept, for the word reader)."""
    redirects: list[tuple[str, str]] = field(default_factory=list)
    """(operator, target as written): ``(">", "out.txt")``, ``("2>&", "1")``."""


def simple_commands(source: str) -> list[SimpleCommand] | None:
    """The simple commands of ``source``, or None when it needs the grammar."""
    if _NEEDS_GRAMMAR.search(source):
        return None
    commands: list[SimpleCommand] = []
    current = SimpleCommand()
    pending = False  # after && || |, a command must follow (newlines may come first)
    redirect: str | None = None
    for operator, text, separator, _, other in re.findall(_TOKEN, source, re.X | re.S):
        if text:
            if redirect is not None:
                current.redirects.append((redirect, text))
                redirect = None
            else:
                if not current.words and (text in RESERVED or ASSIGNMENT.match(text)):
                    return None
                current.words.append(text)
            continue
        if not (operator or separator or other):
            continue  # a comment, or the end
        if redirect is not None or other:
            return None  # a redirection without its target; ( ) or an open quote
        if operator:
            redirect = operator
            continue
        if current.words:
            commands.append(current)
            current = SimpleCommand()
            pending = separator not in (";", "&", "\n")
        elif current.redirects or separator != "\n":
            return None  # a separator with no command before it
    if redirect is not None or (pending and not current.words):
        return None
    if current.words:
        commands.append(current)
    elif current.redirects:
        return None
    return commands or None


def join_continued_lines(source: str) -> str:
    """The script with its line continuations (backslash, newline) removed, as bash
    removes them before it splits words (tree-sitter splits the word there instead:
    ``r\\<newline>m`` is ``rm`` to bash). Single-quoted text keeps them."""
    out: list[str] = []
    i, n = 0, len(source)
    quote = ""
    while i < n:
        c = source[i]
        if quote == "'":
            if c == "'":
                quote = ""
            out.append(c)
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            if source[i + 1] != "\n":
                out.append(source[i : i + 2])
            i += 2
            continue
        if c == "'" and not quote:
            quote = "'"
        elif c == '"':
            quote = "" if quote == '"' else '"'
        out.append(c)
        i += 1
    return "".join(out)
