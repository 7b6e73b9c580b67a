"""Keeping servers in step with the file tools' edits, and telling the model what its
edit broke (or fixed).

A post hook on every successful ``write``, ``edit`` and ``multi_edit`` (known by name
and their ``file_path`` argument: plugins do not import each other) sends the file's
new text (``didChange``, or ``didOpen``) and ``didSave`` to each running server for
its language, starting one first when none runs (``start_on_edit``, waiting at most
``edit_start_wait_s``: the first edit of a session reports too). With
``diagnostics_after_edit``, it then waits (at most ``edit_diagnostics_wait_s``) for
the server's report on the new version and appends it to the edit's result:

- errors and warnings: ``Diagnostics for <path>:`` and one line each;
- none, after the file had errors or warnings: ``Diagnostics for <path>: none``, so the
  model hears that its fix worked;
- none, and none before: nothing (a clean edit stays quiet), and nothing either when
  no report came in time.

Nothing here can fail an edit: any trouble with a server leaves the result as it was.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from dsh.tools import Amend, CallOutcome, PostHook, ToolContext, ToolDefinition, ToolError
from dsh.tools.files import display_path, resolve
from dsh_plugins.lsp import render, results
from dsh_plugins.lsp.diagnostics import Published
from dsh_plugins.lsp.files import read_source
from dsh_plugins.lsp.positions import split_lines
from dsh_plugins.lsp.server import LanguageServer
from dsh_plugins.lsp.service import LspService

EDIT_TOOLS = frozenset({"write", "edit", "multi_edit"})
SHOWN_SEVERITIES = (None, 1, 2)
"""Errors and warnings (and reports without a severity); info and hints are left to
the ``diagnostics`` operation."""

_log = logging.getLogger("dsh.plugins.lsp")


def edit_hook(service: LspService) -> PostHook:
    async def hook(
        tool: ToolDefinition, arguments: Any, outcome: CallOutcome, context: ToolContext
    ) -> Amend | None:
        output = outcome.output
        if (
            tool.name not in EDIT_TOOLS
            or output is None
            or output.is_error
            or outcome.error_code is not None
        ):
            return None
        file_path = getattr(arguments, "file_path", None)
        if not isinstance(file_path, str) or not file_path:
            return None
        try:
            text = await after_edit(service, file_path, context.cwd)
        except Exception:
            _log.exception("keeping the language servers in step with %s failed", file_path)
            return None
        return Amend(append=text) if text else None

    return hook


async def after_edit(service: LspService, file_path: str, cwd: Path) -> str | None:
    """Send the edited file to the servers of its language (the first one started if
    none runs and ``start_on_edit``); the diagnostics text to append, if any (see the
    module docstring)."""
    config = service.config
    language = service.catalog.server_name_or_none(Path(file_path))
    if language is None:
        return None  # no server is for such a file: answered without touching the disk
    if not service.running(language):
        if not (config.start_on_edit and config.diagnostics_after_edit):
            return None
        try:
            started = await asyncio.wait_for(
                asyncio.shield(service.starting(language, cwd)), config.edit_start_wait_s
            )
        except TimeoutError:
            return None  # it goes on starting: the next edit hears from it
        if started is None:
            return None
    path = (await asyncio.to_thread(resolve, file_path, cwd)).real
    name = service.catalog.server_name_or_none(path)
    servers = service.running(name) if name is not None else []
    if not servers:
        return None
    shown = display_path(path, cwd)
    try:
        source = await asyncio.to_thread(read_source, path, shown)
    except ToolError:
        await service.forget(path)
        return None
    root = await service.workspace(cwd)
    watched = next((s for s in servers if s.root == root), servers[0])
    before = watched.diagnostics.get(path)
    seq = watched.diagnostics.seq
    version: int | None = None
    for server in servers:
        try:
            sent, _ = await service.open(server, source)
            await server.save_document(path)
        except ToolError as error:  # it crashed meanwhile: the next lsp call restarts it
            _log.info("could not sync %s to the %s: %s", shown, server.label, error.message)
            continue
        if server is watched:
            version = sent
    if version is None or not service.config.diagnostics_after_edit:
        return None
    entry = await watched.diagnostics.wait(
        path, after=seq, version=version, within=service.config.edit_diagnostics_wait_s
    )
    if entry is None:
        return None
    return _summary(watched, shown, source.text, before, entry)


def _summary(
    server: LanguageServer, shown: str, text: str, before: Published | None, entry: Published
) -> str | None:
    items = [d for d in results.diagnostics(entry.items) if d.severity in SHOWN_SEVERITIES]
    if items:
        lines = render.diagnostics(shown, items, split_lines(text), server.diagnostic_encoding)
        return f"Diagnostics for {shown}:\n" + "\n".join(lines)
    had = before is not None and any(
        d.severity in SHOWN_SEVERITIES for d in results.diagnostics(before.items)
    )
    return f"Diagnostics for {shown}: none" if had else None
