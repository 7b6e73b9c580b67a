"""The one reader of Markdown-definition folders (custom commands, agent profiles)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dsh_plugins._shared.definitions import Skipped, markdown_files, read_definition, scan


@dataclass(frozen=True)
class Note:
    name: str
    origin: str
    body: str


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def load(path: Path, parts: list[str], origin: str) -> Note | Skipped:
    read = read_definition(path, 1024)
    if isinstance(read, Skipped):
        return read
    fields, body = read
    return Note(fields.get("name") or "/".join(parts), origin, body.strip())


def test_folders_are_entered_only_as_deep_as_asked(tmp_path: Path) -> None:
    write(tmp_path / "top.md", "top")
    write(tmp_path / "a" / "one.md", "one")
    write(tmp_path / "a" / "b" / "two.md", "two")
    write(tmp_path / ".hidden" / "no.md", "no")
    write(tmp_path / ".no.md", "no")
    write(tmp_path / "notes.txt", "no")
    assert [parts for _, parts in markdown_files(tmp_path)] == [["top"]]
    assert [parts for _, parts in markdown_files(tmp_path, max_depth=1)] == [
        ["a", "one"],
        ["top"],
    ]
    assert [parts for _, parts in markdown_files(tmp_path, max_depth=2)] == [
        ["a", "b", "two"],
        ["a", "one"],
        ["top"],
    ]
    assert list(markdown_files(tmp_path / "missing")) == []


def test_a_later_folder_wins_and_each_file_left_out_says_why(tmp_path: Path) -> None:
    user, project = tmp_path / "user", tmp_path / "project"
    write(user / "same.md", "---\nname: same\n---\nthe user's")
    write(user / "only.md", "the user's alone")
    write(project / "same.md", "---\nname: same\n---\nthe project's")
    write(project / "big.md", "x" * 2048)
    write(project / "broken.md", "---\nname: broken\n")  # never closed
    (project / "binary.md").write_bytes(b"\xff\xfe")
    found, skipped = scan([("user", user), ("project", project)], load)
    assert found == {
        "only": Note("only", "user", "the user's alone"),
        "same": Note("same", "project", "the project's"),
    }
    reasons = {item.path.name: item.reason for item in skipped}
    assert reasons["big.md"] == "larger than 1 KB"
    assert reasons["binary.md"].startswith("cannot be read")
    assert set(reasons) == {"big.md", "binary.md", "broken.md"}
