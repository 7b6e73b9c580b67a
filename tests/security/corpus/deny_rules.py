"""Deny rules that must hold: in bypass mode, around a denied read (patterns,
recursion, pipes), and for every reading tool.
"""

from __future__ import annotations

from tests.security.corpus.model import Case, Group, allow, ask, deny

DENY_IN_BYPASS = Group(
    "deny-rm",
    "bypass",
    deny=("bash(rm:*)",),
    cases=(
        *deny(
            "rm {V}",
            "rm -f -- {V}",
            "/bin/rm {V}",
            "/usr/bin/rm {V}",
            "/bin/../bin/rm {V}",
            "command rm {V}",
            "exec rm {V}",
            "env rm {V}",
            "env -i rm {V}",
            "env X=1 rm {V}",
            "timeout 5 rm {V}",
            "timeout -s KILL 5 rm {V}",
            "nice -n 1 rm {V}",
            "nohup rm {V}",
            "stdbuf -o0 rm {V}",
            "time rm {V}",
            "\\rm {V}",
            "'rm' {V}",
            '"rm" {V}',
            "r''m {V}",
            'r"m" {V}',
            "r\\m {V}",
            "$'rm' {V}",
            "$'\\x72m' {V}",
            "$'\\162m' {V}",
            "bash -c 'rm {V}'",
            'sh -c "rm {V}"',
            "bash -c 'bash -c \"rm {V}\"'",
            "echo {V} | xargs rm",
            "find . -name {V} -exec rm {} \\;",
            "busybox rm {V}",
            "sudo -n rm {V}",
            "ls; rm {V}",
            "true && rm {V}",
            "echo $(rm {V})",
            "for f in {V}; do rm $f; done",
            "f() { rm {V}; }; f",
            "timeout 5 nice nohup env rm {V}",
            "rm {V} # comment",
            "r\\\nm {V}",
            "rm \\\n {V}",
            "\\\nrm {V}",
        ),
        *ask(
            "$(echo rm) {V}",
            "`echo rm` {V}",
            "x=rm; $x {V}",
            "eval rm {V}",
            'eval "r""m {V}"',
            "r? {V}",
            "/bin/r[m] {V}",
            "/???/rm {V}",
            "{rm,} {V}",
            "source /dev/stdin <<< 'rm {V}'",
            "echo 'rm {V}' | bash",
            "bash < /dev/null",
            "${RM:-rm} {V}",
        ),
        *allow("ls", "echo rm {V}", "cat {V}", "grep -c x {V} || true"),
    ),
)


READ_DENIED = Group(
    "read-denied",
    "default",
    deny=("read",),
    cases=(
        Case("deny", tool="read", arguments={"file_path": "notes.txt"}),
        Case("deny", tool="grep", arguments={"pattern": "x", "path": "."}),
        Case("deny", tool="glob", arguments={"pattern": "*"}),
    ),
)


DENY_READ_AROUND = Group(
    # Issue 35, class 5: a read deny rule read around by patterns and recursion.
    "deny-read-around",
    "default",
    allow=tuple(
        f"bash({p}:*)"
        for p in ("cat", "head", "tail", "grep", "rg", "find", "tar", "cp", "ls", "xargs")
    ),
    deny=("read(secrets/**)",),
    cases=(
        *deny(
            "cat secret?/token.txt",
            "cat s*/token.txt",
            "head -n 3 secre{ts,x}/token.txt",
            "cat ./sec[r]ets/token.txt",
            "tail src/../secre?s/token.txt",
            "cat */token.txt",
            "cat secret?/none.txt",
            "grep -R TOKEN ..",  # dsh's own keys are beside the project: refused
            "grep -r TOKEN .",
            "grep -rn TOKEN",
            "grep --recursive TOKEN ./",
            "rg TOKEN",
            "rg -uu TOKEN .",
            "find . -type f -exec cat {} +",
            "find . -type f -print0 | xargs -0 cat",
            "tar cf - .",
            "cp -r . /tmp/dsh-corpus-copy-{P}",
        ),
        *deny("ls | xargs cat", "ls *"),  # * could be secrets, as `ls secrets` is
        *ask("shopt -s dotglob; cat src/*", "ls | xargs echo"),
        *allow(
            "grep -r TOKEN src",
            "cat *.txt",
            "grep TOKEN *.txt",
            "rg TOKEN src",
            "find src -type f -exec cat {} +",
            "tar cf /dev/null src",
            "ls *.txt",
        ),
        Case("allow", "cp -r src {P}", creates=True),
    ),
)


DENY_READ_AROUND_BYPASS = Group(
    # The same in bypass mode: a deny rule holds in every mode.
    "deny-read-around-bypass",
    "bypass",
    deny=("read(secrets/**)",),
    cases=(
        *deny("cat secret?/token.txt", "cat s*/*.txt"),
        *deny("grep -r TOKEN .", "rg TOKEN", "tar cf - .", "grep -R TOKEN"),
        *allow("grep -r TOKEN src", "cat *.txt"),
    ),
)
