"""The adversarial corpus: commands and tool calls that try to get around the rules.

Each group is one configuration (mode, allow and deny rules) and the calls a model
makes under it, with the decision each must get. ``{P}`` stands for a marker file the
call would create if it ran (it must not exist afterwards unless the call was allowed
and is meant to create it); ``{V}`` for a victim file made beforehand that the call
would delete (it must still be there unless the call was allowed).

Sources: every bash expansion and compound form, the wrappers of the rule language,
git's global options, path and unicode spellings, long and deep input, and public
reports of allowlist bypasses in other coding agents (``sed e``, ``rg --pre``,
``find -exec``, ``git -c core.fsmonitor``, ``${var@P}``, ``test -v 'a[$(cmd)]'``...).

The groups live in the modules beside this one, one module a category; ``GROUPS``
gathers them in the order the tests run them.
"""

from __future__ import annotations

from tests.security.corpus.deny_rules import (
    DENY_IN_BYPASS,
    DENY_READ_AROUND,
    DENY_READ_AROUND_BYPASS,
    READ_DENIED,
)
from tests.security.corpus.git_commands import GIT, GIT_CONFIG_RUNS
from tests.security.corpus.model import Case, Group, Verdict
from tests.security.corpus.process_environment import PROC_ENVIRON, PROC_TOOLS
from tests.security.corpus.programs import OTHER_PROGRAMS
from tests.security.corpus.protected_places import PROTECTED_GLOBS, STARTUP_FILES
from tests.security.corpus.shell_forms import EXPANSIONS, LONG_AND_ODD, WRAPPERS
from tests.security.corpus.terminals import TERMINAL_DEFAULT, TERMINAL_MEANING
from tests.security.corpus.tool_calls import TOOLS

__all__ = ["GROUPS", "Case", "Group", "Verdict", "count"]

GROUPS = (
    EXPANSIONS,
    WRAPPERS,
    DENY_IN_BYPASS,
    GIT,
    LONG_AND_ODD,
    OTHER_PROGRAMS,
    TOOLS,
    TERMINAL_DEFAULT,
    READ_DENIED,
    GIT_CONFIG_RUNS,
    TERMINAL_MEANING,
    STARTUP_FILES,
    PROC_ENVIRON,
    PROC_TOOLS,
    PROTECTED_GLOBS,
    DENY_READ_AROUND,
    DENY_READ_AROUND_BYPASS,
)


def count() -> int:
    return sum(len(group.cases) for group in GROUPS)
