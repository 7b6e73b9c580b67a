"""Every subprocess dsh starts gets its arguments as a list, never a shell string.

The sources of ``dsh/`` and ``plugins/`` are read with ``ast`` and every call that
starts a program is checked:

- nothing passes ``shell=`` (other than ``shell=False``), calls ``os.system``,
  ``os.popen``, ``subprocess.getoutput``/``getstatusoutput``,
  ``asyncio.create_subprocess_shell`` or a loop's ``subprocess_shell``;
- ``subprocess.run``/``call``/``check_call``/``check_output``/``Popen`` get a list
  (or a name holding one), never a string that was built (a literal, an f-string, a
  concatenation, ``.format``, ``.join``);
- a shell started with ``-c`` (``bash -c``, ``sh -c`` ...) is one of the two tools whose
  job is to run the model's command line, and which pass it as one element of an
  argument list after the user approves it: the bash tool and ``terminal_open``.

The checker itself is tested on snippets that break each rule, so a clean pass means
something.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh"})
SPAWNERS = frozenset({"run", "call", "check_call", "check_output", "Popen"})
ALWAYS_SHELL = {
    ("os", "system"),
    ("os", "popen"),
    ("subprocess", "getoutput"),
    ("subprocess", "getstatusoutput"),
    ("asyncio", "create_subprocess_shell"),
}
# Where a shell runs a command line, by design: the model's behind an approval, or the
# person's own from their settings.
ALLOWED_SHELLS = {
    ("plugins/bash/process.py", "spawn_shell"),  # the bash tool: ["bash", "-c", command]
    ("plugins/bash/tool.py", "contain"),  # the same command line, handed to the sandbox
    ("plugins/terminal/tools.py", "open_"),  # terminal_open: a program in a pty
    # a user hook: the [hooks] table of the person's settings (a project's only when
    # the folder is trusted), never a command the model wrote
    ("plugins/user_hooks/runner.py", "run_hook"),
}


def dotted(node: ast.expr) -> tuple[str, ...]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return tuple(reversed(parts))


def built_string(node: ast.expr) -> bool:
    """A command string made in code: a literal, an f-string, + or %, .format, .join."""
    match node:
        case ast.Constant(value=str()) | ast.JoinedStr():
            return True
        case ast.BinOp(op=ast.Add() | ast.Mod(), left=left, right=right):
            return built_string(left) or built_string(right)
        case ast.Call(func=ast.Attribute(attr="format" | "join", value=value)):
            return isinstance(value, ast.Constant | ast.JoinedStr) or built_string(value)
    return False


def shell_with_c(elements: list[ast.expr]) -> bool:
    """[..., "bash", "-c", ...]: a shell told to run a command line."""
    for first, second in itertools.pairwise(elements):
        if (
            isinstance(first, ast.Constant)
            and isinstance(first.value, str)
            and Path(first.value).name in SHELLS
            and isinstance(second, ast.Constant)
            and second.value == "-c"
        ):
            return True
    return False


class Checker(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.function = "<module>"
        self.problems: list[str] = []
        self.shells: set[tuple[str, str]] = set()  # (file, function) starting a shell -c

    def report(self, node: ast.AST, what: str) -> None:
        self.problems.append(
            f"{self.path}:{getattr(node, 'lineno', '?')} ({self.function}): {what}"
        )

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer, self.function = self.function, node.name
        self.generic_visit(node)
        self.function = outer

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Call(self, node: ast.Call) -> None:
        name = dotted(node.func)
        for keyword in node.keywords:
            if keyword.arg == "shell" and not (
                isinstance(keyword.value, ast.Constant) and keyword.value.value is False
            ):
                self.report(node, "shell= on a subprocess call")
        if name[-2:] in ALWAYS_SHELL or (name and name[-1] == "subprocess_shell"):
            self.report(node, f"{'.'.join(name)} runs its argument through a shell")
        spawner = len(name) >= 2 and name[-2] == "subprocess" and name[-1] in SPAWNERS
        if spawner and node.args and built_string(node.args[0]):
            self.report(node, f"subprocess.{name[-1]} is given a command string")
        if shell_with_c(list(node.args)):
            self.shell(node)
        self.generic_visit(node)

    def visit_List(self, node: ast.List) -> None:
        if shell_with_c(node.elts):
            self.shell(node)
        self.generic_visit(node)

    def visit_Tuple(self, node: ast.Tuple) -> None:
        if shell_with_c(node.elts):
            self.shell(node)
        self.generic_visit(node)

    def shell(self, node: ast.AST) -> None:
        self.shells.add((self.path, self.function))
        if (self.path, self.function) not in ALLOWED_SHELLS:
            self.report(node, "a shell started with -c outside the allow-list")


def check_source(source: str, path: str) -> list[str]:
    checker = Checker(path)
    checker.visit(ast.parse(source, filename=path))
    return checker.problems


def sources() -> list[Path]:
    return sorted(p for folder in ("dsh", "plugins") for p in (ROOT / folder).rglob("*.py"))


def test_no_subprocess_is_started_through_a_shell_string() -> None:
    problems = []
    for path in sources():
        problems += check_source(path.read_text(), path.relative_to(ROOT).as_posix())
    assert problems == []


def test_the_allowed_shells_are_still_where_the_allow_list_says() -> None:
    # If a tool moves, the allow-list must move with it rather than go stale.
    found: set[tuple[str, str]] = set()
    for path in sources():
        relative = path.relative_to(ROOT).as_posix()
        checker = Checker(relative)
        checker.visit(ast.parse(path.read_text()))
        found |= checker.shells
    assert found == ALLOWED_SHELLS


@pytest.mark.parametrize(
    "snippet",
    [
        "import subprocess\nsubprocess.run('ls -l', shell=True)",
        "import subprocess\nsubprocess.run(['ls'], shell=flag)",
        "import subprocess\nsubprocess.run(f'git log {ref}')",
        "import subprocess\nsubprocess.check_output('grep ' + pattern)",
        "import subprocess\nsubprocess.Popen('rg {}'.format(p))",
        "import subprocess\nsubprocess.call(' '.join(['rm', path]))",
        "import os\nos.system('make')",
        "import os\nos.popen(cmd)",
        "import subprocess\nsubprocess.getoutput(cmd)",
        "import asyncio\nasync def f():\n    await asyncio.create_subprocess_shell(cmd)",
        "async def f(loop):\n    await loop.subprocess_shell(proto, cmd)",
        "import asyncio\nasync def f():\n    await asyncio.create_subprocess_exec('sh', '-c', text)",
        "argv = ['/bin/bash', '-c', model_text]",
        "def g():\n    return ('zsh', '-c', x)",
    ],
)
def test_the_checker_catches_each_kind_of_shell_string(snippet: str) -> None:
    assert check_source(snippet, "example.py") != []


@pytest.mark.parametrize(
    "snippet",
    [
        "import subprocess\nsubprocess.run(['git', 'status'], shell=False)",
        "import subprocess\nsubprocess.run(command, check=False)",
        "import asyncio\nasync def f():\n    await asyncio.create_subprocess_exec('rg', '--json', pattern)",
        "argv = ['bash', '--noprofile', '--norc', '-i']",
    ],
)
def test_the_checker_lets_argument_lists_through(snippet: str) -> None:
    assert check_source(snippet, "example.py") == []
