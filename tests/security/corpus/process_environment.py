"""``/proc``: the environment (and memory) of dsh and its parent, which hold the
provider key, in every spelling and through every reading tool.
"""

from __future__ import annotations

from tests.security.corpus.model import Case, Group, deny


def _creates(*commands: str) -> tuple[Case, ...]:
    return tuple(Case("allow", command, creates=True) for command in commands)


PROC_ENVIRON = Group(
    # Issue 35, class 3: the environment of dsh's parent holds the provider key (and
    # dsh's own did); every spelling is refused even in bypass, and would leave {P}.
    "proc-environ",
    "bypass",
    cases=(
        *deny(
            "cat /proc/$PPID/environ > {P}",
            "tr '\\0' '\\n' < /proc/$PPID/environ > {P}",
            "cat /proc/${PPID}/environ > {P}",
            "cat /proc/self/environ > {P}",
            "cat /proc/thread-self/environ > {P}",
            "cat /proc/$$/environ > {P}",
            "cat /proc/$BASHPID/environ > {P}",
            "cat /proc/1/environ > {P}",
            "grep -a KEY /proc/*/environ > {P}",
            "xxd /pro?/[0-9]*/envir* > {P}",
            "(cd /proc/$PPID && cat environ) > {P}",
            "cat /proc/$PPID/task/$PPID/environ > {P}",
            "strings /proc/$PPID/environ > {P}",
            "sed -n p /proc/$PPID/environ > {P}",
            "base64 /proc/self/environ > {P}",
            "cat $'/proc/self/environ' > {P}",
            'cat "/proc/"$PPID"/environ" > {P}',
            "cat /proc/self/cmdline /proc/self/status > {P}",
            "p=/proc/$PPID; cat $p/environ > {P}",
            "head -c 100000 /proc/$PPID/mem > {P}",
            "ls /proc/$(echo $PPID)/ > {P}",
            "cat /proc/`echo $PPID`/cmdline > {P}",
        ),
        *_creates(
            "grep -c . /proc/cpuinfo > {P}",
            "echo environ > {P}",
            "env | grep -c PATH > {P}",
            "ls /proc/1 > {P}",
            "cat /proc/1/status > {P}",
        ),
    ),
)


PROC_TOOLS = Group(
    # Issue 35, class 3: the never-asked reading tools, in read-only mode.
    "proc-tools",
    "read-only",
    cases=(
        Case("deny", tool="read", arguments={"file_path": "/proc/self/environ"}),
        Case("deny", tool="read", arguments={"file_path": "/proc/1/environ"}),
        Case("deny", tool="read", arguments={"file_path": "/proc/./self/environ"}),
        Case("deny", tool="read", arguments={"file_path": "/proc/self/task/../environ"}),
        Case("deny", tool="read", arguments={"file_path": "/proc/thread-self/environ"}),
        Case("deny", tool="read", arguments={"file_path": "/proc/self/status"}),
        Case("deny", tool="grep", arguments={"pattern": "KEY", "path": "/proc/self/environ"}),
        Case("deny", tool="grep", arguments={"pattern": "KEY", "path": "/proc/1/environ"}),
        Case("deny", tool="grep", arguments={"pattern": "KEY", "path": "/proc/self"}),
        Case("deny", tool="glob", arguments={"pattern": "*", "path": "/proc/self"}),
        Case("deny", "cat /proc/$PPID/environ"),
        Case("ask", "cat /proc/cpuinfo"),
        Case("allow", tool="read", arguments={"file_path": "/proc/cpuinfo"}),
        Case("allow", tool="grep", arguments={"pattern": "processor", "path": "/proc/cpuinfo"}),
        Case("allow", tool="read", arguments={"file_path": "notes.txt"}),
    ),
)
