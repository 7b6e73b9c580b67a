"""What is protected and why, as tables: dsh's refused files, the files whose change
makes something run later, the secret stores, and the :class:`Protection` a check
gives (:mod:`dsh.policy.protected` checks paths and commands against them)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from dsh.paths import (
    CREDENTIALS_FILE,
    HOME_ENV_FILE,
    INSTALLATION_KEY_FILE,
    TRUST_FILE,
)

NEVER = "no tool may read or change it, in any mode"
REFUSED_FILES: dict[str, str] = {
    CREDENTIALS_FILE: f"dsh's stored API keys: {NEVER}",
    HOME_ENV_FILE: f"dsh's API keys ($DSH_HOME/.env): {NEVER}",
    TRUST_FILE: f"the list of folders you trust: {NEVER}",
    INSTALLATION_KEY_FILE: f"the key that signs your session grants: {NEVER}",
}
"""The files of ``$DSH_HOME`` no tool touches, and why."""

PROC = Path("/proc")
PROC_OWN = f"dsh's own process: its memory and environment hold your keys: {NEVER}"
PROC_ENVIRON = f"a process's environment, which can hold your keys: {NEVER}"
PROC_UNKNOWN = (
    f"a file of /proc that cannot be told from dsh's own process or a process's "
    f"environment, which can hold your keys: {NEVER}"
)
PROC_SELF = frozenset({"self", "thread-self"})
PROC_SAMPLES = tuple(
    Path(p)
    for p in (
        "/proc/1/environ",
        "/proc/self/environ",
        "/proc/thread-self/environ",
        "/proc/1/task/1/environ",
    )
)
"""What a glob word is tried against: it could name a process's environment."""
PROC_TEXT = re.compile(r"(?<![\w.-])/?proc(?![\w.-])")
"""``/proc`` or ``proc`` as a word of its own (``cd / && cd proc``), not a part of a
name (``PWNED_proc-x``)."""
ENVIRON_TEXT = re.compile(r"(?<![\w.-])environ(?![\w.-])")
PROC_COMPUTED_TEXT = re.compile(r"/proc/+[$`*?\[]")
"""A process chosen at run time (``/proc/$(pgrep dsh)/``, ``/proc/*/``): it may be dsh."""
PROC_OWN_TEXT = re.compile(
    r"/proc/+(?:self|thread-self|\$\$|\$\{?(?:PPID|BASHPID)\}?|\$\{\$\})(?![\w-])"
)

GIT_RUNS = "this file can make git run programs"
GIT_DATA = "git's own folder: a change there can make git run programs or lose history"
DSH_SETTINGS = "dsh's own settings: they can change what runs without asking"
DSH_HOME_WHY = "dsh's own folder: its settings can change what runs without asking"
SHELL_STARTUP = "this file runs in every new shell"

_PYTHON_STARTS = "python runs it when it starts"
_PATH_FOLDER = "a program here runs in place of the one you name (it is early in $PATH)"
_EDITOR_STARTS = "your editor runs it when it starts"
_FETCHES = "it decides where packages are fetched from and what installs run"
STARTUP_WRITES: dict[str, str] = {
    **dict.fromkeys((".local/bin/", "bin/", ".cargo/bin/", "go/bin/"), _PATH_FOLDER),
    **dict.fromkeys(
        (".pythonrc", ".pythonrc.py", ".pythonstartup", ".config/python/", ".ipython/"),
        _PYTHON_STARTS,
    ),
    ".jupyter/": "jupyter runs its configuration files as Python",
    **dict.fromkeys(
        (
            ".config/pip/",
            ".pip/",
            ".pydistutils.cfg",
            ".condarc",
            ".npmrc",
            ".yarnrc",
            ".yarnrc.yml",
            ".config/yarn/",
            ".gemrc",
            ".cargo/config",
            ".cargo/config.toml",
            ".config/go/",
        ),
        _FETCHES,
    ),
    ".pypirc": "it names where and as whom your packages are published",
    **dict.fromkeys((".irbrc", ".pryrc", ".Rprofile"), "the interpreter runs it when it starts"),
    **dict.fromkeys(
        (
            ".vimrc",
            ".gvimrc",
            ".exrc",
            ".vim/",
            ".config/nvim/",
            ".emacs",
            ".emacs.el",
            ".emacs.d/",
            ".config/emacs/",
            ".nanorc",
            ".config/nano/",
            ".config/Code/User/settings.json",
            ".config/Code/User/tasks.json",
            ".config/Code/User/keybindings.json",
            ".config/VSCodium/User/settings.json",
            ".config/VSCodium/User/tasks.json",
        ),
        _EDITOR_STARTS,
    ),
    ".config/direnv/": "direnv runs it in every folder you enter",
    ".inputrc": "it can bind keys to commands in every shell",
    **dict.fromkeys(
        (".tmux.conf", ".config/tmux/", ".screenrc"), "it can run programs when a terminal starts"
    ),
    **dict.fromkeys(
        (".curlrc", ".wgetrc"), "it changes where and how every download goes, and what it writes"
    ),
    ".docker/config.json": "it names programs docker runs for logins",
    ".config/containers/": "it names programs podman runs",
    **dict.fromkeys(
        (".mailcap", ".config/mimeapps.list", ".local/share/applications/"),
        "it decides which program opens a file",
    ),
    **dict.fromkeys(
        (".gdbinit", ".config/gdb/", ".lldbinit", ".psqlrc", ".sqliterc", ".my.cnf"),
        "the program runs the commands in it when it starts",
    ),
}
"""Start-up files of other programs in the home folder (a write asks, as for
:data:`HOME_WRITES`): each makes a program run code, or fetch it, the next time it
starts. docs/security.md lists them with why."""

SITE_FOLDERS = frozenset({"site-packages", "dist-packages"})
SITE_STARTS = "python runs it at every start (a start-up file of site-packages)"
SITE_FOLDER = "python runs the *.pth and sitecustomize files put here at every start"


def site_startup(path: PurePosixPath | Path) -> str | None:
    """Why ``path`` matters when it is a site-packages folder itself (a copy into it
    can name any file) or what python runs from one at every start: ``*.pth``,
    ``sitecustomize``, ``usercustomize`` (a module, a compiled one or a package), in
    any environment."""
    parts = path.parts
    for index, part in enumerate(parts):
        if part not in SITE_FOLDERS:
            continue
        if index == len(parts) - 1:
            return SITE_FOLDER
        name = parts[index + 1]
        if name.endswith(".pth") or name.split(".", 1)[0] in ("sitecustomize", "usercustomize"):
            return SITE_STARTS
    return None


# Relative to the home folder; a trailing "/" means the folder and all in it.
HOME_WRITES: dict[str, str] = {
    **dict.fromkeys(
        (
            ".bashrc",
            ".bash_profile",
            ".bash_login",
            ".bash_logout",
            ".bash_aliases",
            ".profile",
            ".zshrc",
            ".zshenv",
            ".zprofile",
            ".zlogin",
            ".zlogout",
            ".kshrc",
            ".mkshrc",
            ".cshrc",
            ".tcshrc",
            ".login",
            ".logout",
            ".config/fish/",
            ".config/nushell/",
            ".config/powershell/",
        ),
        SHELL_STARTUP,
    ),
    **dict.fromkeys(
        (".xprofile", ".xsessionrc", ".xinitrc", ".config/autostart/"),
        "this file runs when you log in",
    ),
    ".pam_environment": "this file sets the environment of every login",
    ".config/environment.d/": "these files set the environment of every login",
    ".config/systemd/user/": "services here run programs on their own",
    ".ssh/": "ssh's keys and settings: a change can let others log in, or run programs "
    "when you connect",
    ".gitconfig": "git's settings for all your projects: they can make git run programs",
    ".config/git/": "git's settings for all your projects: they can make git run programs",
    **STARTUP_WRITES,
}
"""Files in the home folder a write must ask for, and why."""

SECRET_STORES: dict[str, str] = {
    ".ssh/": "it holds your SSH keys",
    ".gnupg/": "it holds your GPG keys",
    ".aws/": "it holds your AWS credentials",
    ".azure/": "it holds your Azure credentials",
    ".config/gcloud/": "it holds your Google Cloud credentials",
    ".kube/config": "it holds your Kubernetes credentials",
    ".docker/config.json": "it holds your Docker registry logins",
    ".netrc": "it holds passwords for remote hosts",
    ".git-credentials": "it holds your saved git passwords",
    ".config/gh/hosts.yml": "it holds your GitHub CLI token",
    ".pgpass": "it holds your PostgreSQL passwords",
    ".pypirc": "it can hold your PyPI token",
    ".npmrc": "it can hold your npm token",
    ".cargo/credentials": "it holds your crates.io token",
    ".cargo/credentials.toml": "it holds your crates.io token",
    ".password-store/": "it holds your passwords",
    ".local/share/keyrings/": "it holds your desktop keyring",
}
"""Secret stores in the home folder: reading one asks first, in every mode but bypass."""

SEARCH_NOTE = "dsh's own keys and secret stores such as ~/.ssh are never searched"


@dataclass(frozen=True)
class Protection:
    """Why a path may not be touched unasked."""

    path: Path
    """The path as checked: absolute, as named."""
    reason: str
    """What the call does and why that matters, in the user's words:
    ``writes .git/config: this file can make git run programs``."""
    refused: bool = False
    """Refused in every mode, bypass included (dsh's keys and trust)."""
    why: str = ""
    """The reason without the call's part: ``this file can make git run programs``."""
