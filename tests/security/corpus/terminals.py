"""Shell terminals: lines and keys sent to an open terminal, and lines that change
what a later allowed line means.
"""

from __future__ import annotations

from typing import Any

from tests.security.corpus.model import Case, Group, Verdict

TERMINAL_DEFAULT = Group(
    "terminal-default",
    "default",
    allow=("terminal_open(shell)", "bash(ls:*)", "bash(echo:*)"),
    cases=(
        Case("allow", tool="terminal_open", arguments={}),
        Case("allow", tool="terminal_send", arguments={"terminal_id": "t1", "text": "ls\n"}),
        Case("ask", tool="terminal_send", arguments={"terminal_id": "t1", "text": "touch {P}\n"}),
        Case(
            "ask", tool="terminal_send", arguments={"terminal_id": "t1", "text": "ls; touch {P}\n"}
        ),
        Case("allow", tool="terminal_send", arguments={"terminal_id": "t1", "text": "touch {P}"}),
        Case("ask", tool="terminal_send", arguments={"terminal_id": "t1", "keys": ["Enter"]}),
        Case("ask", tool="terminal_open", arguments={"command": "touch {P}"}),
        Case("ask", tool="terminal_open", arguments={"command": "python3"}),
    ),
)


def _typed(expect: Verdict, text: str = "", keys: tuple[str, ...] = ()) -> Case:
    arguments: dict[str, Any] = {"terminal_id": "t1", "text": text}
    if keys:
        arguments["keys"] = list(keys)
    return Case(expect, tool="terminal_send", arguments=arguments)


TERMINAL_MEANING = Group(
    # Lines of one shell terminal, in order: each attack makes an allowed line mean
    # something else (history, aliases, functions, PATH, options, traps, keys). Each is
    # refused headless, so the shell's state stays as it was for the next case.
    "terminal-meaning",
    "default",
    allow=("terminal_open(shell)", "bash(ls:*)", "bash(echo:*)", "terminal_send(shell)"),
    cases=(
        Case("allow", tool="terminal_open", arguments={}),
        _typed("allow", "echo X; echo touch {P}\n"),
        _typed("ask", "ls !!:2 !!:4-5\n"),
        _typed("ask", 'echo "!!:4-5"\n'),
        _typed("ask", "ls !-1:4-5\n"),
        _typed("ask", "ls !echo:4-5\n"),
        _typed("ask", "^X^; touch {P}\n"),
        _typed("ask", "fc -s 'echo '=\n"),
        _typed("ask", "history -s 'touch {P}'\n"),
        _typed("ask", "alias ls='touch {P}'\n"),
        _typed("ask", "ls() { touch {P}; }\n"),
        _typed("ask", "function echo { touch {P}; }\n"),
        _typed("ask", "BASH_ALIASES[ls]='touch {P}'\n"),
        _typed("ask", "PATH=.:$PATH\n"),
        _typed("ask", "export PATH=.:$PATH\n"),
        _typed("ask", "PROMPT_COMMAND='touch {P}'\n"),
        _typed("ask", "trap 'touch {P}' DEBUG\n"),
        _typed("ask", "set -H\n"),
        _typed("ask", "set -o histexpand\n"),
        _typed("ask", "shopt -s expand_aliases\n"),
        _typed("ask", "bind -x '\"\\C-t\": touch {P}'\n"),
        _typed("ask", "hash -p /usr/bin/touch ls\n"),
        _typed("ask", "source /dev/null\n"),
        _typed("ask", "enable -n echo\n"),
        _typed("allow", "touch {P}"),  # typed, not run: nothing runs before Enter
        _typed("ask", keys=("C-o",)),
        _typed("ask", keys=("C-x", "C-e")),
        _typed("ask", keys=("Esc",)),
        _typed("allow", keys=("C-u",)),
        _typed("allow", keys=("Up",)),
        _typed("allow", keys=("C-u",)),
        _typed("allow", "ls\n"),
        _typed("allow", "echo 'a!b' hi! \\!x\n"),
        _typed("allow", "echo $PATH\n"),
    ),
)
