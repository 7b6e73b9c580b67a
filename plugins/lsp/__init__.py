"""Language servers over LSP: the ``lsp`` tool (definition, references, hover,
document_symbols, workspace_symbols, diagnostics), diagnostics appended to the file
tools' edits, and the ``lsp`` service.

One server process per (language server, workspace), started on first use and
restarted after a crash with backoff. The workspace is the git root above the
session's directory (else the directory). Servers come from built-in defaults per
language, used when installed (python: pylsp, else pyright; typescript/javascript:
typescript-language-server; go: gopls; rust: rust-analyzer; c/c++: clangd), with
``[plugins.lsp.servers.<name>]`` merged over them.

Modules: ``rpc`` (JSON-RPC framing over pipes), ``positions`` (UTF-16 columns),
``files`` (paths, URIs, reading), ``servers`` (which server for which file),
``config`` (settings), ``server`` (one process), ``diagnostics`` (what it
publishes), ``supervisor`` (lazy start, restart with backoff), ``service`` (all of
them), ``results`` and ``render`` (answers as compact text), ``tool`` (the ``lsp``
tool), ``sync`` (edits to servers, diagnostics back).

Settings (``[plugins.lsp]``): see :class:`~plugins.lsp.config.Config`.
"""

from __future__ import annotations

from dsh.doctor import Check, DoctorAsk
from dsh.hooks import DOCTOR_CHECK, TOOL_POST_EXECUTE
from dsh.kernel import Context, Plugin, ServiceKey
from dsh.services import TOOLS
from dsh_plugins.lsp.config import Config
from dsh_plugins.lsp.doctor import lsp_checks
from dsh_plugins.lsp.servers import ServerConfig
from dsh_plugins.lsp.service import LspService, ServerStatus
from dsh_plugins.lsp.sync import edit_hook
from dsh_plugins.lsp.tool import lsp_tool

__all__ = ["LSP", "Config", "LspService", "ServerConfig", "ServerStatus", "plugin"]

LSP: ServiceKey[LspService] = ServiceKey("lsp")


def apply(ctx: Context, config: Config) -> None:
    # The servers' tasks live in a child context created first, so it is disposed
    # last: after the effect below has asked every server to shut down in order.
    service = LspService(ctx.child(name="lsp:servers"), config)
    ctx.effect(lambda: service.aclose)
    ctx.provide(LSP, service)
    ctx.get(TOOLS).register("lsp", lsp_tool(service))
    ctx.on(TOOL_POST_EXECUTE, edit_hook(service))

    async def doctor(ask: DoctorAsk) -> list[Check]:
        return await lsp_checks(service.catalog, ask)

    ctx.on(DOCTOR_CHECK, doctor)


plugin = Plugin(
    name="lsp",
    description="Language servers: definition, references, hover, symbols, diagnostics",
    inject=(TOOLS,),
    provides=(LSP,),
    config=Config,
    apply=apply,
)
