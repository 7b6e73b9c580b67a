"""The ``read`` tool on real files: windows, footers, limits, and what is not text."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from dsh.tools.files import resolve
from dsh_plugins.fs import read as read_module
from tests.plugins.fs_harness import Fs


@pytest.fixture
def fs(tmp_path: Path) -> Fs:
    return Fs(tmp_path)


def numbered(first: int, last: int, text: str = "line {}") -> str:
    return "\n".join(f"{n}: {text.format(n)}" for n in range(first, last + 1))


async def test_a_small_file_whole(fs: Fs) -> None:
    fs.file("src/app.py", "import os\n\nprint(os.name)\n")
    output = await fs.call("read", file_path="src/app.py")
    assert output.content == (
        "<path>src/app.py</path>\n<type>file</type>\n<content>\n"
        "1: import os\n2: \n3: print(os.name)\n\n"
        "(End of file: 3 lines in total.)\n</content>"
    )
    assert output.meta == {
        "path": "src/app.py",
        "file": str(fs.cwd / "src" / "app.py"),
        "offset": 1,
        "lines": 3,
        "total_lines": 3,
        "lang": "python",
    }


async def test_absolute_paths_and_paths_outside_the_workspace(fs: Fs) -> None:
    inside = fs.file("notes.txt", "in\n")
    outside = fs.root / "elsewhere.txt"
    outside.write_text("out")
    assert "<path>notes.txt</path>" in await fs.text("read", file_path=str(inside))
    text = await fs.text("read", file_path="../elsewhere.txt")
    assert f"<path>{outside}</path>" in text
    assert "1: out\n" in text


async def test_windows_and_their_footers(fs: Fs) -> None:
    fs.file("long.txt", "".join(f"line {n}\n" for n in range(1, 5001)))

    first = await fs.text("read", file_path="long.txt")
    assert numbered(1, 2000) in first
    assert "2001: " not in first
    assert "(Showing lines 1-2000 of 5000. Use offset=2001 to read more.)" in first

    middle = await fs.text("read", file_path="long.txt", offset=2500, limit=3)
    assert numbered(2500, 2502) + "\n\n(Showing lines 2500-2502 of 5000. Use offset=2503" in middle

    last = await fs.text("read", file_path="long.txt", offset=4999, limit=50)
    assert numbered(4999, 5000) + "\n\n(End of file: 5000 lines in total.)" in last

    # Asking for more than the maximum reads the maximum.
    capped = await fs.call("read", file_path="long.txt", offset=3001, limit=5000)
    assert capped.meta["lines"] == 2000


async def test_a_last_line_without_newline_counts(fs: Fs) -> None:
    fs.file("a.txt", "one\ntwo")
    text = await fs.text("read", file_path="a.txt", limit=1)
    assert "(Showing lines 1-1 of 2. Use offset=2 to read more.)" in text


async def test_the_byte_cap_stops_early_with_the_next_offset(fs: Fs) -> None:
    fs.file("wide.txt", "".join(f"{n:05d} {'x' * 94}\n" for n in range(1, 2001)))
    output = await fs.call("read", file_path="wide.txt")
    text = output.content
    assert isinstance(text, str)
    shown = output.meta["lines"]
    assert 400 < shown < 2000
    assert len(text.encode()) <= 50 * 1024 + 300
    assert (
        f"(Output capped at 50 KiB; showing lines 1-{shown} of 2000. "
        f"Use offset={shown + 1} to read more.)"
    ) in text
    follow = await fs.call("read", file_path="wide.txt", offset=shown + 1)
    assert follow.content.startswith(  # type: ignore[union-attr]
        f"<path>wide.txt</path>\n<type>file</type>\n<content>\n{shown + 1}: {shown + 1:05d} "
    )


async def test_long_lines_are_cut(fs: Fs) -> None:
    fs.file("min.js", "a" * 5000 + "\n" + "é" * 300_000 + "\nafter\n")
    text = await fs.text("read", file_path="min.js")
    assert f"1: {'a' * 2000}… [line cut at 2000 characters]\n" in text
    assert f"2: {'é' * 2000}… [line cut at 2000 characters]\n" in text
    assert "3: after\n" in text
    assert "(End of file: 3 lines in total.)" in text


async def test_crlf_and_a_byte_order_mark_are_not_shown(fs: Fs) -> None:
    fs.file("win.txt", b"\xef\xbb\xbfone\r\ntwo\r\n")
    text = await fs.text("read", file_path="win.txt")
    assert "\n1: one\n2: two\n\n" in text
    assert "\r" not in text
    assert "\ufeff" not in text


async def test_offset_past_the_end(fs: Fs) -> None:
    fs.file("three.txt", "a\nb\nc\n")
    message = await fs.fails("read", "FS_NOT_FOUND", file_path="three.txt", offset=4)
    assert message == (
        "offset 4 is past the end of three.txt, which has 3 lines; use an offset from 1 to 3."
    )


async def test_an_empty_file(fs: Fs) -> None:
    fs.file("empty.txt")
    for offset in (1, 10):
        text = await fs.text("read", file_path="empty.txt", offset=offset)
        assert text.endswith("<content>\n(The file is empty.)\n</content>")


async def test_missing_files_suggest_near_names(fs: Fs) -> None:
    fs.file("src/config.py", "x = 1\n")
    message = await fs.fails("read", "FS_NOT_FOUND", file_path="src/confg.py")
    assert message == (
        "src/confg.py does not exist. Did you mean one of these, in the same directory: config.py?"
    )
    message = await fs.fails("read", "FS_NOT_FOUND", file_path="nowhere/x.py")
    assert "Its directory does not exist either" in message


async def test_a_directory_is_not_read(fs: Fs) -> None:
    (fs.cwd / "pkg").mkdir()
    message = await fs.fails("read", "FS_NOT_REGULAR_FILE", file_path="pkg")
    assert "use glob" in message


async def test_a_fifo_is_refused_without_blocking(fs: Fs) -> None:
    os.mkfifo(fs.cwd / "pipe")
    await fs.fails("read", "FS_NOT_REGULAR_FILE", file_path="pipe")


async def test_binary_files_are_refused(fs: Fs) -> None:
    fs.file("data.bin", b"head" + b"\x00" * 10 + b"tail")
    message = await fs.fails("read", "FS_NOT_TEXT", file_path="data.bin")
    assert message == (
        "data.bin is a binary file (18 bytes), not text; these tools read and edit text files only."
    )


async def test_images_are_named(fs: Fs) -> None:
    fs.file("logo.png", b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x01" * 2000)
    fs.file("photo.jpg", b"\xff\xd8\xff\xe0" + b"JFIF" * 10)
    fs.file("anim.gif", b"GIF89a" + b"\x01" * 10)
    assert "logo.png is a PNG image (2.0 KiB)" in await fs.fails(
        "read", "FS_NOT_TEXT", file_path="logo.png"
    )
    assert "is a JPEG image" in await fs.fails("read", "FS_NOT_TEXT", file_path="photo.jpg")
    assert "is a GIF image" in await fs.fails("read", "FS_NOT_TEXT", file_path="anim.gif")
    # A text file that merely starts like a BMP is still text.
    fs.file("bmw.txt", "BMW notes\n")
    assert "1: BMW notes" in await fs.text("read", file_path="bmw.txt")


async def test_non_utf8_text_is_shown_with_a_note(fs: Fs) -> None:
    fs.file("latin.txt", "café\nnaïve\n".encode("latin-1"))
    text = await fs.text("read", file_path="latin.txt")
    assert "1: caf\ufffd\n2: na\ufffdve\n" in text
    assert "(The file is not valid UTF-8: undecodable bytes are shown as U+FFFD." in text
    # Editing would write the replacement characters back: refused.
    message = await fs.fails(
        "edit", "FS_NOT_TEXT", file_path="latin.txt", old_string="caf", new_string="cafe"
    )
    assert "latin.txt is not valid UTF-8 (byte 3)" in message


async def test_the_schema_the_model_sees(fs: Fs) -> None:
    schema = fs.tools["read"].schema.parameters
    assert schema["required"] == ["file_path"]
    assert set(schema["properties"]) == {"file_path", "offset", "limit"}
    assert schema["properties"]["limit"] == {
        "default": 2000,
        "description": "How many lines to read, at most 2000 (the default).",
        "type": "integer",
    }
    assert fs.tools["read"].read_only
    assert fs.tools["read"].kind == "read"
    assert not fs.tools["read"].spill_output
    # An explicit null is the default; a zero offset is an error the model can fix.
    assert fs.arguments("read", {"file_path": "a", "offset": None}).offset == 1
    with pytest.raises(ValueError, match="offset must be 1 or more"):
        fs.arguments("read", {"file_path": "a", "offset": 0})
    with pytest.raises(ValueError, match="file_path must not be empty"):
        fs.arguments("read", {"file_path": "  "})


def test_windows_across_block_boundaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines are skipped and counted in blocks; tiny blocks put every boundary case in
    reach of a few hundred random files."""
    monkeypatch.setattr(read_module, "COUNT_BLOCK", 7)
    rng = random.Random(7)
    path = tmp_path / "f.txt"
    for _ in range(400):
        lines = ["x" * rng.randint(0, 9) for _ in range(rng.randint(0, 12))]
        data = "\n".join(lines) + rng.choice(["", "\n"])
        path.write_text(data)
        expected = data.split("\n")
        if expected[-1] == "":
            expected.pop()
        offset, limit = rng.randint(1, 15), rng.randint(1, 5)
        window = read_module.read_window(resolve("f.txt", tmp_path), offset, limit)
        assert window.total == len(expected), (data, offset)
        last = min(len(expected), offset + limit - 1)
        assert window.rows == [f"{n}: {expected[n - 1]}" for n in range(offset, last + 1)]
