"""``dsh models``: the configured provider's models, its ``/models`` listing merged
with what its plugin knows of each (context window, output cap, vision, prices)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from dsh.llm import CatalogEntry, LlmError
from dsh.runtime import start_runtime
from dsh.settings import SETTINGS, SettingsError


async def _collect(provider: str | None) -> tuple[str, list[CatalogEntry]]:
    runtime = await start_runtime()
    try:
        route = provider or runtime.root.get(SETTINGS).agent.provider
        return route, await runtime.llm.catalog(route)
    finally:
        await runtime.aclose()


def _tokens(count: int | None) -> str:
    if count is None:
        return "?"
    if count >= 1_000_000 and count % 1_000_000 == 0:
        return f"{count // 1_000_000}M"
    return f"{count // 1000}K" if count >= 1000 else str(count)


def describe(entry: CatalogEntry) -> dict[str, Any]:
    """One model as ``--json`` prints it (absent facts are null)."""
    model, price = entry.model, entry.price
    return {
        "provider": model.provider,
        "id": model.id,
        "name": model.name,
        "sentAs": model.sent_as,
        "offered": entry.offered,
        "contextWindow": model.context_window,
        "maxOutputTokens": model.default_max_tokens,
        "vision": model.vision,
        "concurrency": model.concurrency,
        "efforts": [e.id for e in model.reasoning.efforts] if model.reasoning else None,
        "defaultEffort": model.reasoning.default_effort if model.reasoning else None,
        "price": None
        if price is None
        else {
            "cacheHit": price.cache_hit,
            "cacheMiss": price.cache_miss,
            "output": price.output,
            "offPeakFactor": price.off_peak_factor,
        },
    }


def format_table(provider: str, entries: list[CatalogEntry]) -> str:
    if not entries:
        return f"{provider} lists no models."
    lines = []
    if all(entry.offered is None for entry in entries):
        lines.append(
            f"{provider}'s model listing could not be read: these are the models dsh knows."
        )
    lines += [
        f"{'MODEL':<30} {'CONTEXT':>7} {'OUTPUT':>6} {'VISION':<6} PRICE $/M (hit/miss/out, peak)"
    ]
    for entry in entries:
        model, price = entry.model, entry.price
        vision = "?" if model.vision is None else ("yes" if model.vision else "no")
        cost = "?" if price is None else f"{price.cache_hit}/{price.cache_miss}/{price.output}"
        if price is not None and price.off_peak_factor is not None:
            cost += f", x{price.off_peak_factor} off peak"
        line = (
            f"{model.id:<30} {_tokens(model.context_window):>7} "
            f"{_tokens(model.default_max_tokens):>6} {vision:<6} {cost}"
        )
        if model.sent_as:
            line += f"  (legacy: sent as {model.sent_as})"
        if entry.offered is False:
            line += f"  (not offered by {provider}: known to dsh only)"
        lines.append(line)
    return "\n".join(lines)


def run_models(*, provider: str | None, as_json: bool) -> int:
    try:
        route, entries = asyncio.run(_collect(provider))
    except (SettingsError, LlmError) as error:
        print(f"dsh: {error}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps([describe(entry) for entry in entries], indent=2))
    else:
        print(format_table(route, entries))
    return 0
