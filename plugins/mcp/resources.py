"""``@server:uri`` in a prompt attaches that server's resource; the prompt's ``@``
menu offers the servers' listed resources (:func:`mention_choices`).

A token is taken only when ``server`` names a server that is ready; the resource is
read (``resources/read``, bounded by the server's ``tool_timeout``) and entered before
the prompt as context, text contents whole up to :data:`MAX_BYTES`, binary contents
named. A resource that cannot be read becomes a note, as a missing file does for
``@path``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import anyio
from mcp import types
from mcp.shared.exceptions import MCPError

from dsh.agent import MentionChoice
from dsh.llm import PluginSource, UserMessage, user_text
from dsh_plugins.mcp.connection import Connection

NAME = "mcp"
MENTION = re.compile(r"(?:^|\s)@([A-Za-z0-9_-]+):(\S+)")
MAX_BYTES = 256 * 1024
MAX_MENTIONS = 10
MAX_CHOICES = 20
TRAILING = ".,;:!?)]}'\""


def resource_mentions(text: str, servers: Mapping[str, Connection]) -> list[tuple[str, str]]:
    """The ``(server, uri)`` pairs of ``text`` naming a server that is ready, each once."""
    found: dict[tuple[str, str], None] = {}
    for match in MENTION.finditer(text):
        server, uri = match.group(1), match.group(2).rstrip(TRAILING)
        connection = servers.get(server)
        if connection is not None and connection.state == "ready" and uri:
            found.setdefault((server, uri), None)
    return list(found)[:MAX_MENTIONS]


def mention_choices(query: str, servers: Mapping[str, Connection]) -> list[MentionChoice]:
    """For ``@query``: the ready servers with resources whose name starts with it
    (``@server:``, to go on from); after ``server:``, that server's resources whose
    URI or name holds the rest."""
    name, colon, rest = query.partition(":")
    if not colon:
        return [
            MentionChoice(
                f"@{server}:",
                f"{server}:",
                f"{_count(len(connection.resources), 'resource')} (MCP)",
                more=True,
            )
            for server, connection in sorted(servers.items())
            if connection.state == "ready"
            and connection.resources
            and server.lower().startswith(query.lower())
        ]
    connection = servers.get(name)
    if connection is None or connection.state != "ready":
        return []
    lowered = rest.lower()
    found: list[MentionChoice] = []
    for resource in connection.resources:
        uri = str(resource.uri)
        if lowered in uri.lower() or lowered in resource.name.lower():
            about = resource.title or resource.name
            found.append(MentionChoice(f"@{name}:{uri}", f"{name}:{uri}", about))
            if len(found) == MAX_CHOICES:
                break
    return found


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


async def attach(text: str, servers: Mapping[str, Connection]) -> tuple[UserMessage, ...]:
    out: list[UserMessage] = []
    notes: list[str] = []
    for server, uri in resource_mentions(text, servers):
        connection = servers[server]
        try:
            body = await read(connection, uri)
        except (MCPError, TimeoutError, anyio.ClosedResourceError, RuntimeError) as error:
            reason = error.error.message if isinstance(error, MCPError) else type(error).__name__
            notes.append(f"@{server}:{uri}: {reason}")
            continue
        message = (
            f"The user mentioned @{server}:{uri}; here is that resource of the MCP server "
            f"{server} as it is now.\n\n{body}"
        )
        out.append(_reminder(message, "snapshot"))
    if notes:
        lines = "\n".join(f"- {note}" for note in notes)
        out.append(_reminder(f"Not attached from the user's mentions:\n{lines}", "notice"))
    return tuple(out)


async def read(connection: Connection, uri: str) -> str:
    session = connection.session
    if session is None:
        raise RuntimeError("not running")
    with anyio.fail_after(connection.config.tool_timeout):
        result = await session.read_resource(uri)
    if not isinstance(result, types.ReadResourceResult):
        raise RuntimeError("an answer dsh cannot read")
    parts: list[str] = []
    used = 0
    for content in result.contents:
        kind = f" ({content.mime_type})" if content.mime_type else ""
        if isinstance(content, types.TextResourceContents):
            text = content.text
            if used + len(text.encode()) > MAX_BYTES:
                text = text.encode()[: max(0, MAX_BYTES - used)].decode(errors="ignore")
                text += "\n[cut: the resource is larger than dsh attaches]"
            used += len(text.encode())
            parts.append(f'<resource uri="{content.uri}"{kind}>\n{text}\n</resource>')
        else:
            parts.append(f"[resource {content.uri}{kind}: binary data, not shown]")
    return "\n\n".join(parts) or "(empty)"


def _reminder(text: str, form: str) -> UserMessage:
    return user_text(
        f"<system-reminder>\n{text}\n</system-reminder>",
        source=PluginSource(plugin=NAME, form=form),
    )
