"""AGENTS.md: the user's and the project's standing instructions, put in front of the model.

Read, least specific first: ``$DSH_HOME/AGENTS.md``; then, in each folder from the
repository root (the nearest ancestor of the working directory holding ``.git``, else
the working directory itself) down to the working directory, ``AGENTS.md`` (or, failing
that, ``CLAUDE.md``) and ``AGENTS.local.md`` (or ``CLAUDE.local.md``). They go in as one
context entry, so the loop enters them again only when a file changes.

Over the byte budget, the least specific files are left out first, and the model is
told which: the instructions nearest the work usually override the general ones.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, PositiveInt

from dsh.kernel import Context, Plugin
from dsh.paths import dsh_home
from dsh.prompt import PromptContext, per_workspace
from dsh.services import PROMPT
from dsh.tools.files import read_regular_file

ENTRY = "project-instructions"
PREAMBLE = (
    "These are the instructions of the user and of this project (AGENTS.md files), "
    "least specific first; follow them, and where they disagree the later ones win."
)


class Config(BaseModel):
    model_config = {"extra": "forbid"}

    max_bytes: PositiveInt = 40_000
    """Budget for the files' contents, in UTF-8 bytes."""


@dataclass(frozen=True)
class Instructions:
    path: Path
    kind: str
    text: str

    @property
    def size(self) -> int:
        return len(self.text.encode())


def project_root(cwd: Path) -> Path:
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():  # a file in worktrees and submodules
            return folder
    return cwd


def candidate_files(cwd: Path, home: Path) -> list[tuple[Path, str]]:
    """Every instruction file that exists, least specific first, with what it is."""
    cwd = cwd.absolute()
    found: list[tuple[Path, str]] = []
    user = home / "AGENTS.md"
    if user.is_file():
        found.append((user, "the user's instructions for every project"))
    root = project_root(cwd)
    folders = [cwd, *cwd.parents]
    chain = reversed(folders[: folders.index(root) + 1])
    for folder in chain:
        for names, kind in (
            (("AGENTS.md", "CLAUDE.md"), "project instructions"),
            (("AGENTS.local.md", "CLAUDE.local.md"), "local instructions, not checked in"),
        ):
            for name in names:
                path = folder / name
                if path.is_file():
                    found.append((path, kind))
                    break
    # $DSH_HOME may be inside the project: read each file once.
    unique: dict[Path, tuple[Path, str]] = {}
    for path, kind in found:
        unique.setdefault(path.resolve(), (path, kind))
    return list(unique.values())


def read_instructions(cwd: Path, home: Path) -> list[Instructions]:
    files: list[Instructions] = []
    for path, kind in candidate_files(cwd, home):
        try:
            # is_file() was checked, but the file may have been swapped for a pipe since.
            text = read_regular_file(path).decode("utf-8", errors="replace").strip()
        except OSError:
            continue  # unreadable (permissions, a race with a delete): as if absent
        if text:
            files.append(Instructions(path, kind, text))
    return files


def within_budget(
    files: list[Instructions], max_bytes: int
) -> tuple[list[Instructions], list[Instructions]]:
    """(kept, left out): the most specific files whole, dropping from the least specific.

    A most specific file that alone exceeds the budget is cut to it rather than lost.
    """
    start, used = len(files), 0
    while start > 0 and used + files[start - 1].size <= max_bytes:
        start -= 1
        used += files[start].size
    if start < len(files) or not files:
        return files[start:], files[:start]
    last = files[-1]
    cut = last.text.encode()[:max_bytes].decode(errors="ignore")
    note = f"[cut to the first {max_bytes} of its {last.size} bytes]"
    return [Instructions(last.path, last.kind, f"{cut}\n{note}")], files[:-1]


def render(files: list[Instructions], max_bytes: int) -> str | None:
    if not files:
        return None
    kept, left_out = within_budget(files, max_bytes)
    parts = [PREAMBLE]
    if left_out:
        names = ", ".join(str(f.path) for f in left_out)
        parts.append(
            f"Left out to stay within the {max_bytes}-byte budget (less specific): {names}"
        )
    parts.extend(f"Contents of {f.path} ({f.kind}):\n\n{f.text}" for f in kept)
    body = "\n\n".join(parts)
    return f"<system-reminder>\n{body}\n</system-reminder>"


def apply(ctx: Context, config: Config) -> None:
    async def project_instructions(pc: PromptContext) -> str | None:
        files = await asyncio.to_thread(read_instructions, pc.cwd, dsh_home())
        return render(files, config.max_bytes)

    # Read again only when the files may have changed (a new turn, a step after an edit
    # or a command), not at every step: each read is a walk up the folders.
    entry = per_workspace(project_instructions)
    ctx.get(PROMPT).context(ENTRY, 10, entry, form="instructions")


plugin = Plugin(
    name="agents-md",
    description="AGENTS.md and CLAUDE.md instructions from $DSH_HOME and the project",
    inject=(PROMPT,),
    config=Config,
    apply=apply,
)
