"""``dsh completion SHELL`` (issue 43): made from the real parsers, so it cannot drift.

Every command, action and flag the parsers have (the core's and the plugins') must be
in each shell's script; bash's script must load and complete; zsh's and fish's are
syntax-checked where those shells are installed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from dsh.cli import build_command_parser, build_parser
from dsh.cli.completion import plugin_parsers

DSH = str(Path(sys.executable).parent / "dsh")


@cache
def generated(shell: str) -> str:
    run = subprocess.run(
        [DSH, "completion", shell], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def parser_words(parser: argparse.ArgumentParser) -> set[str]:
    """Every flag and subcommand name in ``parser``, at any depth."""
    found: set[str] = set()
    for action in parser._actions:
        found.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.add(name)
                found |= parser_words(sub)
    return found


def every_word() -> set[str]:
    words = parser_words(build_parser()) | parser_words(build_command_parser())
    for name, parser in plugin_parsers().items():
        words |= {name} | parser_words(parser)
    return words


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_script_names_every_command_and_flag(shell: str) -> None:
    words = every_word()
    assert {"sessions", "export", "--format", "--permission-mode", "completion", "mcp"} <= words
    text = generated(shell)
    tokens = set(
        text.replace('"', " ")
        .replace("|", " ")
        .replace("(", " ")
        .replace(")", " ")
        .replace("/", " ")
        .split()
    )
    missing = sorted(words - tokens)
    assert missing == [], f"the {shell} script lacks {missing}"


def test_an_unknown_shell_is_a_clear_error() -> None:
    run = subprocess.run(
        [DSH, "completion", "tcsh"], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 2
    assert "invalid choice: 'tcsh'" in run.stderr


def test_bash_loads_the_script() -> None:
    run = subprocess.run(
        ["bash", "-c", f"source <({DSH} completion bash) && complete -p dsh"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "complete -o default -F _dsh dsh"


@pytest.mark.parametrize(
    ("line", "offered"),
    [
        ("dsh sess", "sessions"),
        ("dsh sessions ", "list show search export fork import rm reindex"),
        ("dsh sessions export x --format ", "jsonl markdown replay"),
        ("dsh completion ", "bash zsh fish"),
        ("dsh --sandbox ", "read-only workspace-write off"),
        ("dsh --perm", "--permission-mode"),
        ("dsh mcp lo", "login logout"),
        ("dsh --model ", ""),  # a free value: bash's own file completion (-o default)
    ],
)
def test_bash_completes_from_the_parsers(line: str, offered: str) -> None:
    words = line.split(" ")
    program = (
        f"source <({DSH} completion bash)\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        '_dsh; echo "${COMPREPLY[*]}"'
    )
    run = subprocess.run(
        ["bash", "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == offered


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_parse(shell: str, tmp_path: Path) -> None:
    program = shutil.which(shell)
    if program is None:
        pytest.skip(f"{shell} is not installed here: its script's syntax is not checked")
    script = tmp_path / f"dsh.{shell}"
    script.write_text(generated(shell))
    run = subprocess.run(
        [program, "-n", str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
