"""What a shell command would run, read without running it, failing closed.

A permission rule such as ``bash(git status:*)`` may allow a command only when every
part of it is allowed and the analysis can vouch for all of it. ``git status; rm -rf
~`` is two commands; ``echo $(curl x)`` runs ``curl``; ``timeout 5 rm x`` runs ``rm``;
``echo x > file`` writes a file. Scripts of simple commands are split by
:mod:`dsh.policy.shell_lexer` (as bash splits them), the rest by the real bash grammar
(tree-sitter-bash); every word is read again by :mod:`dsh.policy.shell_words`, which
finds the scripts hidden in it (``${x:-`cmd`}``), and each of those is analysed in
turn; wrappers are looked through by :mod:`dsh.policy.programs`.

The result says, besides every command found (nested ones included):

- ``unchecked``: why no allow rule may vouch for the command (a substitution, a
  loop, a redirection that writes, an expansion the reader does not know...). Such a
  command is asked about, whatever the rules say.
- ``hidden``: why something might run that the analysis cannot see (``eval``, a
  computed program name, ``bash`` reading a script...). Deny rules cannot be checked
  against such a command, so it is asked about even in bypass mode when they exist.

Size and depth limits make a command unchecked and hidden, never an exception.

It also lists the command's static words and the files its redirections write
(inside loops and substitutions too), for :mod:`dsh.policy.protected`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from dsh.bulk import collector_paused
from dsh.policy.programs import SHELLS, Layer, base_name
from dsh.policy.shell_lexer import join_continued_lines, simple_commands
from dsh.policy.shell_words import Word, read_heredoc, read_word
from dsh.policy.unwrap import is_plain_program, unwrap

__all__ = [
    "MAX_DEPTH",
    "MAX_LENGTH",
    "SHELLS",
    "Analysis",
    "Invocation",
    "Layer",
    "Word",
    "analyse",
]

MAX_LENGTH = 100_000
"""Longer commands are not analysed: asked about, never allowed by a rule."""
MAX_DEPTH = 12
"""How deep scripts may nest (``$(...)`` in ``bash -c`` in ``$(...)``...)."""

# Statements whose parts are walked; anything else is a construct no rule vouches for.
_STATEMENTS = {
    "program",
    "list",
    "pipeline",
    "redirected_statement",
    "subshell",
    "negated_command",
}
# Whose evaluation may run what is not written in them (arithmetic on variables).
_EVALUATING = {"test_command", "c_style_for_statement", "arithmetic_expansion"}
# Nodes read as one word: their text, not their tree.
_WORDS = {
    "word",
    "string",
    "raw_string",
    "concatenation",
    "number",
    "expansion",
    "simple_expansion",
    "command_substitution",
    "process_substitution",
    "arithmetic_expansion",
    "ansi_c_string",
    "translated_string",
    "variable_name",
    "extglob_pattern",
    "regex",
}
_HARMLESS_TARGETS = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}


@dataclass(slots=True)
class Invocation:
    """One simple command, as written and as it really runs."""

    text: str
    layers: tuple[Layer, ...]
    """``layers[0]`` is the command as written, each next one what its wrapper runs;
    the last is the program that really runs."""
    open_ended: bool = False
    """A wrapper (xargs) adds arguments that are not written."""
    transparent: bool = False
    """Only runs a script analysed on its own (``bash -c '...'``): allow rules look at
    that script's commands, deny rules at this one too."""
    nested: bool = False
    """Run by another program (``find -exec``): a session grant names it exactly."""

    @property
    def argv(self) -> tuple[Word, ...]:
        return self.layers[-1].argv


@dataclass
class Analysis:
    invocations: list[Invocation] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    """The static targets of redirections that write a file (``> f``, ``>> f``, ``&> f``),
    unquoted; ``$HOME``-style expansions are kept as written, for the caller to expand."""
    words: list[str] = field(default_factory=list)
    """Every static word anywhere in the command (names, arguments, assigned values,
    redirection targets), unquoted as :attr:`writes`."""
    patterns: list[str] = field(default_factory=list)
    """Every word bash may replace with file names (``*.py``, ``.gi?``, ``{a,b}``), as
    :attr:`dsh.policy.shell_words.Word.pattern`: for paths a pattern could name."""

    @functools.cached_property
    def programs(self) -> frozenset[str] | None:
        """The base names of every program and wrapper it runs; None when one of them
        is computed or a pattern (then any name might run)."""
        names = set()
        for invocation in self.invocations:
            for layer in invocation.layers:
                if not layer.argv:
                    continue
                head = layer.argv[0]
                if head.value is None or head.glob:
                    return None
                names.add(base_name(head.value))
        return frozenset(names)

    @property
    def checkable(self) -> bool:
        """Whether an allow rule may vouch for it: nothing unchecked, something runs."""
        return not self.unchecked and bool(self.invocations)

    @property
    def commands(self) -> list[str]:
        return [invocation.text for invocation in self.invocations]

    def fail(self, why: str, *, hides: bool) -> None:
        self.unchecked.append(why)
        if hides:
            self.hidden.append(why)


@functools.cache
def _parser() -> Any:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


@functools.lru_cache(maxsize=256)
def analyse(command: str) -> Analysis:
    """The analysis of ``command``. Cached: the same command is analysed for the
    mode, the rules and the protected paths in one decision. Do not change it."""
    found = Analysis()
    if len(command) > MAX_LENGTH:
        found.fail(f"the command is longer than {MAX_LENGTH:,} characters", hides=True)
        return found
    # Thousands of objects that stay alive (the result is cached): the collector would
    # walk them again and again while they are built, as for a session's events.
    with collector_paused():
        _Analyser(found).script(command, 0)
    return found


def _text(node: Any) -> str:
    return str(node.text.decode("utf-8", errors="replace"))


class _Analyser:
    def __init__(self, found: Analysis) -> None:
        self.found = found

    def script(self, source: str, depth: int) -> None:
        found = self.found
        if depth > MAX_DEPTH:
            found.fail(f"scripts nest more than {MAX_DEPTH} deep", hides=True)
            return
        if "\x00" in source:
            found.fail("the command holds a NUL byte", hides=True)
            return
        if "\\\n" in source:
            source = join_continued_lines(source)
        simple = simple_commands(source)
        if simple is not None:
            for command in simple:
                argv = tuple([self.word(raw, depth) for raw in command.words])
                for operator, target in command.redirects:
                    self.redirected(operator, target, depth)
                self.invocation(" ".join(command.words), argv, depth)
            return
        try:
            encoded = source.encode()
        except UnicodeEncodeError:  # a lone surrogate from the model's JSON: not text
            found.fail("the command holds characters that are not text", hides=True)
            return
        tree = _parser().parse(encoded)
        if tree.root_node.has_error:
            found.fail("the command does not parse as bash", hides=True)
        stack = [tree.root_node]
        while stack:
            node = stack.pop()
            kind = node.type
            if not node.is_named or kind == "comment":
                continue
            if kind in _STATEMENTS:
                stack.extend(reversed(node.children))
            elif kind == "command":
                self.command(node, depth)
            elif kind in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                self.redirect(node, depth)
            elif kind in _WORDS:
                self.word(_text(node), depth)
            elif kind == "compound_statement" and node.children and node.children[0].type == "{":
                stack.extend(reversed(node.children))
            elif kind in ("variable_assignment", "variable_assignments"):
                found.fail(f"sets a variable: {_text(node)[:80]}", hides=False)
                stack.extend(reversed(node.children))
            else:
                # if/while/for/case, functions, declarations, [[ ]], (( )), errors: the
                # commands inside are still found (for deny rules), none is vouched for.
                evaluates = kind in _EVALUATING or kind == "compound_statement"
                name = "arithmetic" if kind == "compound_statement" else kind.replace("_", " ")
                found.fail(f"{name}: {_text(node)[:80]}", hides=evaluates or kind == "ERROR")
                stack.extend(reversed(node.children))

    def word(self, raw: str, depth: int) -> Word:
        word = read_word(raw)
        if word.pattern is not None:
            self.found.patterns.append(word.pattern)
        if word.unchecked or word.scripts or word.hides:
            self.absorb(word, depth)
        elif word.template:
            self.found.words.append(word.template)  # most words: nothing more to it
        return word

    def absorb(self, word: Word, depth: int) -> None:
        found = self.found
        if not (word.unchecked or word.scripts or word.hides):
            if word.template:
                found.words.append(word.template)
            return  # most words
        for why in word.unchecked:
            found.fail(why, hides=word.hides)
        if word.hides and not word.unchecked:
            found.hidden.append(f"the word {word.raw[:60]!r}")
        if word.template:
            found.words.append(word.template)
        for script in word.scripts:
            self.script(script, depth + 1)

    def command(self, node: Any, depth: int) -> None:
        found = self.found
        argv: list[Word] = []
        for child in node.children:
            kind = child.type
            if kind == "variable_assignment":
                found.fail(f"sets a variable for the command: {_text(child)[:80]}", hides=False)
                value = child.child_by_field_name("value")
                if value is not None:
                    self.word(_text(value), depth)
            elif kind in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                self.redirect(child, depth)
            elif kind == "comment" or (not child.is_named and not child.text.strip()):
                continue
            else:
                argv.append(self.word(_text(child), depth))
        if argv:
            self.invocation(" ".join(word.raw for word in argv), tuple(argv), depth)

    def invocation(
        self, text: str, argv: tuple[Word, ...], depth: int, *, nested: bool = False
    ) -> None:
        found = self.found
        if not nested and is_plain_program(argv):
            found.invocations.append(Invocation(text, (Layer(argv),)))
            return
        unwrapped = unwrap(argv)
        if unwrapped.unchecked or unwrapped.hidden:
            for why in unwrapped.unchecked:
                found.fail(why, hides=why in unwrapped.hidden)
            found.hidden.extend(w for w in unwrapped.hidden if w not in unwrapped.unchecked)
        found.invocations.append(
            Invocation(
                text,
                tuple(unwrapped.layers),
                open_ended=unwrapped.open_ended,
                transparent=unwrapped.script is not None,
                nested=nested,
            )
        )
        if unwrapped.script is not None:
            self.script(unwrapped.script, depth + 1)
        for inner in unwrapped.nested:
            self.invocation(" ".join(w.raw for w in inner), inner, depth + 1, nested=True)

    def redirect(self, node: Any, depth: int) -> None:
        found = self.found
        kind = node.type
        if kind == "herestring_redirect":
            for child in node.named_children:
                self.word(_text(child), depth)
            return
        if kind == "heredoc_redirect":
            quoted = any(
                c.type == "heredoc_start" and any(q in _text(c) for q in "'\"\\")
                for c in node.children
            )
            for child in node.children:
                if child.type == "heredoc_body" and not quoted:
                    body = read_heredoc(_text(child))
                    body.template = None  # a body is not a word of the command
                    self.absorb(body, depth)
                elif child.type in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                    self.redirect(child, depth)
            return
        target = node.child_by_field_name("destination")
        if target is None:
            found.fail(f"a redirection: {_text(node)[:80]}", hides=True)
            return
        operators = "".join(_text(c) for c in node.children if not c.is_named)
        self.redirected(operators, _text(target), depth)

    def redirected(self, operator: str, target: str, depth: int) -> None:
        """A redirection ``operator`` (``>``, ``2>>``, ``<``) to ``target`` as written."""
        word = self.word(target, depth)
        if ">" not in operator:
            return
        text = word.value if word.value is not None else word.raw
        if text in _HARMLESS_TARGETS or text.isdigit() or text == "-":
            return
        self.found.fail(f"writes to a file: {operator} {target[:80]}", hides=False)
        if word.template:
            self.found.writes.append(word.template)
