"""The LLM service over adapters written against the seam (no HTTP here; the real
adapters are tested over HTTP in tests/plugins)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator
from typing import Any

import pytest

from dsh.hooks import LLM_RETRY, LLM_STREAM
from dsh.kernel import Context, Next
from dsh.llm import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishAborted,
    FinishError,
    FinishStop,
    GenerateOptions,
    LlmAdapter,
    LlmCallConfig,
    LlmError,
    LlmFailure,
    LlmService,
    ModelReasoning,
    Price,
    ReasoningBlock,
    ReasoningDelta,
    ReasoningEffortInfo,
    ResolvedModel,
    RetryNotice,
    RetryPolicy,
    RouteConflictError,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    UsageChunk,
    assemble,
    user_text,
)
from dsh.services import LLM
from tests.support.waits import HANG_S

FAST = RetryPolicy(max_retries=3, base_delay_ms=1, max_delay_ms=4)


def reply(text: str) -> list[StreamChunk]:
    return [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text=text),
        BlockEnd(index=0, block=TextBlock(text=text)),
        Finish(reason=FinishStop()),
    ]


def failed(code: str, retry_after_ms: int | None = None) -> list[StreamChunk]:
    failure = LlmFailure(
        message=f"{code} happened", code=code, provider_retry_after_ms=retry_after_ms
    )
    return [Finish(reason=FinishError(failure=failure))]


class Scripted(LlmAdapter):
    """Plays one scripted attempt per call: a list of chunks, or an exception to raise."""

    def __init__(
        self, *attempts: list[StreamChunk] | BaseException, policy: RetryPolicy = FAST
    ) -> None:
        self.attempts = list(attempts)
        self.calls: list[GenerateOptions] = []
        self.retry_policy = policy
        self.closed = False

    def resolve_model(self, provider: str, model: str) -> ResolvedModel:
        return ResolvedModel(
            provider=provider,
            id=model,
            name=model,
            context_window=128_000,
            default_max_tokens=8_000,
            reasoning=ModelReasoning(
                efforts=(
                    ReasoningEffortInfo(id="off", name="Off"),
                    ReasoningEffortInfo(id="high", name="High"),
                ),
                default_effort="high",
            ),
        )

    def price(self, provider: str, model: str) -> Price:
        return Price(cache_hit=0.1, cache_miss=1.0, output=2.0)

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        self.calls.append(options)
        attempt = self.attempts.pop(0)
        if isinstance(attempt, BaseException):
            raise attempt
        for chunk in attempt:
            await asyncio.sleep(0)
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


def options(provider: str = "p", signal: Any = None) -> GenerateOptions:
    return GenerateOptions(provider=provider, model="m", messages=(user_text("hi"),), signal=signal)


async def collect(
    service: LlmService, opts: GenerateOptions, notices: list[RetryNotice] | None = None
) -> list[StreamChunk]:
    return [
        c
        async for c in service.stream(
            opts, on_retry=notices.append if notices is not None else None
        )
    ]


# ---------------------------------------------------------------------- routes


async def test_routes_register_replace_and_release_with_their_context() -> None:
    root = Context()
    service = LlmService(root)
    root.provide(LLM, service)
    plugin = root.child(name="provider-plugin")
    adapter = Scripted()
    registration = plugin.get(LLM).register_adapter(["a", "b"], adapter)
    assert service.providers() == ["a", "b"]
    with pytest.raises(RouteConflictError):
        service.register_adapter(["b"], Scripted())
    registration.replace(["b", "c"])
    assert service.providers() == ["b", "c"]
    other = service.register_adapter(["a"], Scripted())
    with pytest.raises(RouteConflictError):
        registration.replace(["a"])  # all or nothing: nothing changed
    assert service.providers() == ["a", "b", "c"]
    await plugin.dispose()
    assert service.providers() == ["a"]
    assert adapter.closed
    with pytest.raises(LlmError, match="released"):
        registration.replace(["z"])
    await other.dispose()


async def test_an_unknown_provider_is_a_clear_error_finish() -> None:
    service = LlmService()
    service.register_adapter(["deepseek"], Scripted())
    [finish] = await collect(service, options("nope"))
    assert isinstance(finish, Finish)
    assert isinstance(finish.reason, FinishError)
    assert finish.reason.failure.code == "NO_ADAPTER"
    assert "'nope'" in finish.reason.failure.message
    assert "deepseek" in finish.reason.failure.message


# ---------------------------------------------------------------------- preparation


async def test_prepare_call_fills_and_marks_adapter_defaults() -> None:
    service = LlmService()
    service.register_adapter(["p"], Scripted())
    prepared = service.prepare_call(LlmCallConfig(provider="p", model="m"))
    assert prepared.config.reasoning_effort == "high"
    assert prepared.config.max_tokens == 8_000
    assert prepared.adapter_defaults.reasoning_effort is True
    assert prepared.adapter_defaults.max_tokens is True
    assert prepared.context_window == 128_000

    explicit = service.prepare_call(
        LlmCallConfig(provider="p", model="m", reasoning_effort="off", max_tokens=5)
    )
    assert explicit.config.reasoning_effort == "off"
    assert explicit.adapter_defaults.reasoning_effort is None
    assert explicit.adapter_defaults.max_tokens is None


async def test_an_unsupported_effort_is_refused_not_clamped() -> None:
    service = LlmService()
    service.register_adapter(["p"], Scripted())
    with pytest.raises(LlmError) as caught:
        service.prepare_call(LlmCallConfig(provider="p", model="m", reasoning_effort="ultra"))
    assert caught.value.code == "UNSUPPORTED_REASONING_EFFORT"
    assert "off, high" in str(caught.value)


# ---------------------------------------------------------------------- streaming


async def test_raises_become_error_finishes() -> None:
    service = LlmService()
    failure = LlmFailure(message="bad key", code="AUTH", status=401)
    service.register_adapter(["p"], Scripted(LlmError(failure), RuntimeError("bug in adapter")))
    [finish] = await collect(service, options())
    assert finish == Finish(reason=FinishError(failure=failure))
    [finish] = await collect(service, options())
    assert isinstance(finish, Finish)
    assert isinstance(finish.reason, FinishError)
    assert finish.reason.failure.code == "ADAPTER_FAILURE"


async def test_a_stream_without_finish_is_closed_with_an_error() -> None:
    service = LlmService()
    service.register_adapter(
        ["p"], Scripted(reply("partial")[:2], policy=RetryPolicy(max_retries=0))
    )
    chunks = await collect(service, options())
    assert chunks[-1].reason.failure.code == "STREAM_CLOSED"  # type: ignore[union-attr]
    assert assemble(chunks).interrupted_blocks() == (TextBlock(text="partial"),)


async def test_retryable_failures_are_retried_with_backoff_then_succeed() -> None:
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    service = LlmService(sleep=sleep, jitter=lambda: 0.5)
    adapter = Scripted(
        failed("SERVER"), failed("RATE_LIMIT", retry_after_ms=1500), reply("finally")
    )
    adapter.retry_policy = RetryPolicy(max_retries=5, base_delay_ms=500, max_delay_ms=10_000)
    service.register_adapter(["p"], adapter)
    notices: list[RetryNotice] = []
    chunks = await collect(service, options(), notices)
    assert assemble(chunks).content == (TextBlock(text="finally"),)
    assert [n.retry for n in notices] == [1, 2]
    assert [n.delay_ms for n in notices] == [500, 1500]  # backoff, then the provider's Retry-After
    assert [n.failure.code for n in notices] == ["SERVER", "RATE_LIMIT"]
    assert sleeps == [0.5, 1.5]
    assert len(adapter.calls) == 3


async def test_retries_are_bounded_and_announced_on_the_kernel() -> None:
    root = Context()
    service = LlmService(root, sleep=lambda s: asyncio.sleep(0))
    announced: list[RetryNotice] = []
    root.on(LLM_RETRY, announced.append)
    service.register_adapter(["p"], Scripted(*(failed("TIMEOUT") for _ in range(4))))
    chunks = await collect(service, options())
    assert chunks[-1].reason.failure.code == "TIMEOUT"  # type: ignore[union-attr]
    assert [n.retry for n in announced] == [1, 2, 3]


async def test_non_retryable_failures_and_delivered_chunks_are_never_retried() -> None:
    service = LlmService()
    adapter = Scripted(failed("AUTH"), reply("x")[:2] + failed("SERVER"))
    service.register_adapter(["p"], adapter)
    assert (await collect(service, options()))[-1].reason.failure.code == "AUTH"  # type: ignore[union-attr]
    chunks = await collect(service, options())
    assert chunks[-1].reason.failure.code == "SERVER"  # type: ignore[union-attr]
    assert len(adapter.calls) == 2  # the SERVER failure came after a chunk reached us


def test_backoff_grows_caps_and_jitters() -> None:
    policy = RetryPolicy(base_delay_ms=500, max_delay_ms=10_000, jitter=0.1)
    assert [policy.delay_ms(n, None, 0.5) for n in range(1, 7)] == [
        500,
        1000,
        2000,
        4000,
        8000,
        10_000,
    ]
    assert policy.delay_ms(1, None, 0.0) == 450
    assert policy.delay_ms(1, None, 0.999) == 550
    assert policy.delay_ms(1, 120_000, 0.5) == 60_000  # Retry-After honoured up to a bound


async def test_a_cancelled_request_finishes_aborted_at_once() -> None:
    class Slow(Scripted):
        async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
            yield BlockStart(index=0, block_type="text")
            yield TextDelta(index=0, text="thinking about it")
            try:
                await asyncio.sleep(HANG_S * 10)  # past every wait below: never ends itself
            finally:
                self.closed = True  # the pending read was cancelled
            yield Finish(reason=FinishStop())

    service = LlmService()
    adapter = Slow()
    service.register_adapter(["p"], adapter)
    signal = asyncio.Event()
    chunks: list[StreamChunk] = []
    streaming = asyncio.Event()

    async def consume() -> None:
        async for chunk in service.stream(options(signal=signal)):
            chunks.append(chunk)
            if len(chunks) == 2:
                streaming.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(streaming.wait(), HANG_S)
    signal.set()
    # Ended by the cancel, not by the adapter, whose read would outlast this wait.
    await asyncio.wait_for(task, HANG_S)
    assert isinstance(chunks[-1].reason, FinishAborted)  # type: ignore[union-attr]
    assert adapter.closed
    assert assemble(chunks).interrupted_blocks() == (TextBlock(text="thinking about it"),)


async def test_deltas_queued_while_the_consumer_is_busy_come_as_one() -> None:
    class Burst(Scripted):
        """A read's worth of chunks at once, as a stream running ahead of its reader."""

        async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
            for chunk in self.attempts.pop(0):  # type: ignore[union-attr]
                yield chunk

    thinking = [ReasoningDelta(index=0, text=t) for t in ("hm", "m.")]
    words = [TextDelta(index=1, text=t) for t in ("Hel", "lo ", "the", "re.")]
    script: list[StreamChunk] = [
        BlockStart(index=0, block_type="reasoning"),
        *thinking,
        BlockEnd(index=0, block=ReasoningBlock(text="hmm.")),
        BlockStart(index=1, block_type="text"),
        *words,
        BlockEnd(index=1, block=TextBlock(text="Hello there.")),
        Finish(reason=FinishStop()),
    ]
    service = LlmService()
    service.register_adapter(["p"], Burst(script))
    chunks = [c async for c in service.stream(options(signal=asyncio.Event()))]
    assert [type(c).__name__ for c in chunks] == [
        "BlockStart",
        "ReasoningDelta",
        "BlockEnd",
        "BlockStart",
        "TextDelta",
        "BlockEnd",
        "Finish",
    ]
    assert chunks[1] == ReasoningDelta(index=0, text="hmm.")
    assert chunks[4] == TextDelta(index=1, text="Hello there.")
    assert assemble(chunks).content == assemble(script).content


async def test_the_llm_stream_waterfall_wraps_every_call() -> None:
    root = Context()
    service = LlmService(root)
    service.register_adapter(["p"], Scripted(reply("original")))
    seen: list[str] = []

    async def observe(
        opts: GenerateOptions, next: Next[GenerateOptions, AsyncIterator[StreamChunk]]
    ) -> AsyncIterator[StreamChunk]:
        seen.append(opts.model)
        return await next(opts.model_copy(update={"model": "rewritten"}))

    root.on(LLM_STREAM, observe)
    await collect(service, options())
    assert seen == ["m"]
    assert service.adapter("p").calls[0].model == "rewritten"  # type: ignore[attr-defined]


def test_cost_uses_the_adapters_price_and_off_peak_hours() -> None:
    service = LlmService()
    service.register_adapter(["p"], Scripted())
    usage = TokenUsage(input_tokens=1_000_000, output_tokens=500_000, cache_read_tokens=2_000_000)
    assert service.cost("p", "m", usage) == pytest.approx(1.0 + 0.2 + 1.0)
    assert service.cost("other", "m", usage) is None
    price = Price(
        cache_hit=0, cache_miss=1, output=0, off_peak_factor=0.5, peak_hours_utc=((1, 4), (6, 10))
    )
    tuesday_peak = datetime.datetime(2026, 12, 1, 7, 30, tzinfo=datetime.UTC)
    tuesday_night = datetime.datetime(2026, 12, 1, 22, 0, tzinfo=datetime.UTC)
    saturday_peak_hour = datetime.datetime(2026, 12, 5, 7, 30, tzinfo=datetime.UTC)
    one_million = TokenUsage(input_tokens=1_000_000, output_tokens=0)
    assert price.cost(one_million, tuesday_peak) == 1.0
    assert price.cost(one_million, tuesday_night) == 0.5
    assert price.cost(one_million, saturday_peak_hour) == 0.5


async def test_an_attempt_that_fails_before_any_content_is_retried_as_if_never_started() -> None:
    """Issue 18: a stream closed (or gone wrong) before its first block is retried with
    the usual back-off; what it sent before failing (usage) is dropped with it."""
    closed = LlmFailure(message="the model server closed the stream", code="STREAM_CLOSED")
    garbled = LlmFailure(message="malformed response", code="MALFORMED_RESPONSE")
    early_usage = UsageChunk(usage=TokenUsage(input_tokens=7, output_tokens=0))
    service = LlmService()
    service.register_adapter(
        ["p"],
        Scripted(
            [early_usage, Finish(reason=FinishError(failure=closed))],
            [Finish(reason=FinishError(failure=garbled))],
            reply("at last"),
        ),
    )
    notices: list[RetryNotice] = []
    chunks = await collect(service, options(), notices)
    assert [n.failure.code for n in notices] == ["STREAM_CLOSED", "MALFORMED_RESPONSE"]
    assert early_usage not in chunks
    assert assemble(chunks).content == (TextBlock(text="at last"),)


async def test_once_content_arrived_a_closed_stream_is_not_retried() -> None:
    closed = LlmFailure(message="the model server closed the stream", code="STREAM_CLOSED")
    service = LlmService()
    adapter = Scripted([*reply("partial")[:2], Finish(reason=FinishError(failure=closed))])
    service.register_adapter(["p"], adapter)
    notices: list[RetryNotice] = []
    chunks = await collect(service, options(), notices)
    assert notices == []
    assert len(adapter.calls) == 1
    assert chunks[-1].reason.failure.code == "STREAM_CLOSED"  # type: ignore[union-attr]


@pytest.mark.parametrize("wrapped", [False, True], ids=["adapter", "wrapped-by-a-plugin"])
async def test_a_source_that_releases_its_connection_after_the_finish_is_closed_to_its_end(
    wrapped: bool,
) -> None:
    """An adapter that holds its connection until it is closed after its finish (an
    ``async with`` around the stream), and needs a few awaits to release it: the
    consumer stops at the finish, and the task reading the source must not be
    cancelled halfway through that release (httpx's pool lost a connection each time,
    and a process stopped at its 101st request). Alone or behind a plugin wrapping
    ``llm/stream``, every attempt's release runs to its end."""

    class Pooled(Scripted):
        def __init__(self) -> None:
            super().__init__()
            self.checked_out = 0
            self.released = 0

        async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
            self.checked_out += 1
            try:
                for chunk in reply("hello"):
                    yield chunk
            finally:
                for _ in range(5):  # closing a socket, waking the pool's waiters
                    await asyncio.sleep(0)
                self.released += 1

    ctx = Context()
    service = LlmService(ctx)
    ctx.provide(LLM, service)
    adapter = Pooled()
    service.register_adapter(["p"], adapter)
    if wrapped:

        async def passing(
            options: GenerateOptions, next: Next[GenerateOptions, AsyncIterator[StreamChunk]]
        ) -> AsyncIterator[StreamChunk]:
            source = await next()

            async def relay() -> AsyncIterator[StreamChunk]:
                async for chunk in source:
                    yield chunk

            return relay()

        ctx.on(LLM_STREAM, passing)
    for _ in range(20):
        chunks = await collect(service, options(signal=asyncio.Event()))
        assert isinstance(chunks[-1], Finish)
        assert isinstance(chunks[-1].reason, FinishStop)
    for _ in range(20):  # what a wrapper left unclosed, the loop finalizes
        await asyncio.sleep(0)
    assert adapter.checked_out == 20
    assert adapter.released == 20
    await ctx.dispose()
