"""No path outside the working directory is written without approval.

``dsh -p --permission-mode accept-edits`` lets the file tools write inside the working
directory unasked; headless, nobody can approve anything else. The model then tries
every way out of the project it has: ``..``, absolute paths, ``~``, a symlinked
folder, a symlinked file, a dangling symlink, ``multi_edit`` and ``edit`` through
links. None of them may touch a byte outside, while the write inside (the control)
lands. dsh's own configuration (``.dsh/settings.toml``, which can set the permission
mode) is not written unasked either, although it is inside the project.

Also here: the search tools pass the model's patterns as arguments that rg cannot
take for options, so a pattern such as ``--pre=...`` runs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools import ToolError
from tests.e2e.harness import Dsh, of_type
from tests.plugins.fs_harness import Fs


def call(name: str, **arguments: Any) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name=name, arguments=arguments)])


async def test_no_way_out_of_the_project_is_written_without_approval(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    root = dsh.root
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "target.txt"
    target.write_text("precious\n")
    existing = root / "outside-existing.txt"
    existing.write_text("keep me\n")
    fake_home = root / "fakehome"
    fake_home.mkdir()
    project = dsh.project
    (project / "linkdir").symlink_to(elsewhere, target_is_directory=True)
    (project / "alias.txt").symlink_to(target)
    (project / "dangling.txt").symlink_to(elsewhere / "created-through-a-dangling-link.txt")
    (project / "sub").mkdir()
    before = snapshot(root, skip=project)

    edits = [{"old_string": "keep", "new_string": "lost"}]
    attempts = [
        call("write", file_path="../outside-dotdot.txt", content="x"),
        call("write", file_path=str(root / "outside-absolute.txt"), content="x"),
        call("write", file_path="sub/../../outside-nested.txt", content="x"),
        call("write", file_path="~/in-the-home.txt", content="x"),
        call("write", file_path="linkdir/through-a-folder-link.txt", content="x"),
        call("write", file_path="dangling.txt", content="x"),
        call("read", file_path="alias.txt"),
        call("edit", file_path="alias.txt", old_string="precious", new_string="stolen"),
        call("write", file_path="alias.txt", content="stolen\n"),
        call("read", file_path="../outside-existing.txt"),
        call("multi_edit", file_path="../outside-existing.txt", edits=edits),
        call("edit", file_path=str(existing), old_string="keep", new_string="lost"),
        call("write", file_path=".dsh/settings.toml", content='[permissions]\nmode = "bypass"\n'),
        call("write", file_path="inside.txt", content="fine\n"),  # the control
    ]
    fake_llm.add(*attempts, Reply(text="Tried everything."))
    dsh.environment["HOME"] = str(fake_home)

    done = await dsh.run("-p", "escape the project", "--permission-mode", "accept-edits")

    assert done.code == 0, done.stderr
    assert (project / "inside.txt").read_text() == "fine\n"  # writes work: not vacuous
    assert snapshot(root, skip=project) == before, "a file outside the project changed"
    # The sandbox makes an empty .dsh (read-only inside it) when it starts: nothing in it.
    assert not (project / ".dsh").exists() or not any((project / ".dsh").iterdir())
    events = await dsh.checked_events()
    results = {e.data.message.result.tool_call_id: e.data for e in of_type(events, "tool/result")}
    calls = [e.data for e in of_type(events, "tool/call")]
    refused = [c for c in calls if results[c.call_id].error is not None]
    refused_names = sorted(c.name for c in refused)
    assert refused_names == sorted(["write"] * 8 + ["edit", "edit", "multi_edit"]), [
        (c.name, c.arguments, results[c.call_id].error) for c in calls
    ]
    for refusal in refused:
        result = results[refusal.call_id]
        assert result.error is not None
        assert result.error.code == "DENIED", (refusal.arguments, result.error)
    reasons = [e.data.reason for e in of_type(events, "approval/requested")]
    assert sum("writes outside the working directory" in r for r in reasons) == 10, reasons
    assert sum("dsh's own settings" in r for r in reasons) == 1, reasons


def snapshot(root: Path, *, skip: Path) -> dict[str, bytes | str]:
    """Every file and link under ``root`` but the project: content, or a link's target."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        if path == skip or skip in path.parents or "home" in path.relative_to(root).parts[:1]:
            continue
        if path.is_symlink():
            out[str(path)] = f"-> {path.readlink()}"
        elif path.is_file():
            out[str(path)] = path.read_bytes()
        else:
            out[str(path)] = "dir"
    return out


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("grep", {"pattern": "--pre=touch", "path": "."}),
        ("grep", {"pattern": "-e", "include": "--pre=touch"}),
        ("glob", {"pattern": "--pre=touch"}),
        ("glob", {"pattern": "*.txt", "path": "--pre=touch"}),
    ],
)
async def test_search_patterns_cannot_become_rg_options(
    tmp_path: Path, tool: str, arguments: dict[str, Any]
) -> None:
    # rg --pre runs a command on every file it searches; a model's pattern must never
    # be read as that option (the search tools are read-only, so nobody is asked).
    fs = Fs(tmp_path)
    (fs.cwd / "a.txt").write_text("some text\n")
    marker = fs.cwd / "pwned"
    runner = fs.cwd / "touch"
    runner.write_text(f'#!/bin/sh\ntouch {marker}\ncat "$1"\n')
    runner.chmod(0o755)
    with contextlib.suppress(ToolError):  # a refusal is fine; running something is not
        await asyncio.wait_for(fs.call(tool, **arguments), 30)
    assert not marker.exists(), f"{tool} {arguments} ran a command"


@pytest.mark.parametrize("mode", ["default", "accept-edits"])
@pytest.mark.parametrize(
    "where", [".dsh/settings.toml", "sub/.dsh/settings.toml", "HOME/settings.toml"]
)
def test_dsh_configuration_is_asked_whatever_the_rules_and_grants_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, where: str
) -> None:
    from dsh.policy.permissions import Rule, assess
    from dsh.tools import Action, ToolDefinition

    home = tmp_path / "work" / ".dsh-home"  # a $DSH_HOME inside the working directory
    monkeypatch.setenv("DSH_HOME", str(home))
    cwd = tmp_path / "work"
    path = (cwd / where.replace("HOME", ".dsh-home")).resolve()
    tool = ToolDefinition(name="write", description="", arguments=BaseModel, execute=_never)
    action = Action(risk="write", summary=f"write {where}", paths=(path,))
    everything = [Rule.parse("edit"), Rule.parse("write")]
    verdict = assess(mode, tool, action, cwd, allow=everything, granted=everything)  # type: ignore[arg-type]
    assert verdict.verdict == "ask"
    assert not verdict.grantable
    assert assess("bypass", tool, action, cwd).verdict == "allow"  # bypass is bypass
    plain = Action(risk="write", summary="write src/app.py", paths=(cwd / "src" / "app.py",))
    assert assess(mode, tool, plain, cwd, allow=everything).verdict == "allow"


async def _never(arguments: Any, context: Any) -> str:
    raise AssertionError("not run")
