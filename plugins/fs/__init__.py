"""The filesystem tools: ``read``, ``write``, ``edit``, ``multi_edit``, ``glob``, ``grep``.

Paths are relative to the session's working directory. A file is changed only after
the session has read it and only if nobody changed it since; every change is written
whole to a temporary file and renamed over the target, and is described first (a
diff, the real path it lands on) so the permission policy can ask. glob and grep run
ripgrep.

Where a front end stands in for the disk (``dsh acp`` with an editor that offers its
files), read, write, edit and multi_edit go through it instead (``workspace``), after
the same checks; glob and grep search the disk.

Modules: ``files`` (paths, versions, text detection, atomic writes), ``observed``
(what each session has seen), ``arguments`` (what the model sends), ``read``,
``changes`` (edits and diffs in memory), ``edit`` (write, edit, multi_edit),
``workspace`` (a stand-in for the disk), ``ripgrep`` and ``search`` (glob, grep).
"""

from __future__ import annotations

from dsh.hooks import DOCTOR_CHECK
from dsh.kernel import Context, NoConfig, Plugin
from dsh.services import TOOLS
from dsh.tools import ToolDefinition
from dsh_plugins.fs.doctor import rg_check
from dsh_plugins.fs.edit import edit_tool, multi_edit_tool, write_tool
from dsh_plugins.fs.observed import FsState
from dsh_plugins.fs.read import read_tool
from dsh_plugins.fs.search import glob_tool, grep_tool

__all__ = ["FsState", "fs_tools", "plugin"]


def fs_tools(state: FsState | None = None) -> list[ToolDefinition]:
    """The six tools, sharing ``state`` (observations and locks); a fresh one if not given."""
    state = state or FsState()
    return [
        read_tool(state),
        write_tool(state),
        edit_tool(state),
        multi_edit_tool(state),
        glob_tool(),
        grep_tool(),
    ]


def apply(ctx: Context, config: NoConfig) -> None:
    for tool in fs_tools():
        ctx.get(TOOLS).register(tool.name, tool)
    ctx.on(DOCTOR_CHECK, rg_check)


plugin = Plugin(
    name="fs",
    description="File tools: read, write, edit, multi_edit, glob, grep",
    inject=(TOOLS,),
    apply=apply,
)
