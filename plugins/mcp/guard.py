"""No tool call reads or changes the MCP login tokens, and none hands one to the model.

The core refuses its own key files to every tool (``dsh.tools.protected``); the
tokens in ``$DSH_HOME/mcp-auth`` are this plugin's, so the plugin guards them with the
public tool hooks:

- ``tool/pre-execute``: a call whose files (``Action.reads``, ``Action.paths``, as
  named and with symlinks followed) or whose command's static words lie in that folder
  is denied before it runs or is asked about.
- ``tool/post-execute``: a result holding a stored token (a search of a wider folder,
  a command that reached the file some other way) is withheld: the model, and so the
  session log, gets an error instead. The tokens are read again at most once a second
  (at once after this process stored one): every tool call passes here, and the
  loop's budget per step is a millisecond.

Neither needs the SDK: the files are read as plain JSON.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dsh.llm import joined_text
from dsh.paths import dsh_home
from dsh.tools import Action, BlockResult, CallOutcome, Deny, ToolContext, ToolDefinition
from dsh.tools.protected import named_paths
from dsh_plugins.mcp.config import AUTH_DIR

WHY = "dsh's MCP login tokens are kept there: no tool may read or change them"
WITHHELD = "the result held an MCP login token of dsh (from $DSH_HOME/{folder}); it was withheld"
_MIN_TOKEN = 8
RECHECK_S = 1.0
_generation = 0


def stored_here() -> None:
    """This process stored a token: every watch reads the folder again at its next use."""
    global _generation
    _generation += 1


def tokens_folder() -> Path:
    return dsh_home() / AUTH_DIR


def _inside(paths: Sequence[Path]) -> Path | None:
    """The first of ``paths`` in the tokens folder, as named or resolved (blocking)."""
    folder = tokens_folder()
    folders = {folder, Path(os.path.realpath(folder))}
    for path in paths:
        for form in (path, Path(os.path.realpath(path))):
            if any(form == f or f in form.parents for f in folders):
                return path
    return None


async def before(
    tool: ToolDefinition, arguments: Any, action: Action, context: ToolContext
) -> Deny | None:
    paths = [*action.reads, *action.paths]
    if action.command:
        paths.extend(named_paths(action.command, action.workdir or context.cwd))
    if not paths:
        return None
    found = await asyncio.to_thread(_inside, paths)
    return Deny(f"{found}: {WHY}") if found is not None else None


class TokenWatch:
    """The stored tokens, read again when a file in the folder changed."""

    def __init__(self) -> None:
        self._key: tuple[tuple[str, int], ...] | None = None
        self._tokens: frozenset[str] = frozenset()
        self._checked = -math.inf
        self._generation = _generation

    async def current(self) -> frozenset[str]:
        now = time.monotonic()
        if now - self._checked >= RECHECK_S or self._generation != _generation:
            self._checked, self._generation = now, _generation
            return await asyncio.to_thread(self.tokens)
        return self._tokens

    def tokens(self) -> frozenset[str]:
        """Every access and refresh token stored (blocking)."""
        try:
            entries = sorted(os.scandir(tokens_folder()), key=lambda e: e.name)
            key = tuple((e.name, e.stat().st_mtime_ns) for e in entries if e.is_file())
        except OSError:
            return frozenset()
        if key != self._key:
            self._tokens = frozenset(_read_tokens(tokens_folder() / name for name, _ in key))
            self._key = key
        return self._tokens

    async def after(
        self, tool: ToolDefinition, arguments: Any, outcome: CallOutcome, context: ToolContext
    ) -> BlockResult | None:
        text = joined_text(outcome.message.result.content)
        if len(text) < _MIN_TOKEN:
            return None
        if any(token in text for token in await self.current()):
            return BlockResult(feedback=WITHHELD.format(folder=AUTH_DIR))
        return None


def _read_tokens(paths: Any) -> list[str]:
    found: list[str] = []
    for path in paths:
        try:
            tokens = json.loads(path.read_bytes()).get("tokens") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if not isinstance(tokens, dict):
            continue
        for key in ("access_token", "refresh_token"):
            value = tokens.get(key)
            if isinstance(value, str) and len(value) >= _MIN_TOKEN:
                found.append(value)
    return found
