"""Which MCP servers to run: ``[mcp.servers.NAME]`` tables and a project's ``.mcp.json``.

The ``[mcp]`` table is read from the ``settings`` service as merged: the user's own
document, and the project's ``.dsh/settings.toml`` only when the project is trusted
(an untrusted project's tables other than those that narrow are never layered in, see
docs/settings.md). A project's ``.mcp.json`` (the ``mcpServers`` format other agents
read) is read only when the project is trusted too. A server named in both wins from
the settings.

``${VAR}`` (and ``${VAR:-default}``) in ``env`` and ``headers`` values name a
credential, resolved when the server starts (:func:`expand`). Only a server of the
user's own settings (or the editor's) may name the user's credentials; in a project's
server (its ``.mcp.json``, its ``[mcp.servers]``), a ``${VAR}`` naming one is refused
(:class:`WithheldVariable`) and the server does not start. The values are
:class:`~dsh.credentials.Secret` until handed to the transport, and never appear in a
status line or error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    ValidationError,
    model_validator,
)

from dsh.credentials import Secret
from dsh.frontend import ToolServer
from dsh.paths import unsafe_to_obey

PROJECT_FILE = ".mcp.json"
TABLE = "mcp"
AUTH_DIR = "mcp-auth"
"""The folder of ``$DSH_HOME`` holding the OAuth tokens (:mod:`dsh_plugins.mcp.auth`)."""

Transport = Literal["stdio", "http", "sse"]


class ConfigError(Exception):
    """A server's configuration cannot be used; the message names its file and key."""


class ServerConfig(BaseModel):
    """One server, as ``[mcp.servers.NAME]`` or an ``mcpServers`` entry writes it."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type: Transport | None = Field(default=None, alias="type")
    """``stdio`` (a ``command``), ``http`` (Streamable HTTP at ``url``) or ``sse`` (the
    legacy HTTP+SSE transport); left out, it follows from ``command`` or ``url``."""
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    """Variables added to the server's environment (which is otherwise only the safe
    few: ``PATH``, ``HOME``...); values may be ``${VAR}``."""
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers sent with every request; values may be ``${VAR}``."""
    enabled: bool = True
    sandbox: bool = True
    """A stdio server runs inside the OS sandbox (when ``[sandbox] mcp_servers``, the
    default), with no network; ``false`` runs it outside, honoured only in the user's
    own settings: a project's server always runs inside."""
    startup_timeout: PositiveFloat = 30.0
    """Seconds to start and answer ``initialize`` and ``tools/list``; then it is failed."""
    tool_timeout: PositiveFloat = 600.0
    """Seconds one tool call may take."""
    reconnect_attempts: NonNegativeInt = 5
    """How often a server that was ready and then went away is started again, after
    1, 2, 4... seconds (at most 30); 0: never on its own (``/mcp restart`` still does)."""
    include_tools: list[str] | None = None
    """Only these of the server's tools (its own names; globs allowed)."""
    exclude_tools: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _transport_names(cls, data: Any) -> Any:
        # Other agents' files say "streamable-http" or "streamableHttp" for http.
        if isinstance(data, dict) and data.get("type") in ("streamable-http", "streamableHttp"):
            data = {**data, "type": "http"}
        return data

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if self.type is None:
            self.type = "stdio" if self.command is not None else "http"
        if self.type == "stdio" and not self.command:
            raise ValueError("a stdio server needs a command")
        if self.type != "stdio" and not self.url:
            raise ValueError(f"an {self.type} server needs a url")
        return self

    @property
    def transport(self) -> Transport:
        assert self.type is not None
        return self.type

    def shown(self) -> str:
        """Where the server is, for a status line: the command or the URL, never a
        header or environment value."""
        if self.transport == "stdio":
            return " ".join([self.command or "", *self.args])
        return f"{self.url} ({self.transport})"


class McpTable(BaseModel):
    """The ``[mcp]`` table."""

    model_config = ConfigDict(extra="forbid")

    servers: dict[str, ServerConfig] = Field(default_factory=dict)


class _ProjectFile(BaseModel):
    model_config = ConfigDict(extra="ignore")

    mcpServers: dict[str, dict[str, Any]] = Field(default_factory=dict)


# What the other agents' entries carry that dsh does not use.
_FOREIGN_KEYS = frozenset({"disabled", "autoApprove", "alwaysAllow", "timeout", "description"})


def read_table(table: Mapping[str, Any], origin: str) -> dict[str, ServerConfig]:
    """``[mcp]`` as merged, validated; errors name ``origin`` (its files) and the key."""
    try:
        return McpTable.model_validate(table).servers
    except ValidationError as error:
        problem = error.errors()[0]
        key = ".".join((TABLE, *(str(p) for p in problem["loc"])))
        raise ConfigError(f"{origin}: {key}: {problem['msg']}") from None


def read_project_file(path: Path) -> dict[str, ServerConfig]:
    """The servers of a ``.mcp.json`` (blocking: call it in a thread). None there, none.
    Refused, as a settings file is, when another user could have written it: it names
    programs dsh would run."""
    problem = unsafe_to_obey(path)
    if problem is not None:
        raise ConfigError(f"{path}: refused, {problem}; it names programs dsh would run")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise ConfigError(f"{path}: cannot be read ({error.strerror})") from None
    try:
        parsed = _ProjectFile.model_validate(json.loads(text))
    except (ValueError, ValidationError) as error:
        raise ConfigError(f"{path}: not an mcpServers document ({_first(error)})") from None
    servers: dict[str, ServerConfig] = {}
    for name, entry in parsed.mcpServers.items():
        kept = {k: v for k, v in entry.items() if k not in _FOREIGN_KEYS}
        try:
            servers[name] = ServerConfig.model_validate(kept)
        except ValidationError as error:
            raise ConfigError(f"{path}: mcpServers.{name}: {_first(error)}") from None
        if entry.get("disabled") is True:
            servers[name] = servers[name].model_copy(update={"enabled": False})
    return servers


CLIENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")


def client_config(server: ToolServer) -> ServerConfig:
    """A server a front end's client offers (an editor's ``mcpServers``), as a
    configured one (``${VAR}`` in its values is expanded as in any). Raises
    ValueError."""
    if not CLIENT_NAME.match(server.name):
        raise ValueError("its name must be letters, digits, - and _ (at most 40)")
    try:
        return ServerConfig(
            type=server.transport,
            command=server.command,
            args=list(server.args),
            env=dict(server.env),
            url=server.url,
            headers=dict(server.headers),
        )
    except ValidationError as error:
        raise ValueError(_first(error)) from None


def _first(error: Exception) -> str:
    if isinstance(error, ValidationError):
        problem = error.errors()[0]
        where = ".".join(str(p) for p in problem["loc"])
        return f"{where}: {problem['msg']}" if where else str(problem["msg"])
    return str(error).splitlines()[0]


_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class MissingVariable(Exception):
    """A ``${VAR}`` with no value and no default."""

    def __init__(self, name: str) -> None:
        super().__init__(f"${{{name}}} is not set")
        self.name = name


class WithheldVariable(Exception):
    """A ``${VAR}`` in a project's server naming one of the user's credentials."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"${{{name}}} names one of your credentials, which a project's configuration "
            "may not send anywhere: not expanded, nothing sent (configure this server in "
            "your own settings, $DSH_HOME/settings.toml, to pass it)"
        )
        self.name = name


def expand(values: Mapping[str, str], lookup: Callable[[str], Secret | None]) -> dict[str, Secret]:
    """``values`` with each ``${VAR}`` replaced by what ``lookup`` finds (blocking: the
    credential store may read files). Raises :class:`MissingVariable`."""

    def one(text: str) -> str:
        def sub(match: re.Match[str]) -> str:
            found = lookup(match.group(1))
            if found is not None:
                return found.reveal()
            if match.group(2) is not None:
                return match.group(2)
            raise MissingVariable(match.group(1))

        return _REFERENCE.sub(sub, text)

    return {key: Secret(one(value)) for key, value in values.items()}
