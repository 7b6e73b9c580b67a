"""The shell commands plan mode lets run: those the analysis can vouch for as only
reading, failing closed.

A command qualifies only when :func:`dsh.policy.shell.analyse` sees all of it (nothing
unchecked or hidden, no redirection that writes) and every simple command in it is a
program of :data:`READERS` run directly (no wrapper such as ``timeout`` or ``xargs``,
no nested script), with no option of :data:`REFUSED_OPTIONS`. git qualifies for the
subcommands of :data:`GIT_READERS` alone, written first (``git -c ... log`` does
not). Where git runs is the caller's to judge, as for any git command
(:func:`dsh.policy.permissions.git_elsewhere`: outside the project, or in a
repository whose config names a program for git to run, such as a diff driver's
``textconv``, which would run on a read).
"""

from __future__ import annotations

from dsh.policy.shell import analyse
from dsh.policy.shell_words import Word

__all__ = ["GIT_READERS", "READERS", "REFUSED_OPTIONS", "only_reads"]

READERS = frozenset({"ls", "pwd", "cat", "head", "tail", "wc", "grep", "rg", "echo", "stat", "du"})
"""Programs that read and print, and write nothing whatever their arguments (those
whose options could, such as ``find -delete``, ``sort -o`` or ``file -C``, are not
here)."""

GIT_READERS = frozenset(
    {"log", "show", "diff", "blame", "shortlog", "rev-parse", "ls-files", "ls-tree"}
)
"""git's reading subcommands (``status`` is not: it refreshes the index, a write)."""

REFUSED_OPTIONS = (
    "--output",
    "--pre",
    "--hostname-bin",
    "--ext-diff",
    "--open-files-in-pager",
    "-O",
)
"""Options that write a file (``git log --output=F``) or run a program (``rg --pre``,
``rg --hostname-bin``, ``git grep -O``), refused as written or with ``=``."""


def only_reads(command: str) -> bool:
    """Whether ``command`` can be vouched for as only reading (wherever git runs)."""
    analysis = analyse(command)
    if not analysis.checkable or analysis.hidden or analysis.writes:
        return False
    for invocation in analysis.invocations:
        if invocation.open_ended or invocation.transparent or invocation.nested:
            return False
        if len(invocation.layers) != 1:
            return False  # a wrapper runs it: only plain commands are vouched for
        argv = invocation.argv
        if not argv or not _plain(argv[0]) or any(word.value is None for word in argv):
            return False
        program = argv[0].value
        if any(_refused(word) for word in argv[1:]):
            return False
        if program == "git":
            if len(argv) < 2 or argv[1].value not in GIT_READERS:
                return False
        elif program not in READERS:
            return False
    return True


def _plain(word: Word) -> bool:
    return word.value is not None and not word.glob and "/" not in word.value


def _refused(word: Word) -> bool:
    value = word.value or ""
    return any(value == option or value.startswith(option + "=") for option in REFUSED_OPTIONS)
