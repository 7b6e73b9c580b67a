"""Deciding a long command: the permission engine on a 10 KB bash command.

Target: a 10 KB command is decided (analysed, unwrapped, checked against allow and deny
rules and the protected paths) in at most 5 ms, so that a model's long script never
makes a call wait on its permission check.

The target is for the 10 KB commands a model sends: a heredoc that writes a file, a
``python3 -c`` script, a commit message, a script of 40 ordinary steps with quotes and
pipes; the figure is the slowest one's median. Two stress shapes (400 short commands,
144 commands with substitutions and wrappers) are measured beside it, without a target
(7-35 ms on the two-core CI VM). Each is decided uncached (the analysis cache
is cleared before every run), 31 times; medians with their range.

Run: .venv/bin/python bench/permissions.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from pydantic import BaseModel
from report import Sample, figure, load_now, machine  # bench/report.py, beside this script

from dsh.policy.permissions import Rule, assess
from dsh.policy.shell import analyse
from dsh.tools import Action, ToolDefinition

TARGET = 0.005  # s
RUNS = 31
SIZE = 10_000


class _Args(BaseModel):
    pass


async def _nothing(args: _Args, context: object) -> str:
    return ""


BASH = ToolDefinition(name="bash", description="", arguments=_Args, execute=_nothing)
ALLOW = [Rule.parse(r) for r in ("bash(git status:*)", "bash(ls:*)", "bash(grep:*)")]
DENY = [Rule.parse(r) for r in ("bash(rm:*)", "bash(git push:*)")]


def _fill(unit: str, joiner: str) -> str:
    parts: list[str] = []
    while len(joiner.join(parts)) < SIZE:
        parts.append(unit.format(n=len(parts)))
    return joiner.join(parts)


_PYTHON = "def f{n}(x):\n    return [y * {n} for y in range(x) if y % 3]\n\n"
_STEP = (
    'grep -rn "TODO({n})" src/module_{n} --include="*.py" | head -n 20; '
    "python3 -m pytest -q tests/test_{n}.py -k 'not slow' 2>&1 | tail -n 5"
)

SHAPES = {
    # What a model sends: one long command, or a script of ordinary steps.
    "a heredoc writing a file": "cat > src/generated.py <<'EOF'\n" + _fill(_PYTHON, "") + "EOF",
    "python3 -c with a script": "python3 -c '" + _fill(_PYTHON, "").replace("'", "") + "'",
    "a commit message": 'git commit -m "' + "Fix the parser; " * (SIZE // 16) + '"',
    "a script of 40 steps": _fill(_STEP, " && "),
}
STRESS = {
    # Adversarial sizes of parts: figures, beside the target.
    "400 chained commands": _fill("git status --short src/m{n}.py | grep -v x{n}", " && "),
    "144 commands with substitutions and wrappers": _fill(
        'timeout 5 ls "$(git status --short d{n})" ${{x:-`ls d{n}`}} > /dev/null', "; "
    ),
}


def decide(command: str, cwd: Path) -> str:
    analyse.cache_clear()
    action = Action(risk="exec", summary=command[:80], command=command)
    return assess("default", BASH, action, cwd, allow=ALLOW, deny=DENY).verdict


def _times(command: str, cwd: Path) -> tuple[Sample, str]:
    times = []
    result = ""
    for _ in range(RUNS):
        start = time.perf_counter()
        result = decide(command, cwd)
        times.append(time.perf_counter() - start)
    return Sample(tuple(times)), result


def main() -> None:
    print(f"machine: {machine()}")
    load = load_now()
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        decide("ls", cwd)  # the parser is loaded once per process, as in dsh
        slowest: tuple[str, Sample] | None = None
        for label, shapes in (("10 KB commands", SHAPES), ("stress, no target", STRESS)):
            print(f"{label}:")
            for name, command in shapes.items():
                taken, result = _times(command, cwd)
                if shapes is SHAPES and (slowest is None or taken.median > slowest[1].median):
                    slowest = (name, taken)
                print(f"  {name} ({len(command):,} chars, {result}): {taken.shown('ms', 2, 1000)})")
    assert slowest is not None
    print(
        figure(
            f"decide a 10 KB command, the slowest shape ({slowest[0]})",
            slowest[1],
            target=TARGET * 1000,
            unit="ms",
            scale=1000,
            load=load,
        )
    )


if __name__ == "__main__":
    main()
