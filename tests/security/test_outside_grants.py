""" "This session" on a write outside the project grants what the dialog says: that
folder (or, where the folder is too wide to hand over, that file), matched where a
path really points. Each attack below tries to ride on such a grant and must still be
asked or refused (issue 36)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from dsh.policy.permissions import Rule, assess, describe_grant, session_rules
from dsh.tools import Action, ToolDefinition


class Args(BaseModel):
    pass


async def nothing(args: Args, context: object) -> str:
    return ""


WRITE = ToolDefinition(name="write", description="", arguments=Args, execute=nothing)


def write(path: Path) -> Action:
    return Action(risk="write", summary=f"write {path}", paths=(path,))


def granted_for(path: Path, cwd: Path) -> list[Rule]:
    rules = session_rules(WRITE, write(path), cwd)
    assert rules is not None
    return rules


def verdict(path: Path, cwd: Path, granted: list[Rule], **rules: list[Rule]) -> str:
    return assess("default", WRITE, write(path), cwd, granted=granted, **rules).verdict


def test_the_grant_is_the_folder_and_says_so(tmp_path: Path) -> None:
    project, out = tmp_path / "project", tmp_path / "out"
    project.mkdir()
    out.mkdir()
    [rule] = granted_for(out / "a.txt", project)
    assert rule == Rule("edit", f"{out.resolve()}/**")
    assert describe_grant([rule], commands=False) == (
        f"edits to files in {out.resolve()}/ and its subfolders"
    )
    assert verdict(out / "a.txt", project, [rule]) == "allow"
    assert verdict(out / "new" / "deeper" / "b.txt", project, [rule]) == "allow"
    # Inside the project nothing changes: a write there is granted as before.
    assert granted_for(project / "x.txt", project) == [Rule("edit")]


def test_writes_elsewhere_are_still_asked(tmp_path: Path) -> None:
    project, out = tmp_path / "project", tmp_path / "out"
    for folder in (project, out, tmp_path / "outside", tmp_path / "elsewhere"):
        folder.mkdir()
    grant = granted_for(out / "a.txt", project)
    assert verdict(tmp_path / "outside" / "x", project, grant) == "ask"  # a longer name
    assert verdict(tmp_path / "elsewhere" / "x", project, grant) == "ask"
    assert verdict(out / ".." / "elsewhere" / "x", project, grant) == "ask"  # climbing out
    assert verdict(tmp_path / "x", project, grant) == "ask"  # the folder above


def test_a_link_in_the_granted_folder_is_matched_where_it_points(tmp_path: Path) -> None:
    project, out, target = tmp_path / "project", tmp_path / "out", tmp_path / "target"
    for folder in (project, out, target):
        folder.mkdir()
    grant = granted_for(out / "a.txt", project)
    (out / "link").symlink_to(target)
    (out / "file-link").symlink_to(target / "victim.txt")
    assert verdict(out / "link" / "x.txt", project, grant) == "ask"
    assert verdict(out / "file-link", project, grant) == "ask"


def test_protected_and_denied_paths_in_the_granted_folder_are_not_covered(
    tmp_path: Path,
) -> None:
    project, out = tmp_path / "project", tmp_path / "out"
    project.mkdir()
    out.mkdir()
    grant = granted_for(out / "a.txt", project)
    protected = assess("default", WRITE, write(out / ".git" / "config"), project, granted=grant)
    assert protected.verdict == "ask"
    assert protected.grantable is False
    dsh_folder = assess(
        "default", WRITE, write(out / ".dsh" / "settings.toml"), project, granted=grant
    )
    assert dsh_folder.verdict == "ask"
    deny = [Rule("edit", f"{out.resolve()}/secret*")]
    assert verdict(out / "secret.txt", project, grant, deny=deny) == "deny"
    read_only = assess("read-only", WRITE, write(out / "a.txt"), project, granted=grant)
    assert read_only.verdict == "deny"


def test_a_folder_too_wide_to_hand_over_grants_the_file_alone(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    # A folder holding the project: only the file.
    [beside] = granted_for(tmp_path / "notes.txt", project)
    assert beside == Rule("edit", str((tmp_path / "notes.txt").resolve()))
    assert describe_grant([beside], commands=False) == f"edits to {beside.pattern}"
    assert verdict(tmp_path / "notes.txt", project, [beside]) == "allow"
    assert verdict(tmp_path / "other.txt", project, [beside]) == "ask"
    # A top-level folder (/tmp) and the home folder: only the file.
    [top] = granted_for(Path("/tmp/dsh-grant-probe.txt"), project)
    assert top == Rule("edit", str(Path("/tmp/dsh-grant-probe.txt").resolve()))
    home = Path(os.path.expanduser("~")).resolve()
    [in_home] = granted_for(home / "notes.txt", project)
    assert in_home == Rule("edit", str(home / "notes.txt"))


def test_a_folder_named_like_a_pattern_grants_only_itself(tmp_path: Path) -> None:
    project, starred, lookalike = tmp_path / "project", tmp_path / "a*b", tmp_path / "aXXb"
    for folder in (project, starred, lookalike):
        folder.mkdir()
    grant = granted_for(starred / "x.txt", project)
    assert verdict(starred / "y.txt", project, grant) == "allow"
    assert verdict(lookalike / "y.txt", project, grant) == "ask"


def test_an_older_grant_of_edit_never_covered_writes_outside(tmp_path: Path) -> None:
    project, out = tmp_path / "project", tmp_path / "out"
    project.mkdir()
    out.mkdir()
    assert verdict(out / "a.txt", project, [Rule("edit")]) == "ask"
    assert verdict(out / "a.txt", project, [Rule("edit", "**")]) == "ask"
    assert verdict(out / "a.txt", project, [Rule("edit", "../out/**")]) == "ask"
