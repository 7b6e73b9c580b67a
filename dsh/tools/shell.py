"""Splitting a shell command into the simple commands it would run.

A permission rule such as ``bash(git status:*)`` may allow a command only when every
part of it is allowed. ``git status; rm -rf ~`` is two commands; ``echo $(curl x)``
runs ``curl``; ``echo x > file`` writes a file. The command is parsed with the real
bash grammar (tree-sitter-bash), and anything a rule cannot vouch for makes the
command *opaque*: it then never rides on an allow rule.

The parse also lists the command's static words and the files its redirections
write, wherever they are (inside loops and substitutions too), for
:mod:`dsh.tools.protected` to check against the paths no command may touch unasked.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

# Nodes that run or hold commands; their children are walked.
_CONTAINERS = {
    "program",
    "list",
    "pipeline",
    "redirected_statement",
    "subshell",
    "compound_statement",
    "negated_command",
    "command_substitution",
    "process_substitution",
}
# Constructs whose effect depends on values known only at run time.
_OPAQUE = {
    "if_statement",
    "while_statement",
    "for_statement",
    "c_style_for_statement",
    "case_statement",
    "function_definition",
    "declaration_command",
    "unset_command",
    "test_command",
    "variable_assignment",
    "herestring_redirect",
    "heredoc_redirect",
    "ERROR",
}
_HARMLESS_TARGETS = {"/dev/null", "/dev/stdout", "/dev/stderr"}
# Nodes that make one shell word; pieces of a word are not words of their own.
_WORDS = {"word", "string", "raw_string", "concatenation", "number"}
_WORD_PARTS = {"concatenation", "string", "expansion", "simple_expansion"}
_ESCAPE = re.compile(r"\\(.)", re.S)


@dataclass
class ParsedCommand:
    commands: list[str] = field(default_factory=list)
    """Each simple command's text, as written, in order (nested ones included)."""
    opaque: list[str] = field(default_factory=list)
    """Why no rule may allow this command: redirections to files, parse errors..."""
    writes: list[str] = field(default_factory=list)
    """The static targets of redirections that write a file (``> f``, ``>> f``, ``&> f``),
    unquoted; ``$HOME``-style expansions are kept as written, for the caller to expand."""
    words: list[str] = field(default_factory=list)
    """Every static word anywhere in the command (names, arguments, assigned values,
    redirection targets), unquoted as :attr:`writes`. Words built at run time
    (``$(...)``, arithmetic) are left out."""

    @property
    def checkable(self) -> bool:
        return not self.opaque and bool(self.commands)


@functools.cache
def _parser() -> Any:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def parse_command(source: str) -> ParsedCommand:
    tree = _parser().parse(source.encode())
    found = ParsedCommand()
    if tree.root_node.has_error:
        found.opaque.append("the command does not parse as bash")
    _walk(tree.root_node, found)
    _collect(tree.root_node, found)
    return found


def _text(node: Any) -> str:
    return str(node.text.decode("utf-8", errors="replace"))


def _writes_file(redirect: Any) -> Any | None:
    """The target node of a redirection that writes a file, else None (``2>&1``
    duplicates a descriptor, ``/dev/null`` keeps nothing)."""
    target = redirect.child_by_field_name("destination")
    operators = [c.type for c in redirect.children if not c.is_named]
    if target is None or not any(">" in op for op in operators):
        return None
    text = _text(target)
    if text in _HARMLESS_TARGETS or text.isdigit():
        return None
    return target


def _walk(node: Any, found: ParsedCommand) -> None:
    kind = node.type
    if kind in _OPAQUE:
        found.opaque.append(f"{kind.replace('_', ' ')}: {_text(node)[:80]}")
        return
    if kind == "file_redirect":
        if _writes_file(node) is not None:
            found.opaque.append(f"writes to a file: {_text(node)}")
        return
    if kind == "command":
        found.commands.append(_command_text(node, found))
        return
    if kind in _CONTAINERS or node.is_named is False:
        for child in node.children:
            _walk(child, found)
        return
    # Words, strings, expansions outside a command: look inside for substitutions.
    for child in node.children:
        _walk(child, found)


def _command_text(node: Any, found: ParsedCommand) -> str:
    """The simple command's own words; substitutions inside it are walked as commands
    of their own, and an assignment prefix (``FOO=1 cmd``) makes it opaque."""
    words: list[str] = []
    for child in node.children:
        if child.type == "variable_assignment":
            found.opaque.append(f"sets a variable for the command: {_text(child)}")
            continue
        if child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            _walk(child, found)
            continue
        _find_substitutions(child, found)
        words.append(_text(child))
    return " ".join(words)


def _find_substitutions(node: Any, found: ParsedCommand) -> None:
    if node.type in ("command_substitution", "process_substitution"):
        _walk(node, found)
        return
    for child in node.children:
        _find_substitutions(child, found)


def _collect(node: Any, found: ParsedCommand) -> None:
    """Every static word and written file of the tree, ignoring what makes it opaque:
    a loop or a heredoc hides nothing from this walk."""
    if node.type == "file_redirect":
        target = _writes_file(node)
        written = _static(target) if target is not None else None
        if written:
            found.writes.append(written)
    if node.type in _WORDS and (node.parent is None or node.parent.type not in _WORD_PARTS):
        word = _static(node)
        if word:
            found.words.append(word)
        if node.type == "word" or word is not None:
            return  # nothing inside a static word runs
    for child in node.children:
        _collect(child, found)


def _static(node: Any) -> str | None:
    """The word's text as the command sees it, quotes and escapes removed; ``$NAME``
    and ``${NAME}`` are kept (as ``${NAME}``), anything else computed gives None."""
    kind = node.type
    if kind in ("word", "number"):
        return _ESCAPE.sub(r"\1", _text(node))
    if kind == "raw_string":
        return _text(node)[1:-1]
    if kind == "string_content":
        return _text(node)
    if kind == "simple_expansion" or kind == "expansion":
        name = node.named_children[0] if node.named_children else None
        if name is None or name.type != "variable_name" or len(node.named_children) != 1:
            return None
        return "${" + _text(name) + "}"
    if kind in ("string", "concatenation"):
        parts = [c for c in node.children if kind != "string" or c.type != '"']
        pieces = [_static(c) for c in parts]
        if any(p is None for p in pieces):
            return None
        return "".join(p for p in pieces if p is not None)
    return None
