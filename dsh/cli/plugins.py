"""``dsh plugins``: what loaded, from where, and what failed and why."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys

from dsh.kernel import PluginRecord, PluginStatus
from dsh.runtime import start_runtime
from dsh.settings import SettingsError


async def _collect() -> list[PluginRecord]:
    runtime = await start_runtime()
    try:
        # Copies: unloading below rewrites the live records' status.
        return [dataclasses.replace(record) for record in runtime.plugins.records]
    finally:
        await runtime.aclose()


def format_table(records: list[PluginRecord]) -> str:
    if not records:
        return "No plugins found."
    lines: list[str] = []
    for record in records:
        provides = ", ".join(key.name for key in record.plugin.provides) if record.plugin else ""
        head = f"{record.name:<20} {record.status!s:<9} {record.origin}"
        lines.append(head + (f"  [provides: {provides}]" if provides else ""))
        if record.error and record.status is not PluginStatus.LOADED:
            lines.append(f"{'':<20} {'':<9} {record.error}")
    return "\n".join(lines)


def run_plugins(*, as_json: bool) -> int:
    try:
        records = asyncio.run(_collect())
    except SettingsError as error:
        print(f"dsh: {error}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps([record.describe() for record in records], indent=2))
    else:
        print(format_table(records))
    failed = [r for r in records if r.status is PluginStatus.FAILED]
    if failed:
        print(f"{len(failed)} plugin(s) failed to load.", file=sys.stderr)
    return 0
