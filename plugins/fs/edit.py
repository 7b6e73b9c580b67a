"""The tools that change files: ``write``, ``edit`` and ``multi_edit``.

Each call is planned in memory first, checks included, so ``describe`` can show the
exact diff for approval without touching the disk; ``execute`` plans again under the
file's lock (the file may have changed while the user looked) and only then writes.

Where something stands in for the disk (an editor, :mod:`dsh_plugins.fs.workspace`), a
file the model read through it is planned from what the model read, checked against
what the stand-in holds once the call is allowed, and written through it; so is a new
file. The approval and every other check come before the stand-in is asked anything.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dsh.tools import Action, ClaudeCodeName, ToolContext, ToolDefinition, ToolOutput
from dsh.tools.files import Target, WorkspaceFiles, resolve
from dsh_plugins._shared.files import format_size, os_error, sniff
from dsh_plugins.fs.arguments import EditArguments, EditItem, MultiEditArguments, WriteArguments
from dsh_plugins.fs.changes import (
    Diff,
    apply_edits,
    decode_for_edit,
    too_large,
    unified_diff,
)
from dsh_plugins.fs.files import MAX_EDIT_BYTES, Current, load, refuse_secret, write_atomic
from dsh_plugins.fs.observed import FsState
from dsh_plugins.fs.present import change_presenters
from dsh_plugins.fs.workspace import as_current, stand_in, text_version

EDIT_VIEWS = change_presenters("Edit")
WRITE_VIEWS = change_presenters("Write")

WRITE_DESCRIPTION = """\
Create a file, or replace a file's whole content; missing parent directories are \
created. An existing file must have been read in this session first and must not \
have changed since (if it has, read it again). To change part of a file prefer edit: \
it sends less and cannot drop content by accident."""

EDIT_DESCRIPTION = """\
Replace an exact string in a text file. old_string must match the file exactly \
(whitespace and indentation included, without the `n: ` prefixes that read adds) and \
occur exactly once, unless replace_all is true. Line endings are compared as LF and \
the file keeps its own. Read the file in this session first; if it changed since, \
read it again. For several changes to one file use multi_edit."""

MULTI_EDIT_DESCRIPTION = """\
Make several edits to one text file in one call: applied in order, each to the result \
of the ones before, and all or nothing: if any edit fails, the file is left unchanged. \
Each edit follows edit's rules (exact match, unique unless replace_all). Read the file \
in this session first."""


@dataclass(frozen=True)
class Change:
    """A change to one file, ready to write."""

    target: Target
    data: bytes
    mode: int | None
    """The mode to keep; None for a new file."""
    created: bool
    diff: Diff
    version: str | None
    """The version the plan was made from (None: no file)."""
    replaced: int = 0
    """Occurrences replaced by edits."""
    over: str | None = None
    """What a write replaces when it could not be diffed (``"a binary file"``)."""
    files: WorkspaceFiles | None = None
    """What stands in for the disk and takes the change; None: the disk."""

    @property
    def unchanged(self) -> bool:
        return not self.created and not self.diff.text and self.over is None


def _write_plan(target: Target, current: Current | None, content: str) -> Change:
    before: str | None = None
    over: str | None = None
    if current is not None:
        # What cannot be shown as lines diffs as if empty, and the summary says so.
        before = ""
        if current.data is None:
            over = f"a file of {format_size(current.size)}"
        elif (kind := sniff(current.data)) is not None:
            over = kind
        else:
            before = current.data.decode("utf-8", errors="replace")
    return Change(
        target=target,
        data=content.encode("utf-8"),
        mode=current.mode if current is not None else None,
        created=current is None,
        diff=unified_diff(before, content, target.display),
        version=current.version if current is not None else None,
        over=over,
    )


def _edit_plan(target: Target, current: Current, edits: list[EditItem]) -> Change:
    if current.data is None:
        raise too_large(target, current.size, MAX_EDIT_BYTES)
    text = decode_for_edit(current.data, target)
    body, replaced = apply_edits(text.body, edits, target)
    return Change(
        target=target,
        data=text.encode(body),
        mode=current.mode,
        created=False,
        diff=unified_diff(text.body, body, target.display),
        version=current.version,
        replaced=replaced,
    )


async def _current(
    state: FsState, target: Target, session: str, files: WorkspaceFiles | None, *, fresh: bool
) -> tuple[Current | None, WorkspaceFiles | None]:
    """The file as a plan takes it, and the stand-in for the disk that takes the change
    (None: the disk). Through a stand-in, a file the model read through it is planned
    from what it read (``describe``: nothing is asked before the call is allowed) or,
    ``fresh``, from what the stand-in holds now; a file the disk lacks is created
    through it. Anything else (an image the model saw on the disk) stays the disk's."""
    if files is not None:
        seen = state.observations.text(session, target)
        if seen is not None:
            if not fresh:
                return as_current(seen), files
            try:
                return as_current(await files.read_text(target.real)), files
            except FileNotFoundError:
                return None, files
            except OSError as error:
                raise os_error(error, target) from None
    current = await asyncio.to_thread(load, target)
    return current, files if current is None else None


async def plan_write(
    state: FsState,
    target: Target,
    content: str,
    session: str,
    files: WorkspaceFiles | None = None,
    *,
    fresh: bool = False,
) -> Change:
    current, through = await _current(state, target, session, files, fresh=fresh)
    state.observations.check_write(session, target, current.version if current else None)
    change = await asyncio.to_thread(_write_plan, target, current, content)
    return replace(change, files=through)


async def plan_edit(
    state: FsState,
    target: Target,
    edits: list[EditItem],
    session: str,
    files: WorkspaceFiles | None = None,
    *,
    fresh: bool = False,
) -> Change:
    current, through = await _current(state, target, session, files, fresh=fresh)
    state.observations.check_edit(session, target, current.version if current else None)
    assert current is not None  # check_edit refuses a missing file
    change = await asyncio.to_thread(_edit_plan, target, current, edits)
    return replace(change, files=through)


def action(verb: str, change: Change) -> Action:
    target = change.target
    where = target.display
    if target.redirected:
        where += f" -> {target.real}"
    stats = f"+{change.diff.added}" if change.created else change.diff.stats
    if change.over is not None:
        stats += f", replacing {change.over}"
    return Action(
        risk="write",
        summary=f"{'create' if change.created else verb} {where} ({stats})",
        details=change.diff.text or None,
        paths=(target.real,),
    )


async def commit(state: FsState, change: Change, session: str, cwd: Path) -> None:
    if change.files is not None:
        await _commit_through(state, change, change.files, session, cwd)
        return
    version = change.version
    if not change.unchanged:
        version = await asyncio.to_thread(write_atomic, change.target, change.data, change.mode)
    state.observations.record(session, change.target, version)


async def _commit_through(
    state: FsState, change: Change, files: WorkspaceFiles, session: str, cwd: Path
) -> None:
    # The permission policy refused dsh's keys already; this holds without it.
    refuse_secret(change.target, cwd)
    text = change.data.decode("utf-8", errors="surrogatepass")
    if not change.unchanged:
        try:
            await files.write_text(change.target.real, text)
        except OSError as error:
            raise os_error(error, change.target) from None
    state.observations.record(session, change.target, text_version(text), text)


def meta(change: Change) -> dict[str, Any]:
    return {
        "path": change.target.display,
        "file": str(change.target.real),
        "diff": change.diff.text,
        "added": change.diff.added,
        "removed": change.diff.removed,
        "created": change.created,
    }


def _edits(arguments: EditArguments | MultiEditArguments) -> list[EditItem]:
    if isinstance(arguments, MultiEditArguments):
        return arguments.edits
    return [
        EditItem(
            old_string=arguments.old_string,
            new_string=arguments.new_string,
            replace_all=arguments.replace_all,
        )
    ]


def write_tool(state: FsState) -> ToolDefinition:
    async def plan(arguments: WriteArguments, context: ToolContext) -> Change:
        target = await asyncio.to_thread(resolve, arguments.file_path, context.cwd)
        files = stand_in(context)
        return await plan_write(state, target, arguments.content, context.session_id, files)

    async def describe(arguments: WriteArguments, context: ToolContext) -> Action:
        return action("write", await plan(arguments, context))

    async def execute(arguments: WriteArguments, context: ToolContext) -> ToolOutput:
        target = await asyncio.to_thread(resolve, arguments.file_path, context.cwd)
        files = stand_in(context)
        async with state.locks(target):
            change = await plan_write(
                state, target, arguments.content, context.session_id, files, fresh=True
            )
            await commit(state, change, context.session_id, context.cwd)
        if change.created:
            lines = arguments.content.count("\n") + (not arguments.content.endswith("\n"))
            said = f"Created file ({lines if arguments.content else 0} lines)."
        elif change.unchanged:
            said = "File unchanged: the content was already the same."
        else:
            said = f"Updated file ({change.diff.stats})."
        content = f"<path>{target.display}</path>\n<type>file</type>\n<content>\n{said}\n</content>"
        return ToolOutput(content=content, meta=meta(change))

    return ToolDefinition(
        name="write",
        description=WRITE_DESCRIPTION,
        arguments=WriteArguments,
        execute=execute,
        kind="edit",
        describe=describe,
        present_call=WRITE_VIEWS[0],
        present_result=WRITE_VIEWS[1],
        claude_code=ClaudeCodeName("Write"),
    )


def _edit_tool(
    state: FsState,
    name: str,
    description: str,
    arguments_model: type[Any],
    claude_code: ClaudeCodeName,
) -> ToolDefinition:
    async def describe(
        arguments: EditArguments | MultiEditArguments, context: ToolContext
    ) -> Action:
        target = await asyncio.to_thread(resolve, arguments.file_path, context.cwd)
        files = stand_in(context)
        change = await plan_edit(state, target, _edits(arguments), context.session_id, files)
        return action("edit", change)

    async def execute(
        arguments: EditArguments | MultiEditArguments, context: ToolContext
    ) -> ToolOutput:
        target = await asyncio.to_thread(resolve, arguments.file_path, context.cwd)
        edits = _edits(arguments)
        files = stand_in(context)
        async with state.locks(target):
            change = await plan_edit(state, target, edits, context.session_id, files, fresh=True)
            await commit(state, change, context.session_id, context.cwd)
        occurrences = f"{change.replaced} occurrence{'s' if change.replaced != 1 else ''}"
        if len(edits) > 1:
            done = f"applied {len(edits)} edits, replacing {occurrences}"
        else:
            done = f"replaced {occurrences}"
        said = f"Edited {target.display} ({change.diff.stats}): {done}."
        return ToolOutput(content=said, meta=meta(change))

    return ToolDefinition(
        name=name,
        description=description,
        arguments=arguments_model,
        execute=execute,
        kind="edit",
        describe=describe,
        present_call=EDIT_VIEWS[0],
        present_result=EDIT_VIEWS[1],
        claude_code=claude_code,
    )


def edit_tool(state: FsState) -> ToolDefinition:
    return _edit_tool(state, "edit", EDIT_DESCRIPTION, EditArguments, ClaudeCodeName("Edit"))


def multi_edit_tool(state: FsState) -> ToolDefinition:
    return _edit_tool(
        state,
        "multi_edit",
        MULTI_EDIT_DESCRIPTION,
        MultiEditArguments,
        ClaudeCodeName("MultiEdit"),
    )
