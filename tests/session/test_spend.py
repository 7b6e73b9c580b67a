"""dsh.session.spend: every paid call a log records, priced when it was made."""

from __future__ import annotations

import datetime
from pathlib import Path

from dsh.llm import TokenUsage
from dsh.session import paid_call, session_spend
from dsh.session.jsonl import parse_jsonl
from dsh_plugins.llm_deepseek import FLASH_PRICE

FIXTURE = Path(__file__).parent.parent / "ui" / "fixtures" / "session.jsonl"


def test_calls_are_priced_at_the_time_they_were_made() -> None:
    loaded, _ = parse_jsonl(FIXTURE.read_bytes(), str(FIXTURE))
    asked: list[datetime.datetime] = []

    def pricing(provider: str, model: str, usage: TokenUsage, at: datetime.datetime) -> float:
        asked.append(at)
        return FLASH_PRICE.cost(usage, at)

    calls = [call for event in loaded.events if (call := paid_call(event)) is not None]
    times = [e.time for e in loaded.events if paid_call(e) is not None]
    assert len(calls) == 3
    assert [round(c.at.timestamp() * 1000) for c in calls] == times
    spent = session_spend(loaded.events, pricing)
    # Each call priced at its own time (and again, uncached, for what the cache saved).
    assert set(asked) == {c.at for c in calls}
    assert spent.calls == 3
    assert spent.usage is not None
    assert spent.usage.output_tokens == 260
    # The same whenever it is read: off-peak calls stay half price on a peak-hour read.
    expected = sum(FLASH_PRICE.cost(c.usage, c.at) for c in calls)
    assert spent.cost == expected
    hits = [c for c in calls if c.usage.cache_read_tokens]
    assert hits, "the fixture has calls that read the cache"
    saved = sum(
        FLASH_PRICE.cost(
            c.usage.model_copy(
                update={
                    "input_tokens": c.usage.input_tokens + (c.usage.cache_read_tokens or 0),
                    "cache_read_tokens": 0,
                }
            ),
            c.at,
        )
        - FLASH_PRICE.cost(c.usage, c.at)
        for c in hits
    )
    assert spent.saved is not None
    assert abs(spent.saved - saved) < 1e-12
    peak = datetime.datetime(2026, 12, 2, 8, tzinfo=datetime.UTC)  # a Wednesday, 08:00
    off_peak = peak.replace(hour=12)
    usage = calls[0].usage
    assert FLASH_PRICE.cost(usage, off_peak) == FLASH_PRICE.cost(usage, peak) / 2
