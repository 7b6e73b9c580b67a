"""``dsh doctor``'s check of the language servers: each one configured in settings
has its command on this machine; the built-in defaults found are listed (one not
installed is no problem: its language simply has no server)."""

from __future__ import annotations

import asyncio

from dsh.doctor import Check, DoctorAsk, fail, ok
from dsh.tools import ToolError
from dsh_plugins.lsp.servers import Catalog


def _checks(catalog: Catalog) -> list[Check]:
    checks: list[Check] = []
    for name, entry in catalog.entries.items():
        if not entry.enabled:
            continue
        try:
            spec = catalog.spec(name)  # searches PATH
        except ToolError:
            if entry.configured:
                program = entry.candidates[0][0]
                checks.append(
                    fail(
                        "lsp",
                        f"lsp {name}",
                        f"command {program!r} not found",
                        (f"install it: {entry.hint}; or " if entry.hint else "install it, or ")
                        + f"correct [plugins.lsp.servers.{name}] command",
                    )
                )
            continue
        checks.append(ok("lsp", f"lsp {name}", " ".join(spec.command)))
    return checks


async def lsp_checks(catalog: Catalog, ask: DoctorAsk) -> list[Check]:
    return await asyncio.to_thread(_checks, catalog)
