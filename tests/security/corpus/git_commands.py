"""git: a denied subcommand behind global options, options and settings that make
git run a program, and repositories the project plants so that an allowed git
command runs one.
"""

from __future__ import annotations

from tests.security.corpus.model import Case, Group, Verdict, allow, ask, deny

GIT = Group(
    "git",
    "default",
    allow=("bash(git:*)",),
    deny=("bash(git push:*)",),
    git=True,
    cases=(
        *deny(
            "git push",
            "git -c color.ui=never push origin HEAD:refs/heads/x",
            "git -C . push",
            "git --git-dir=.git push",
            "git --git-dir .git --work-tree . push",
            "git --no-pager push",
            "git -p push",
            "g\\it push",
            "/usr/bin/git push",
            "command git push --force",
            "timeout 5 git push",
        ),
        *ask(
            "git -c core.fsmonitor='touch {P}' status",
            "git -c core.pager='touch {P}' log",
            "git -c alias.x='!touch {P}' x",
            "git -c core.sshCommand='touch {P}' fetch",
            "git -c diff.external='touch {P}' diff",
            "git -c core.hooksPath=/tmp status",
            "git --exec-path=/tmp status",
            "git --config-env=core.pager=X log",
            "git config alias.x '!touch {P}'",
            "git diff --ext-diff",
            "git grep -O'touch {P}' x",
            "git log --output={P}",
            "git $(echo push)",
            "git rebase -x 'touch {P}' HEAD",
            "git clone -u 'touch {P}' . x",
            "git --bogus-option status",
            "git -C . status --short",
        ),
        *allow(
            "git status",
            "git -c color.ui=never status",
            "git --no-pager log --oneline -1",
            "git config --get user.name",
        ),
    ),
)


def _git_call(command: str, workdir: str, expect: Verdict = "ask") -> Case:
    arguments = {"command": command, "workdir": workdir, "description": "corpus"}
    return Case(expect, tool="bash", arguments=arguments)


_PLANTED = "touch {ALL}; false"
GIT_CONFIG_RUNS = Group(
    "git-config-runs",
    "default",
    allow=(
        "bash(git status:*)",
        "bash(git log:*)",
        "bash(git diff:*)",
        "bash(cd:*)",
        "bash(env:*)",
        "bash(find:*)",
        "bash(cp:*)",
        "bash(printf:*)",
    ),
    git=True,
    files=(
        ("evil/HEAD", "ref: refs/heads/main\n"),
        (
            "evil/config",
            "[core]\n\tbare = false\n\tworktree = ..\n"
            f'\tfsmonitor = "{_PLANTED}"\n\tpager = "{_PLANTED}"\n'
            f'[filter "x"]\n\tclean = "{_PLANTED}"\n\tsmudge = "{_PLANTED}"\n'
            f'[alias]\n\tst = "!{_PLANTED}"\n',
        ),
        ("evil/objects/info/.keep", ""),
        ("evil/refs/heads/.keep", ""),
        ("nested/.git/HEAD", "ref: refs/heads/main\n"),
        (
            "nested/.git/config",
            f'[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = "{_PLANTED}"\n',
        ),
        ("nested/.git/objects/info/.keep", ""),
        ("nested/.git/refs/heads/.keep", ""),
        ("nested/n.txt", "n\n"),
        (".gitattributes", "*.txt filter=x\n"),
    ),
    cases=(
        *ask(
            "git -C evil status",
            "git --git-dir=evil --work-tree=. status",
            "git --git-dir evil status",
            "git --work-tree=. --git-dir=evil log",
            "git --bare status",
            "git -C nested status",
            "git -C nested log -1",
            "GIT_DIR=evil git status",
            "GIT_DIR=evil GIT_WORK_TREE=. git status",
            "env GIT_DIR=evil git status",
            "env GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor "
            "GIT_CONFIG_VALUE_0='touch {P}' git status",
            "export GIT_DIR=evil; git status",
            "GIT_CONFIG_PARAMETERS=\"'core.fsmonitor'='touch {P}'\" git status",
            "env -u HOME GIT_EXEC_PATH=/tmp git status",
            "env GIT_SSH_COMMAND='touch {P}' git log -1",
            "cd evil && git --bare status",
            "git --git-dir=nested/.git status",
            "env -C nested git status",
            "env --chdir=nested git status",
            "env -iC nested git status",
            "find . -path ./nested/n.txt -execdir git status \\;",
            "find . -path ./nested/n.txt -execdir sh -c 'git status' \\;",
            "cd $HOME && git status",
            "cd && git status",
            "cd / && git status",
            "cd nested && cd - && git status",
            "cd /tmp; git status",
            "cd evil && git status",
            "cp notes.txt evil/hooks/pre-commit",
            "cp notes.txt evil/config",
            "cp notes.txt src/HEAD",
            "printf 'ref: refs/heads/main\\n' > src/HEAD",
            "cp -t src notes.txt nested/.git/HEAD",
        ),
        _git_call("git status", "/"),
        _git_call("git status", "evil/..", "allow"),  # the project itself: a control
        *allow(
            "git status",
            "git log --oneline -1",
            "git diff",
            "cd nested && git status",
            "cd nested && git log -1",
            "git --no-pager log -1",
            "cd src && git status",
            "cd ./src/ && git log -1",
            "find . -name '*.txt' -exec git status \\;",
            "cp notes.txt src/HEADLINE.txt",
        ),
        _git_call("git status", "evil", "allow"),
        _git_call("git status", "nested", "allow"),
    ),
)
