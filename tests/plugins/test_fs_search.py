"""glob and grep over a real ripgrep, on real trees in temporary folders."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from dsh.tools import ToolError
from dsh_plugins.fs.ripgrep import run_rg
from dsh_plugins.fs.search import split_pattern
from tests.plugins.fs_harness import Fs, touch_at
from tests.support.waits import HANG_S


@pytest.fixture
def fs(tmp_path: Path) -> Fs:
    return Fs(tmp_path)


@pytest.fixture
def tree(fs: Fs) -> Fs:
    """A git-like project: sources, a hidden folder, an ignored folder, the .git store."""
    (fs.cwd / ".git").mkdir()
    fs.file(".git/HEAD", "ref: refs/heads/main\n")
    fs.file(".git/hooks/pre-commit.py", "TODO = 'in git'\n")
    fs.file(".gitignore", "build/\n*.log\n")
    fs.file("src/app.py", "def main():\n    # TODO: greet\n    print('hi')\n")
    fs.file("src/util/strings.py", "def shout(s):\n    return s.upper()  # TODO\n")
    fs.file("README.md", "# TODO list\n")
    fs.file(".github/workflow.py", "TODO = 'hidden'\n")
    fs.file("build/out.py", "TODO = 'ignored'\n")
    fs.file("debug.log", "TODO in a log\n")
    base = time.time() - 1000
    for age, name in enumerate(
        [
            "src/app.py",
            "README.md",
            "src/util/strings.py",
            ".github/workflow.py",
            "build/out.py",
            "debug.log",
            ".gitignore",
        ]
    ):
        touch_at(fs.cwd / name, base - age * 10)
    return fs


async def test_glob_lists_newest_first_with_hidden_and_ignored(tree: Fs) -> None:
    output = await tree.call("glob", pattern="*.py")
    assert output.content == "src/app.py\nsrc/util/strings.py\n.github/workflow.py\nbuild/out.py"
    assert output.meta == {
        "path": ".",
        "pattern": "*.py",
        "total": 4,
        "truncated": False,
        "files": ["src/app.py", "src/util/strings.py", ".github/workflow.py", "build/out.py"],
        "spill": None,
    }
    everything = await tree.text("glob", pattern="*")
    assert ".git/" not in everything
    assert "debug.log" in everything
    assert ".gitignore" in everything


async def test_glob_patterns_with_a_slash_are_anchored(tree: Fs) -> None:
    assert await tree.text("glob", pattern="src/*.py") == "src/app.py"
    assert await tree.text("glob", pattern="src/**/*.py") == "src/app.py\nsrc/util/strings.py"
    assert await tree.text("glob", pattern="util/*.py") == "No files found"
    assert await tree.text("glob", pattern="*.py", path="src/util") == "strings.py"
    absolute = f"{tree.cwd}/src/**/*.py"
    assert await tree.text("glob", pattern=absolute) == "app.py\nutil/strings.py"


def test_absolute_patterns_split_into_a_directory() -> None:
    assert split_pattern("/repo/src/*.py", ".") == ("/repo/src", "/*.py")
    assert split_pattern("/repo/src/a.py", ".") == ("/repo/src", "/a.py")
    assert split_pattern("/**/x", ".") == ("/", "/**/x")
    assert split_pattern("./src/*.py", "lib") == ("lib", "src/*.py")
    assert split_pattern("*.py", "lib") == ("lib", "*.py")


async def test_glob_caps_at_100_and_spills_the_rest(fs: Fs) -> None:
    base = time.time() - 10_000
    for n in range(130):
        touch_at(fs.file(f"many/f{n:03d}.txt", "x"), base + n)
    output = await fs.call("glob", pattern="*.txt")
    text = output.content
    assert isinstance(text, str)
    lines = text.split("\n")
    assert lines[:3] == ["many/f129.txt", "many/f128.txt", "many/f127.txt"]
    assert lines[99] == "many/f030.txt"
    [spill] = fs.spilled
    assert lines[100:] == [
        "",
        f"(100 of 130 files, newest first. The full list is in {spill}; read it, or narrow "
        "the pattern or path to see the rest.)",
    ]
    assert spill.read_text().split() == [f"many/f{n:03d}.txt" for n in range(129, -1, -1)]
    assert output.spilled
    assert output.meta["truncated"]
    assert output.meta["total"] == 130
    assert len(output.meta["files"]) == 100

    fs.spill_enabled = False
    text = await fs.text("glob", pattern="*.txt")
    assert text.endswith(
        "(100 of 130 files, newest first. Narrow the pattern or path to see the rest.)"
    )


async def test_glob_errors(tree: Fs) -> None:
    await tree.fails("glob", "FS_NOT_DIRECTORY", pattern="*", path="README.md")
    await tree.fails("glob", "FS_NOT_FOUND", pattern="*", path="nowhere")
    message = await tree.fails("glob", "SEARCH_INVALID_PATTERN", pattern="{a")
    assert "error parsing glob" in message


async def test_grep_honours_gitignore_and_groups_by_file(tree: Fs) -> None:
    output = await tree.call("grep", pattern="TODO")
    assert output.content == (
        "Found 3 matches\n"
        "README.md:\n  Line 1: # TODO list\n\n"
        "src/app.py:\n  Line 2:     # TODO: greet\n\n"
        "src/util/strings.py:\n  Line 2:     return s.upper()  # TODO"
    )
    assert output.meta == {
        "path": ".",
        "pattern": "TODO",
        "include": None,
        "total": 3,
        "files": 3,
        "truncated": False,
        "spill": None,
    }


async def test_grep_include_and_path(tree: Fs) -> None:
    assert await tree.text("grep", pattern="TODO", include="*.md") == (
        "Found 1 matches\nREADME.md:\n  Line 1: # TODO list"
    )
    assert await tree.text("grep", pattern=r"def \w+", path="src/util") == (
        "Found 1 matches\nsrc/util/strings.py:\n  Line 1: def shout(s):"
    )
    assert await tree.text("grep", pattern="(?i)PRINT", path="src/app.py") == (
        "Found 1 matches\nsrc/app.py:\n  Line 3:     print('hi')"
    )
    assert await tree.text("grep", pattern="nothing like this") == "No matches found"
    await tree.fails("grep", "FS_NOT_FOUND", pattern="x", path="missing")


async def test_grep_paths_outside_the_workspace_are_absolute(fs: Fs) -> None:
    other = fs.root / "other"
    other.mkdir()
    (other / "notes.txt").write_text("needle\n")
    assert await fs.text("grep", pattern="needle", path=str(other)) == (
        f"Found 1 matches\n{other}/notes.txt:\n  Line 1: needle"
    )


async def test_grep_invalid_pattern(tree: Fs) -> None:
    message = await tree.fails("grep", "SEARCH_INVALID_PATTERN", pattern="foo(")
    assert message.startswith("the pattern is not valid: regex parse error:")
    assert "escape literal" in message
    await tree.fails("grep", "SEARCH_INVALID_PATTERN", pattern="x", include="[")


async def test_grep_caps_at_250_and_spills_everything(fs: Fs) -> None:
    fs.file("a.txt", "".join(f"hit {n}\n" for n in range(200)))
    fs.file("b.txt", "".join(f"hit {n}\n" for n in range(100)))
    output = await fs.call("grep", pattern="hit")
    text = output.content
    assert isinstance(text, str)
    [spill] = fs.spilled
    assert text.startswith("Found 250 of 300 matches\na.txt:\n  Line 1: hit 0\n")
    assert "  Line 50: hit 49\n\n(All matches are in" in text
    assert "Line 51: hit 50" not in text.split("b.txt:")[1]
    assert text.endswith(
        f"(All matches are in {spill}; read it, or narrow the search with path, include or "
        "a more specific pattern.)"
    )
    full = spill.read_text()
    assert full.startswith("Found 300 matches\na.txt:\n")
    assert full.count("  Line ") == 300
    assert output.meta["truncated"]


async def test_grep_previews_are_bounded(fs: Fs) -> None:
    fs.file("wide.txt", "needle " + "é" * 3000 + "\n")
    fs.file("latin.txt", b"needle caf\xe9\n")
    text = await fs.text("grep", pattern="needle")
    lines = text.split("\n")
    assert "  Line 1: [line is not valid UTF-8]" in lines
    [long_row] = [line for line in lines if line.startswith("  Line 1: needle")]
    preview = long_row.removeprefix("  Line 1: ").removesuffix("… [line cut]")
    assert len(preview.encode()) <= 2000
    assert long_row.endswith("… [line cut]")


async def test_grep_is_killed_when_the_turn_is_cancelled(fs: Fs) -> None:
    os.mkfifo(fs.cwd / "pipe")  # rg blocks opening a pipe nobody writes to
    signal = asyncio.Event()
    tool = fs.tools["grep"]
    arguments = fs.arguments("grep", {"pattern": "x", "path": "pipe"})
    task = asyncio.ensure_future(tool.execute(arguments, fs.context(signal=signal)))
    await asyncio.sleep(0.2)
    assert not task.done()
    signal.set()
    with pytest.raises(ToolError) as caught:
        await asyncio.wait_for(task, HANG_S)  # rg itself would block for ever
    assert caught.value.code == "SEARCH_ABORTED"


async def test_a_slow_search_times_out(fs: Fs) -> None:
    os.mkfifo(fs.cwd / "pipe")
    with pytest.raises(ToolError) as caught:
        await run_rg(["-e", "x", "--", "pipe"], cwd=fs.cwd, signal=asyncio.Event(), budget_s=0.3)
    assert caught.value.code == "TOOL_TIMEOUT"
    assert "did not finish within 0.3 s" in caught.value.message


async def test_task_cancellation_stops_rg(fs: Fs) -> None:
    os.mkfifo(fs.cwd / "pipe")
    task = asyncio.ensure_future(
        run_rg(["-e", "x", "--", "pipe"], cwd=fs.cwd, signal=asyncio.Event())
    )
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_raw_output_overflow(fs: Fs) -> None:
    fs.file("big.txt", "match\n" * 5000)
    search = run_rg(
        ["--json", "-e", "match", "--", "big.txt"],
        cwd=fs.cwd,
        signal=asyncio.Event(),
        max_bytes=10_000,
    )
    with pytest.raises(ToolError) as caught:
        await asyncio.wait_for(search, HANG_S)  # once stuck for good when rg wrote on
    assert caught.value.code == "SEARCH_RAW_OUTPUT_OVERFLOW"


async def test_search_tools_are_read_only(fs: Fs) -> None:
    for name in ("glob", "grep"):
        tool = fs.tools[name]
        assert (tool.read_only, tool.kind) == (True, "search")
    assert fs.tools["grep"].schema.parameters["required"] == ["pattern"]
