"""The editor's files: the ``workspace-files`` service of an editor session's agent,
when the client offers ``fs.readTextFile``/``fs.writeTextFile`` in ``initialize``.

Reads get the editor's text of a file, unsaved changes included
(``fs/read_text_file``); writes land in the editor (``fs/write_text_file``), which
shows and saves them as it does any change. What the client does not offer stays on
the disk. Only the transport is the editor's: the tools check a call (permissions,
protected paths, secret files, what the model last saw) before either request is
sent. Whatever goes wrong (a JSON-RPC error, no answer, the editor gone) is an
:class:`OSError` the tool turns into its usual error result.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from pathlib import Path

from acp.exceptions import RequestError
from acp.interfaces import Client
from acp.schema import ClientCapabilities

from dsh.tools.files import WorkspaceFiles

_log = logging.getLogger("dsh.acp")

ANSWER_TIMEOUT_S = 120.0
"""How long a request waits for the editor: a file it cannot produce must not hold
the turn for ever (a cancelled turn stops waiting at once)."""

NOT_FOUND = -32002
"""ACP's "resource not found" error code."""


def offered(capabilities: ClientCapabilities | None) -> tuple[bool, bool]:
    """Whether the client reads and writes text files for the agent."""
    fs = capabilities.fs if capabilities is not None else None
    if fs is None:
        return False, False
    return bool(fs.read_text_file), bool(fs.write_text_file)


class EditorFiles:
    """A :class:`~dsh.tools.files.WorkspaceFiles` over the client of one session."""

    on_disk = False

    def __init__(
        self, client: Client, session_id: str, *, reads: bool, writes: bool, disk: WorkspaceFiles
    ) -> None:
        self._client = client
        self._session_id = session_id
        self._reads = reads
        self._writes = writes
        self._disk = disk

    async def read_text(self, path: Path) -> str:
        if not self._reads:
            return await self._disk.read_text(path)
        try:
            async with asyncio.timeout(ANSWER_TIMEOUT_S):
                response = await self._client.read_text_file(
                    session_id=self._session_id, path=str(path)
                )
        except Exception as error:
            raise _os_error(error, "read", path) from None
        return response.content

    async def write_text(self, path: Path, text: str) -> None:
        if not self._writes:
            await self._disk.write_text(path, text)
            return
        try:
            async with asyncio.timeout(ANSWER_TIMEOUT_S):
                await self._client.write_text_file(
                    session_id=self._session_id, path=str(path), content=text
                )
        except Exception as error:
            raise _os_error(error, "write", path) from None


def _os_error(error: Exception, verb: str, path: Path) -> OSError:
    """The editor's failure as the OS error a tool reports."""
    _log.warning("fs/%s_text_file %s failed: %r", verb, path, error)
    if isinstance(error, RequestError):
        said = str(error)
        if isinstance(error.data, dict) and isinstance(error.data.get("details"), str):
            said = f"{said}: {error.data['details']}"
        if error.code == NOT_FOUND or _says_missing(said):
            return FileNotFoundError(errno.ENOENT, "no such file in the editor", str(path))
        return OSError(errno.EIO, f"the editor could not {verb} it ({said})", str(path))
    if isinstance(error, TimeoutError):
        return OSError(errno.ETIMEDOUT, f"the editor did not answer a {verb}", str(path))
    if isinstance(error, ConnectionError):
        return OSError(errno.EPIPE, "the editor is gone", str(path))
    return OSError(errno.EIO, f"the editor could not {verb} it ({error})", str(path))


def _says_missing(message: str) -> bool:
    # Clients answer a missing file with an internal error whose words say so.
    lowered = message.lower()
    return any(words in lowered for words in ("not found", "no such file", "does not exist"))
