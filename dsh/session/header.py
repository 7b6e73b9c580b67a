"""The first record of every stored session: who it is, where it ran, where it came from."""

from __future__ import annotations

from typing import Literal

from pydantic import NonNegativeInt

from dsh.host import HostFacts
from dsh.llm import SessionId
from dsh.wire import Frozen

FORMAT_VERSION = 0


class SessionHeader(Frozen):
    version: int = FORMAT_VERSION
    id: SessionId
    created_at: int  # epoch ms
    cwd: str | None = None
    model: str | None = None
    """The model the session started with; later switches are in request headers."""
    parent_session: SessionId | None = None
    """The session this one was forked (or spawned as a subagent) from."""
    seed_length: NonNegativeInt | None = None
    """How many of this session's first events were copied from the parent."""
    origin: Literal["fork", "subagent"] | None = None
    delegation_depth: NonNegativeInt = 0
    agent_preset: str | None = None
    host: HostFacts | None = None
    """The machine the session started on, as its system prompt described it (absent
    in sessions stored before dsh recorded it)."""
