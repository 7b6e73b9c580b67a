"""The fs tools through a stand-in for the disk (the ``workspace-files`` service on
the calling agent's context, as ``dsh acp`` provides an editor's buffers): reads get
its text, changes go to it, every check comes first, and what it cannot hold (images,
folders) stays the disk's."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dsh.kernel import Context
from dsh.services import WORKSPACE_FILES
from dsh.tools.files import DiskFiles
from tests.plugins.fs_harness import Fs

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


@dataclass
class Buffers:
    """Open buffers by absolute path; the disk for the rest; every request recorded."""

    texts: dict[str, str] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    on_disk: bool = False

    async def read_text(self, path: Path) -> str:
        self.calls.append(("read", str(path)))
        if str(path) in self.texts:
            return self.texts[str(path)]
        return await DiskFiles().read_text(path)

    async def write_text(self, path: Path, text: str) -> None:
        self.calls.append(("write", str(path)))
        self.texts[str(path)] = text


@pytest.fixture
def buffers() -> Buffers:
    return Buffers()


@pytest.fixture
def fs(tmp_path: Path, buffers: Buffers) -> Fs:
    services = Context(name="agent")
    services.provide(WORKSPACE_FILES, buffers)
    return Fs(tmp_path, services=services)


def key(fs: Fs, name: str) -> str:
    return str((fs.cwd / name).resolve())


async def test_a_change_is_planned_from_what_was_read_and_asks_nothing_first(
    fs: Fs, buffers: Buffers
) -> None:
    (fs.cwd / "a.txt").write_text("on disk\n")
    buffers.texts[key(fs, "a.txt")] = "one\r\ntwo\r\n"
    assert "2: two" in await fs.text("read", file_path="a.txt")
    buffers.calls.clear()
    action = await fs.describe("edit", file_path="a.txt", old_string="two", new_string="2")
    assert action.details is not None
    assert "+2" in action.details
    assert buffers.calls == []  # the approval's diff came from what the model read
    await fs.call(
        "multi_edit",
        file_path="a.txt",
        edits=[{"old_string": "one", "new_string": "1"}, {"old_string": "two", "new_string": "2"}],
    )
    assert buffers.texts[key(fs, "a.txt")] == "1\r\n2\r\n"  # its line endings kept
    assert buffers.calls == [("read", key(fs, "a.txt")), ("write", key(fs, "a.txt"))]
    assert (fs.cwd / "a.txt").read_text() == "on disk\n"


async def test_what_is_not_text_on_disk_is_read_from_the_disk(fs: Fs, buffers: Buffers) -> None:
    (fs.cwd / "img.png").write_bytes(PNG)
    (fs.cwd / "folder").mkdir()
    await fs.fails("read", "FS_NOT_TEXT", file_path="img.png")
    await fs.fails("read", "FS_NOT_REGULAR_FILE", file_path="folder")
    assert buffers.calls == []


async def test_a_write_of_a_file_read_on_the_disk_stays_on_the_disk(
    fs: Fs, buffers: Buffers
) -> None:
    (fs.cwd / "img.png").write_bytes(PNG)
    await fs.fails("read", "FS_NOT_TEXT", file_path="img.png")
    await fs.call("write", file_path="img.png", content="now text\n")
    assert (fs.cwd / "img.png").read_text() == "now text\n"
    assert buffers.calls == []


async def test_a_second_edit_follows_the_first_without_reading_again(
    fs: Fs, buffers: Buffers
) -> None:
    buffers.texts[key(fs, "b.py")] = "x = 1\n"
    await fs.call("read", file_path="b.py")
    await fs.call("edit", file_path="b.py", old_string="x = 1", new_string="x = 2")
    await fs.call("edit", file_path="b.py", old_string="x = 2", new_string="x = 3")
    assert buffers.texts[key(fs, "b.py")] == "x = 3\n"


async def test_dsh_keys_are_refused_before_the_stand_in_is_asked(
    fs: Fs, buffers: Buffers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "dsh-home"
    home.mkdir()
    monkeypatch.setenv("DSH_HOME", str(home))
    keys = home / "credentials.json"
    keys.write_text("{}")
    buffers.texts[str(keys)] = "{}"
    await fs.fails("read", "FS_REFUSED", file_path=str(keys))
    assert buffers.calls == []


async def test_the_disk_service_keeps_bytes_and_modes(tmp_path: Path) -> None:
    disk = DiskFiles()
    target = tmp_path / "run.sh"
    target.write_bytes(b"a\r\nb\n")
    os.chmod(target, 0o750)
    assert await disk.read_text(target) == "a\r\nb\n"
    await disk.write_text(target, "c\r\n")
    assert target.read_bytes() == b"c\r\n"
    assert target.stat().st_mode & 0o777 == 0o750
    await disk.write_text(tmp_path / "new" / "file.txt", "made\n")
    assert (tmp_path / "new" / "file.txt").read_text() == "made\n"
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["file.txt"]
    with pytest.raises(FileNotFoundError):
        await disk.read_text(tmp_path / "missing")
    (tmp_path / "latin1").write_bytes(b"caf\xe9\n")
    with pytest.raises(OSError, match="not valid UTF-8"):
        await disk.read_text(tmp_path / "latin1")
    with pytest.raises(OSError, match="not UTF-8 text"):
        await disk.write_text(tmp_path / "latin1", "caf\udce9\n")
    assert (tmp_path / "latin1").read_bytes() == b"caf\xe9\n"
