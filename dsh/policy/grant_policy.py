"""The smallest rule "allow for this session" may offer for one command.

Programs with subcommands are granted with their subcommand (``git status:*``,
``python3 -m pytest:*``); programs that run their arguments or destroy what they name,
and wrapped commands, only as the exact command; anything else by its name. The lists
are the rule language's documented behaviour (``docs/security.md``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from dsh.policy.programs import RUNNERS, SHELLS, WRAPPERS, Layer

SUBCOMMAND_PROGRAMS = frozenset(
    {
        "git",
        "npm",
        "pnpm",
        "yarn",
        "bun",
        "cargo",
        "go",
        "uv",
        "pip",
        "pip3",
        "poetry",
        "docker",
        "kubectl",
        "dotnet",
        "gradle",
        "mvn",
        "swift",
        "deno",
        "bundle",
        "rake",
        "mix",
        "stack",
        "cabal",
        "terraform",
        "helm",
        "gh",
        "brew",
        "apt",
        "conda",
        "rustup",
        "nix",
    }
)
"""Programs whose first word picks what they do: a grant names program and subcommand."""

EXACT_ONLY = frozenset(
    {
        *RUNNERS,
        *WRAPPERS,
        *SHELLS,
        "rm",
        "rmdir",
        "dd",
        "chmod",
        "chown",
        "chgrp",
        "mv",
        "ln",
        "shred",
        "truncate",
        "mkfs",
        "awk",
        "gawk",
        "mawk",
        "nawk",
        "sed",
        "make",
        "cmake",
        "perl",
        "ruby",
        "node",
        "php",
        "lua",
        "tclsh",
        "Rscript",
        "curl",
        "wget",
        "ssh",
        "scp",
        "rsync",
        "kill",
        "pkill",
        "killall",
        "tee",
        "cp",
        "install",
        "crontab",
        "systemctl",
        "npx",
        "uvx",
        "pipx",
        "sqlite3",
        "psql",
        "mysql",
        "docker-compose",
        "open",
        "xdg-open",
    }
)
"""Programs that run their arguments or destroy what they name: a grant covers the
exact command only."""

_PYTHONS = r"python(\d+(\.\d+)?)?|pypy\d*"
_NON_PREFIX_FLAGS = {
    "find": ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprintf", "-fls"),
}


def grant_words(layers: Sequence[Layer]) -> tuple[list[str], bool] | None:
    """The words of the rule "allow for this session" offers for one command (its
    layers, as :func:`unwrap` found them), and whether it is a prefix (``:*``); None
    when no rule can be offered (computed words). A wrapped command is granted exactly,
    as written; git's global options are left out of a git grant."""
    wrapped = any(layer.wrapper not in (None, "git") for layer in layers)
    invocation_argv = layers[0].argv if wrapped else layers[-1].argv
    # A pattern (*.tmp) is granted as written: a rule matches only the same pattern.
    values = [w.value for w in invocation_argv]
    if not values or values[0] is None or invocation_argv[0].glob:
        return None
    exact = [v for v in values if v is not None]
    if len(exact) != len(values):
        # A computed word: only a prefix of static words can be offered.
        offered = _grant_for(exact[:3], wrapped)
        return (
            offered
            if offered is not None
            and offered[1]
            and all(v is not None for v in values[: len(offered[0])])
            else None
        )
    return _grant_for(exact, wrapped)


def _grant_for(words: list[str], wrapped: bool) -> tuple[list[str], bool] | None:
    name = words[0]
    if wrapped or "/" in name:
        return words, False
    if name in EXACT_ONLY:
        return words, False
    if name in _NON_PREFIX_FLAGS and any(
        w.startswith(flag) for w in words for flag in _NON_PREFIX_FLAGS[name]
    ):
        return words, False
    if re.fullmatch(_PYTHONS, name):
        if len(words) >= 3 and words[1] == "-m" and re.fullmatch(r"[\w.]+", words[2]):
            if words[2] in ("pip", "venv", "ensurepip", "http.server", "pydoc"):
                return words, False
            return words[:3], True
        return words, False
    if name in SUBCOMMAND_PROGRAMS:
        if len(words) >= 2 and re.fullmatch(r"[A-Za-z][\w:.-]*", words[1]):
            if name == "npm" and words[1] in ("run", "run-script", "exec", "x"):
                keep = 3 if len(words) >= 3 and not words[2].startswith("-") else 2
                return (words[:keep], True) if keep == 3 else (words, False)
            if name == "git" and words[1] in ("config", "bisect", "submodule", "filter-branch"):
                return words, False
            return words[:2], True
        return words, False
    return words[:1], True
