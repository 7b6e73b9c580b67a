"""Splitting a shell command into the simple commands it would run.

A permission rule such as ``bash(git status:*)`` may allow a command only when every
part of it is allowed. ``git status; rm -rf ~`` is two commands; ``echo $(curl x)``
runs ``curl``; ``echo x > file`` writes a file. The command is parsed with the real
bash grammar (tree-sitter-bash), and anything a rule cannot vouch for makes the
command *opaque*: it then never rides on an allow rule.
"""

from __future__ import annotations

import functools
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


@dataclass
class ParsedCommand:
    commands: list[str] = field(default_factory=list)
    """Each simple command's text, as written, in order (nested ones included)."""
    opaque: list[str] = field(default_factory=list)
    """Why no rule may allow this command: redirections to files, parse errors..."""

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
    return found


def _text(node: Any) -> str:
    return str(node.text.decode("utf-8", errors="replace"))


def _walk(node: Any, found: ParsedCommand) -> None:
    kind = node.type
    if kind in _OPAQUE:
        found.opaque.append(f"{kind.replace('_', ' ')}: {_text(node)[:80]}")
        return
    if kind == "file_redirect":
        target = node.child_by_field_name("destination")
        operator = _text(node)
        writes = any(op in operator for op in (">", ">>", "&>"))
        # 2>&1 duplicates a descriptor and writes no file.
        if (
            target is not None
            and writes
            and _text(target) not in _HARMLESS_TARGETS
            and not _text(target).isdigit()
        ):
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
