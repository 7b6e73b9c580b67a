"""AGENTS.md discovery in real temporary folders, loaded as dsh loads plugins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh.kernel import Candidate, Context, PluginHost, PluginStatus
from dsh.prompt import PromptContext, PromptService
from dsh.services import PROMPT
from dsh_plugins.agents_md import PREAMBLE, Instructions, within_budget
from dsh_plugins.agents_md import plugin as agents_md_plugin
from dsh_plugins.environment import plugin as environment_plugin


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "dsh-home"
    folder.mkdir()
    monkeypatch.setenv("DSH_HOME", str(folder))
    return folder


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    return root


async def instructions(cwd: Path, **config: Any) -> tuple[str, str, str] | None:
    root = Context()
    root.provide(PROMPT, PromptService(root))
    [record] = await PluginHost(root).load(
        [Candidate("agents-md", "test", plugin=agents_md_plugin)],
        configs={"agents-md": config},
    )
    assert record.status is PluginStatus.LOADED, record.error
    pc = PromptContext(agent=None, scope=None, cwd=cwd, provider="p", model="m")
    assembly = await root.get(PROMPT).assemble(pc)
    assert assembly.system == ""
    if not assembly.context:
        return None
    [entry] = assembly.context
    return entry


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def block(path: Path, kind: str, text: str) -> str:
    return f"Contents of {path} ({kind}):\n\n{text}"


async def test_nothing_to_read_gives_no_entry(home: Path, repo: Path) -> None:
    assert await instructions(repo) is None
    write(repo / "AGENTS.md", "  \n")  # blank files say nothing
    assert await instructions(repo) is None


async def test_the_root_file_from_a_nested_folder(home: Path, repo: Path) -> None:
    root_file = write(repo / "AGENTS.md", "Run the tests with pytest.\n")
    nested = repo / "src" / "pkg"
    nested.mkdir(parents=True)

    entry = await instructions(nested)
    assert entry is not None
    name, form, text = entry
    assert (name, form) == ("project-instructions", "instructions")
    assert text == (
        "<system-reminder>\n"
        f"{PREAMBLE}\n\n"
        f"{block(root_file, 'project instructions', 'Run the tests with pytest.')}\n"
        "</system-reminder>"
    )


async def test_every_level_least_specific_first(home: Path, repo: Path) -> None:
    user = write(home / "AGENTS.md", "user")
    root_file = write(repo / "AGENTS.md", "root")
    write(repo / "CLAUDE.md", "ignored: AGENTS.md wins in its folder")
    root_local = write(repo / "CLAUDE.local.md", "root local (claude)")
    src_claude = write(repo / "src" / "CLAUDE.md", "src (claude fallback)")
    src_local = write(repo / "src" / "AGENTS.local.md", "src local")
    write(repo / "src" / "CLAUDE.local.md", "ignored: AGENTS.local.md wins")
    write(repo / "src" / "other" / "AGENTS.md", "a sibling branch, not on the way to cwd")
    cwd = repo / "src" / "deep"
    deep = write(cwd / "AGENTS.md", "deep")
    write(repo.parent / "AGENTS.md", "above the repository root: not read")

    entry = await instructions(cwd)
    assert entry is not None
    text = entry[2]
    expected = [
        block(user, "the user's instructions for every project", "user"),
        block(root_file, "project instructions", "root"),
        block(root_local, "local instructions, not checked in", "root local (claude)"),
        block(src_claude, "project instructions", "src (claude fallback)"),
        block(src_local, "local instructions, not checked in", "src local"),
        block(deep, "project instructions", "deep"),
    ]
    assert (
        text == "<system-reminder>\n" + "\n\n".join([PREAMBLE, *expected]) + "\n</system-reminder>"
    )
    assert "ignored" not in text
    assert "sibling" not in text
    assert "above" not in text


async def test_without_a_repository_only_cwd_is_read(home: Path, tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "the parent: not a project root, so not read")
    cwd = tmp_path / "loose"
    here = write(cwd / "CLAUDE.md", "here")
    entry = await instructions(cwd)
    assert entry is not None
    assert block(here, "project instructions", "here") in entry[2]
    assert "parent" not in entry[2]


async def test_a_git_file_marks_the_root_too(home: Path, tmp_path: Path) -> None:
    worktree = tmp_path / "worktree"
    write(worktree / ".git", "gitdir: /elsewhere/.git/worktrees/w\n")
    root_file = write(worktree / "AGENTS.md", "worktree root")
    entry = await instructions(worktree / "a" / "b")
    assert entry is not None
    assert block(root_file, "project instructions", "worktree root") in entry[2]


async def test_the_users_file_alone(home: Path, tmp_path: Path) -> None:
    user = write(home / "AGENTS.md", "Always answer in French.")
    entry = await instructions(tmp_path)
    assert entry is not None
    assert (
        block(user, "the user's instructions for every project", "Always answer in French.")
        in (entry[2])
    )


async def test_the_budget_drops_the_least_specific_first(home: Path, repo: Path) -> None:
    user = write(home / "AGENTS.md", "u" * 300)
    root_file = write(repo / "AGENTS.md", "r" * 300)
    mid = write(repo / "mid" / "AGENTS.md", "m" * 300)
    cwd = repo / "mid" / "leaf"
    leaf = write(cwd / "AGENTS.md", "l" * 300)

    entry = await instructions(cwd, max_bytes=650)
    assert entry is not None
    text = entry[2]
    assert f"Left out to stay within the 650-byte budget (less specific): {user}, {root_file}" in (
        text
    )
    assert "m" * 300 in text
    assert "l" * 300 in text
    assert "u" * 300 not in text
    assert "r" * 300 not in text
    assert text.index(str(mid)) < text.index(str(leaf))

    everything = await instructions(cwd)  # default budget 40,000
    assert everything is not None
    assert "Left out" not in everything[2]
    assert "u" * 300 in everything[2]


async def test_a_most_specific_file_over_budget_is_cut(home: Path, repo: Path) -> None:
    write(repo / "AGENTS.md", "root")
    big = write(repo / "AGENTS.local.md", "é" * 100)  # 200 bytes
    entry = await instructions(repo, max_bytes=51)
    assert entry is not None
    text = entry[2]
    assert f"Contents of {big}" in text
    # Cut on a character boundary: 51 bytes hold 25 two-byte characters.
    assert "é" * 25 + "\n[cut to the first 51 of its 200 bytes]" in text
    assert "é" * 26 not in text
    assert "(less specific): " + str(repo / "AGENTS.md") in text


def test_within_budget_keeps_files_whole() -> None:
    files = [Instructions(Path(f"/{n}"), "k", "x" * size) for n, size in enumerate((5, 5, 5))]
    assert within_budget(files, 15) == (files, [])
    assert within_budget(files, 14) == (files[1:], files[:1])
    assert within_budget(files, 10) == (files[1:], files[:1])
    assert within_budget(files, 9) == (files[2:], files[:2])
    assert within_budget([], 9) == ([], [])


async def test_an_invalid_config_is_refused() -> None:
    root = Context()
    root.provide(PROMPT, PromptService(root))
    [record] = await PluginHost(root).load(
        [Candidate("agents-md", "test", plugin=agents_md_plugin)],
        configs={"agents-md": {"max_bytes": 0}},
    )
    assert record.status is PluginStatus.FAILED
    assert "max_bytes" in (record.error or "")


async def test_both_plugins_load_together_and_need_the_prompt_service(
    home: Path, repo: Path
) -> None:
    write(repo / "AGENTS.md", "root")
    candidates = [
        Candidate("environment", "test", plugin=environment_plugin),
        Candidate("agents-md", "test", plugin=agents_md_plugin),
    ]

    bare = PluginHost(Context())
    records = await bare.load(candidates)
    assert [r.status for r in records] == [PluginStatus.SKIPPED, PluginStatus.SKIPPED]
    assert "needs service 'prompt'" in (records[0].error or "")

    root = Context()
    root.provide(PROMPT, PromptService(root))
    host = PluginHost(root)
    records = await host.load(candidates)
    assert [r.status for r in records] == [PluginStatus.LOADED, PluginStatus.LOADED]
    pc = PromptContext(agent=None, scope=None, cwd=repo, provider="p", model="m")
    assembly = await root.get(PROMPT).assemble(pc)
    assert assembly.system.startswith("Environment:\n")
    assert [name for name, _, _ in assembly.context] == ["project-instructions", "environment"]

    await host.unload_all()
    assembly = await root.get(PROMPT).assemble(pc)
    assert assembly.system == ""
    assert assembly.context == ()
