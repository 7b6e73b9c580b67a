"""The plugin's settings (``[plugins.lsp]``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from dsh_plugins.lsp.servers import Catalog, ServerConfig


class Config(BaseModel):
    model_config = {"extra": "forbid"}

    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    """Per server name (``python``, ``typescript``, ``go``, ``rust``, ``c`` or a new
    one), merged over the built-in defaults."""
    request_timeout_s: float = Field(default=30.0, gt=0, le=600)
    """How long one request (``initialize`` included) may take before LSP_TIMEOUT."""
    diagnostics_after_edit: bool = True
    """Append a file's new diagnostics to write/edit/multi_edit results."""
    start_on_edit: bool = True
    """Start the server of an edited file's language when none runs, so the first edit
    of a session gets its diagnostics too (False: only servers already running, which
    the ``lsp`` tool starts, report on edits)."""
    edit_start_wait_s: float = Field(default=10.0, ge=0, le=120)
    """How long an edit waits for a server it started; one slower to start goes on
    starting, and the next edit gets its diagnostics."""
    edit_diagnostics_wait_s: float = Field(default=3.0, ge=0, le=30)
    """How long an edit waits for the server's new diagnostics before giving up on them."""
    diagnostics_wait_s: float = Field(default=5.0, gt=0, le=60)
    """How long the ``diagnostics`` operation waits for a fresh report."""
    max_open_documents: int = Field(default=200, ge=1, le=10_000)
    """Documents kept open per server; the least recently used are closed past it."""
    workspace: Literal["git-root", "cwd"] = "git-root"
    """The folder servers work on: the git root above the session's directory (else the
    directory itself), or always the directory."""

    @model_validator(mode="after")
    def _servers(self) -> Config:
        Catalog(self.servers)  # refuses a new server without command or extensions
        return self
