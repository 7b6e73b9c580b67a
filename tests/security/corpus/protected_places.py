"""Protected places: the repository's and dsh's own folders spelled as patterns, and
the files python runs at every start.
"""

from __future__ import annotations

from tests.security.corpus.model import Case, Group, allow, ask

PROTECTED_GLOBS = Group(
    # Issue 35, class 4: a protected path spelled as a pattern bash expands later.
    "protected-globs",
    "default",
    allow=("bash(cp:*)", "bash(cat:*)", "bash(ls:*)", "bash(git status:*)"),
    git=True,
    cases=(
        *ask(
            "cp notes.txt .gi?/config",
            "cp notes.txt .gi[t]/hooks/pre-commit",
            "cp notes.txt .gi{t,x}/config",
            "cp notes.txt .gi'{t,x}'/config .gi{t,}/config",
            "cp notes.txt ./.g*/config",
            "cp notes.txt .git/hook?/post-checkout",
            "cp notes.txt .[g]it/*/",
            "cp notes.txt src/../.gi?/info/attributes",
            "cp notes.txt .ds?/settings.toml",
            "cp notes.txt .dsh*/settings.toml",
            "cp -r src .gi?/",
            "cp notes.txt --target-directory=.gi?/hooks",
            "shopt -s dotglob; cp notes.txt */config",
            "shopt -s nocaseglob; cp notes.txt .GI?/config",
            "cat ~/.aw?/dsh-corpus-none",
            "cat ~/.ss?/dsh-corpus-none",
            "cat ${HOME}/.ne?rc",
        ),
        *allow(
            "cp notes.txt src/",
            "cat *.txt",
            "ls *",
            "ls src/*",
            "git status --short",
        ),
        Case("allow", "cp notes.txt {P}", creates=True),
    ),
)


STARTUP_FILES = Group(
    # accept-edits writes files in the project unasked; what python runs at every start
    # from a site-packages folder (a .venv's too) is asked, by any tool or command.
    "startup-files",
    "accept-edits",
    allow=("bash(cp:*)", "bash(tee:*)", "bash(echo:*)"),
    cases=(
        Case(
            "ask",
            tool="write",
            arguments={
                "file_path": "{P}/lib/python3.11/site-packages/usercustomize.py",
                "content": "x",
            },
        ),
        Case(
            "ask",
            tool="write",
            arguments={"file_path": "{P}/site-packages/sitecustomize.py", "content": "x"},
        ),
        Case(
            "ask",
            tool="write",
            arguments={"file_path": "{P}/site-packages/evil.pth", "content": "x"},
        ),
        Case(
            "ask", tool="write", arguments={"file_path": "{P}/dist-packages/x.pth", "content": "x"}
        ),
        Case(
            "ask",
            tool="write",
            arguments={"file_path": "{P}/site-packages/sitecustomize/x.py", "content": "x"},
        ),
        Case(
            "ask",
            tool="write",
            arguments={"file_path": "{P}/site-packages/usercustomize.pyc", "content": "x"},
        ),
        *ask(
            "cp notes.txt {P}/site-packages/x.pth",
            "cp notes.txt {P}/lib/python3.12/site-packages/sitecustomize.py",
            "tee {P}/site-packages/usercustomize.py < notes.txt",
            "echo 'import os' > {P}/site-packages/a.pth",
        ),
        Case("allow", tool="write", arguments={"file_path": "{P}", "content": "x"}, creates=True),
        Case("allow", "cp notes.txt {P}", creates=True),
        Case("allow", tool="write", arguments={"file_path": "src/{P}.pth.md", "content": "x"}),
        *allow("echo sitecustomize.py notes.pth site-packages-notes"),
    ),
)
