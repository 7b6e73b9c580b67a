"""The replay file: one self-contained JSON document a bug report or a test can hold.

``dsh sessions export ID --format replay`` writes it; ``dsh replay FILE`` and the
pytest helper (:mod:`dsh.testing.replay`) read it. It holds:

- ``session``: the log, as the stored JSONL format's records (``header``, ``events``);
- ``workspace``: the project's files at the session's first checkpoint, where it has
  one (text as text, anything else as base64), for ``--tools live``;
- ``settings``: the ``settings.toml`` the replay runs with (empty when exported: the
  user's settings may hold what a report should not; a fixture writes its own).

Before it is written, every value dsh knows to be secret (the credential store's keys,
what ``dsh.held_secrets`` took from the environment, any other variable that looks
like a secret) is replaced by ``[secret]``, and the project folder and the home folder
by the placeholders ``<dsh:cwd>`` and ``<dsh:home>``: a replay compares paths of its
scratch folder as ``<dsh:cwd>``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from dsh.session import SessionEvent, SessionHeader
from dsh.session.checkpoint_events import CheckpointTaken
from dsh.session.jsonl import header_record, parse_jsonl

FORMAT = "dsh-replay"
CWD = "<dsh:cwd>"
HOME = "<dsh:home>"
SECRET = "[secret]"
MIN_SECRET = 8
"""Shorter values are not replaced: a short word would be found everywhere."""


class ReplayFileError(ValueError):
    """A file that is not a replay file dsh can read, and why."""


class WorkspaceFile(BaseModel):
    model_config = {"extra": "forbid"}

    text: str | None = None
    base64: str | None = None
    mode: int | None = None

    def data(self) -> bytes:
        if self.text is not None:
            return self.text.encode()
        return base64.b64decode(self.base64 or "")


class SessionRecords(BaseModel):
    model_config = {"extra": "forbid"}

    header: dict[str, Any]
    events: list[dict[str, Any]]


class ReplayFile(BaseModel):
    model_config = {"extra": "forbid"}

    format: Literal["dsh-replay"]
    version: Literal[1] = 1
    session: SessionRecords
    workspace: dict[str, WorkspaceFile] | None = None
    settings: str = ""
    description: str = ""
    """What the session shows (a fixture's purpose, a bug report's words)."""

    def loaded(self, location: str) -> tuple[SessionHeader, list[SessionEvent]]:
        """The log, read as a stored session is (the plugins' vocabulary registered)."""
        lines = [json.dumps(self.session.header), *map(json.dumps, self.session.events)]
        loaded, _ = parse_jsonl(("\n".join(lines) + "\n").encode(), location)
        return loaded.header, loaded.events

    def files(self) -> dict[str, bytes] | None:
        if self.workspace is None:
            return None
        return {name: entry.data() for name, entry in self.workspace.items()}


def read_replay_file(path: Path) -> ReplayFile:
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ReplayFileError(f"{path}: cannot be read ({error.strerror})") from None
    try:
        return ReplayFile.model_validate_json(raw)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the document"
        raise ReplayFileError(f"{path}: not a dsh replay file ({where}: {first['msg']})") from None


def is_replay_file(path: Path) -> bool:
    """Whether ``path`` names a file (rather than a session id)."""
    return path.suffix in (".json", ".jsonl") or os.sep in str(path) or path.is_file()


def build_replay_file(
    header: SessionHeader,
    events: Sequence[SessionEvent],
    *,
    workspace: Mapping[str, bytes] | None,
    secrets: Iterable[str],
    home: str | None = None,
    settings: str = "",
    description: str = "",
) -> str:
    """The replay file's text, redacted."""
    records = [event.to_dict() for event in events]
    _join_split_deltas(records)
    document: dict[str, Any] = {
        "format": FORMAT,
        "version": 1,
        "description": description,
        "session": {"header": header_record(header), "events": records},
        "workspace": _workspace(workspace) if workspace is not None else None,
        "settings": settings,
    }
    text = json.dumps(document, ensure_ascii=False, indent=1)
    hidden = [*secrets, *settings_secrets(settings)]
    return redact(text, secrets=hidden, cwd=header.cwd, home=home or str(Path.home()))


_DELTA_TEXT = {"text-delta": "text", "reasoning-delta": "text", "tool-call-delta": "argumentsDelta"}


def _join_split_deltas(records: list[dict[str, Any]]) -> None:
    """Each run of one block's deltas with its text in the run's first delta and the
    others empty: a path or a key cut across two deltas is whole for :func:`redact`,
    and the events keep their seqs (other events refer to them)."""
    run: list[dict[str, Any]] = []

    def close() -> None:
        if len(run) > 1:
            field = _DELTA_TEXT[run[0]["type"]]
            run[0][field] = "".join(chunk.get(field, "") for chunk in run)
            for chunk in run[1:]:
                chunk[field] = ""
        run.clear()

    for record in records:
        chunk = record["data"].get("chunk") if record["type"] == "assistant/chunk" else None
        if not isinstance(chunk, dict) or chunk.get("type") not in _DELTA_TEXT:
            close()
            continue
        if run and (run[0]["type"], run[0].get("index")) != (chunk["type"], chunk.get("index")):
            close()
        run.append(chunk)
    close()


def redact(text: str, *, secrets: Iterable[str], cwd: str | None, home: str | None) -> str:
    """``text`` (JSON) with secrets and the user's folders replaced."""
    for value in sorted({s for s in secrets if len(s) >= MIN_SECRET}, key=len, reverse=True):
        text = text.replace(_escaped(value), SECRET)
    for folder, placeholder in ((cwd, CWD), (home, HOME)):
        if folder and folder != "/":
            text = text.replace(_escaped(folder), placeholder)
    return text


def _escaped(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)[1:-1]


def _workspace(files: Mapping[str, bytes]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in sorted(files):
        data = files[name]
        try:
            out[name] = {"text": data.decode()}
        except UnicodeDecodeError:
            out[name] = {"base64": base64.b64encode(data).decode()}
    return out


def known_secrets(home: Path, cwd: Path) -> list[str]:
    """Every secret value this process could hand out: the credential store's, the
    variables dsh took out of its environment, and any variable that looks secret."""
    from dsh import held_secrets
    from dsh.credentials import CredentialStore

    values = [secret.reveal() for secret in CredentialStore(home, cwd).secrets()]
    for name, value in held_secrets.environment().items():
        if name in held_secrets.held_names() or held_secrets.looks_secret(name, value):
            values.append(value)
    return values


def settings_secrets(text: str) -> list[str]:
    """The values in a ``settings.toml`` an export must not carry: every string under a
    key that looks like a credential's name (``api_key``, ``GITHUB_TOKEN``), and every
    header and environment value (an MCP server's ``Authorization``, its ``env``)."""
    from dsh.held_secrets import looks_secret

    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    found: list[str] = []

    def walk(value: Any, name: str, carried: bool) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, key, carried or key.lower() in ("headers", "env", "environment"))
        elif isinstance(value, list):
            for item in value:
                walk(item, name, carried)
        elif isinstance(value, str) and (
            carried or looks_secret(name.upper(), value) or looks_secret(name, value)
        ):
            found.append(value)

    walk(document, "", False)
    return found


async def first_checkpoint_files(
    home: Path, events: Sequence[SessionEvent]
) -> dict[str, bytes] | None:
    """The project's files at the session's first checkpoint, or None without one (or
    when the checkpoint store no longer has it)."""
    from dsh.checkpoints.store import CheckpointError, CheckpointStore, store_folder

    first = next(
        (e.data for e in events if isinstance(e.data, CheckpointTaken) and e.data.tree is not None),
        None,
    )
    if first is None or first.tree is None:
        return None
    made = store_folder(home, Path(first.root)) / "HEAD"
    if not await asyncio.to_thread(made.is_file):
        return None  # never made here (an imported log): not made now either
    try:
        store = await CheckpointStore.open(home, Path(first.root))
        entries = await store.entries(first.tree)
        blobs = await store.read_blobs(entry.blob for entry in entries.values())
    except (CheckpointError, OSError):
        return None
    return {name: blobs[entry.blob] for name, entry in entries.items()}


__all__ = [
    "CWD",
    "FORMAT",
    "HOME",
    "SECRET",
    "ReplayFile",
    "ReplayFileError",
    "build_replay_file",
    "first_checkpoint_files",
    "known_secrets",
    "read_replay_file",
    "redact",
]
