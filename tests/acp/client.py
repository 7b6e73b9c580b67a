"""A real ACP client (the SDK's client side) driving ``dsh acp`` as a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, connect_to_agent
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    InitializeResponse,
    PermissionOption,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UserMessageChunk,
)

from tests.e2e.harness import TIMEOUT, Dsh, finish


@dataclass
class Asked:
    session_id: str
    tool_call: ToolCallUpdate
    options: list[PermissionOption]


@dataclass
class Editor:
    """What an editor does: shows the updates, answers permission requests with the
    next scripted option id ("hold": never, until the test says)."""

    answers: list[str] = field(default_factory=list)
    updates: list[Any] = field(default_factory=list)
    asked: list[Asked] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    held: asyncio.Future[RequestPermissionResponse] | None = None
    initialized: InitializeResponse | None = None
    """What ``dsh acp`` answered to ``initialize``."""

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        self.asked.append(Asked(session_id, tool_call, options))
        self._changed()
        answer = self.answers.pop(0)
        if answer == "hold":
            self.held = asyncio.get_running_loop().create_future()
            return await self.held
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )

    def release_cancelled(self) -> None:
        """What an editor does with a pending request once it cancelled the turn."""
        if self.held is not None and not self.held.done():
            self.held.set_result(
                RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
            )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        self._changed()

    def _changed(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def wait_for(self, found: Any) -> Any:
        """Wait (bounded) until ``found()`` returns something."""

        async def waiting() -> Any:
            while True:
                event = self.changed
                value = found()
                if value:
                    return value
                await event.wait()

        return await asyncio.wait_for(waiting(), TIMEOUT)

    # ------------------------------------------------------------------ reading

    def text(self) -> str:
        return "".join(
            u.content.text
            for u in self.updates
            if isinstance(u, AgentMessageChunk) and isinstance(u.content, TextContentBlock)
        )

    def thoughts(self) -> str:
        return "".join(
            u.content.text
            for u in self.updates
            if isinstance(u, AgentThoughtChunk) and isinstance(u.content, TextContentBlock)
        )

    def said_by_user(self) -> str:
        return "".join(
            u.content.text
            for u in self.updates
            if isinstance(u, UserMessageChunk) and isinstance(u.content, TextContentBlock)
        )

    def tool_calls(self) -> list[ToolCallStart]:
        return [u for u in self.updates if isinstance(u, ToolCallStart)]

    def tool_updates(self, call_id: str) -> list[ToolCallProgress]:
        return [
            u for u in self.updates if isinstance(u, ToolCallProgress) and u.tool_call_id == call_id
        ]

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


@contextlib.asynccontextmanager
async def editor_session(
    dsh: Dsh, editor: Editor, *args: str, capabilities: ClientCapabilities | None = None
) -> AsyncIterator[tuple[ClientSideConnection, asyncio.subprocess.Process]]:
    """``dsh acp`` started, connected and initialized (offering ``capabilities``);
    closed (stdin) at the end, when it must exit on its own with 0."""
    child = await dsh.start("acp", *args)
    assert child.stdin is not None
    assert child.stdout is not None
    conn = connect_to_agent(editor, child.stdin, child.stdout)
    try:
        reply = await asyncio.wait_for(
            conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities),
            TIMEOUT,
        )
        assert reply.protocol_version == PROTOCOL_VERSION
        editor.initialized = reply
        yield conn, child
    finally:
        await conn.close()
        if child.returncode is None:
            child.stdin.close()
        done = await finish(child, None)
        assert done.code == 0, done.stderr[-3000:]
        assert "Traceback" not in done.stderr, done.stderr[-3000:]


def text(value: str) -> list[TextContentBlock]:
    return [TextContentBlock(type="text", text=value)]
