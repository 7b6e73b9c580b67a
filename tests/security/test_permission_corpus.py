"""The adversarial corpus (the ``corpus`` package), decided and run for real.

Each group runs once through ``dsh -p`` against the scripted server, which makes every
call of the group in one step; the test then reads what each call returned (allowed,
asked, which headless means refused with a reason, or denied) and checks on disk that
nothing it was refused did happen: no marker file was made, no victim was deleted.
The same cases are also decided directly, which names the failing case more plainly.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from dsh.policy.permissions import Rule, assess
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools import Action, ToolDefinition
from tests.e2e.harness import Dsh
from tests.security.corpus import GROUPS, Case, Group, count

E2E_TIMEOUT = 240.0  # a whole group, hundreds of calls, on a loaded two-core machine


class _Args(BaseModel):
    pass


async def _nothing(args: _Args, context: object) -> str:
    return ""


BASH = ToolDefinition(name="bash", description="", arguments=_Args, execute=_nothing)


def test_the_corpus_is_large_enough() -> None:
    assert count() >= 362  # 302 before issue 35, which asked for 60 more


def _names(group: Group, index: int) -> tuple[str, str]:
    return f"PWNED_{group.name}_{index}", f"victim_{group.name}_{index}.txt"


BASH_CASES = [
    pytest.param(group, index, case, id=f"{group.name}-{index}")
    for group in GROUPS
    for index, case in enumerate(group.cases)
    if case.command is not None
]


@pytest.mark.parametrize(("group", "index", "case"), BASH_CASES)
def test_each_command_is_decided_as_the_corpus_says(
    group: Group, index: int, case: Case, tmp_path: Path
) -> None:
    marker, victim = _names(group, index)
    _, arguments = case.call(marker, victim)
    command = arguments["command"]
    _write_files(tmp_path, group)  # what is on disk decides some (a folder git reads)
    action = Action(risk="exec", summary=command[:80], command=command)
    verdict = assess(
        group.mode,  # type: ignore[arg-type]
        BASH,
        action,
        tmp_path,
        allow=[Rule.parse(r) for r in group.allow],
        deny=[Rule.parse(r) for r in group.deny],
    )
    assert verdict.verdict == case.expect, (command[:200], verdict.reason)


def _prepare(dsh: Dsh, group: Group) -> None:
    settings = dsh.home / "settings.toml"
    settings.write_text(
        settings.read_text()
        + "\n[permissions]\n"
        + f"allow = {json.dumps(list(group.allow))}\n"
        + f"deny = {json.dumps(list(group.deny))}\n"
    )
    project = dsh.project
    (project / "secrets").mkdir()
    (project / "secrets" / "token.txt").write_text("TOKEN=corpus-secret-value\n")
    (project / "notes.txt").write_text("the TOKEN is kept elsewhere\n")
    (project / "src").mkdir()
    for index in range(len(group.cases)):
        (project / _names(group, index)[1]).write_text("keep me\n")
    if group.git:
        for command in (
            ["git", "init", "-q"],
            [
                "git",
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "i",
            ],
        ):
            subprocess.run(command, cwd=project, check=True, capture_output=True, timeout=30)
    _write_files(project, group)


def _write_files(project: Path, group: Group) -> None:
    markers = [_names(group, index)[0] for index in range(len(group.cases))]
    every = " ".join([*markers, *(f"../{marker}" for marker in markers)])
    for path, text in group.files:
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(text.replace("{ALL}", every))


def _decision(tool: str, text: str) -> str:
    if text.startswith("Error: the arguments do not fit"):
        if "NUL character" in text:
            # Refused before the rules are asked (no command line can hold a NUL):
            # stricter than asking, so it stands for "ask" and "deny" alike.
            return "refused"
        return "invalid"  # never decided: the corpus is wrong
    if text.startswith(f"Error: {tool} is not allowed"):
        return "deny"
    if text.startswith(f"Error: {tool} was not run: no one is here to approve it"):
        return "ask"
    return "allow"


@pytest.mark.parametrize("group", GROUPS, ids=[g.name for g in GROUPS])
async def test_the_corpus_through_dsh_p(group: Group, dsh: Dsh, fake_llm: FakeLLM) -> None:
    _prepare(dsh, group)
    calls: list[ToolCallSpec] = []
    for index, case in enumerate(group.cases):
        tool, arguments = case.call(*_names(group, index))
        calls.append(ToolCallSpec(name=tool, arguments=arguments, id=f"call_{index}"))
    # In few chunks: how a reply is cut up is the stream tests' business, and the
    # long cases (a 120,000-character command) would otherwise come 4 characters a chunk.
    fake_llm.add(Reply(tool_calls=calls, chunk_size=4096))
    fake_llm.add(Reply(text="Done."))
    child = await dsh.start("-p", "run the corpus", "--permission-mode", group.mode)
    _, err = await asyncio.wait_for(child.communicate(b""), E2E_TIMEOUT)
    assert child.returncode == 0, err.decode()[-2000:]
    assert b"Traceback" not in err, err.decode()[-2000:]
    results: dict[str, Any] = {
        m["tool_call_id"]: m["content"]
        for m in fake_llm.chat_requests[-1].body["messages"]
        if m["role"] == "tool"
    }
    wrong = []
    for index, case in enumerate(group.cases):
        marker, victim = _names(group, index)
        tool = calls[index].name
        text = str(results[f"call_{index}"])
        decided = _decision(tool, text)
        shown = (calls[index].arguments_text[:160], text[:200])
        if decided != case.expect and not (decided == "refused" and case.expect != "allow"):
            wrong.append((index, f"{decided} (expected {case.expect})", *shown))
        made = (dsh.project / marker).exists() or (dsh.project / "src" / marker).exists()
        if made != (case.expect == "allow" and case.creates):
            wrong.append((index, f"marker made: {made}", *shown))
        if case.expect != "allow" and not (dsh.project / victim).exists():
            wrong.append((index, "the victim was deleted", *shown))
    assert not wrong, "\n".join(map(str, wrong))
    if group.name == "every-tool":
        # What the deny rule hides is never in what a search returns.
        for text in results.values():
            assert "corpus-secret-value" not in str(text)
            assert "secrets/token.txt" not in str(text)


FUZZ_ALPHABET = [
    *"abcrm $`'\"\\(){}[]<>|&;#\n\t=*?!~@%^-+:,./0123456789",
    *("$(", "${", "<<", "<<<", "((", "\ud800", "\x00", "é", "$'", "\\\n", "$'\\0'"),
    *("-c", "bash", "sudo", "git", "env", "xargs", "find", "-exec", "~/", "secrets/"),
]


def test_hostile_commands_are_always_decided_never_raise(tmp_path: Path) -> None:
    """Random commands of bash's special characters, NUL bytes and lone surrogates:
    each gets a verdict (and a grant, or none), never an exception."""
    import random

    from dsh.policy.permissions import session_rules
    from dsh.policy.shell import analyse

    pick = random.Random(17)
    allow = [Rule.parse("bash(ls:*)")]
    deny = [Rule.parse("bash(rm:*)"), Rule.parse("read(secrets/**)")]
    for _ in range(2_000):
        command = "".join(pick.choice(FUZZ_ALPHABET) for _ in range(pick.randint(1, 40)))
        analyse.cache_clear()
        action = Action(risk="exec", summary="fuzz", command=command)
        for mode in ("default", "bypass"):
            verdict = assess(mode, BASH, action, tmp_path, allow=allow, deny=deny)  # type: ignore[arg-type]
            assert verdict.verdict in ("allow", "ask", "deny")
        session_rules(BASH, action)
