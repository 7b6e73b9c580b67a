"""The ``llm`` service: provider routes to adapters, call preparation, and streaming.

Adapters register the provider routes they serve and get back a registration that
releases them (and closes the adapter) or swaps them atomically. ``prepare_call``
turns a call config into what a request needs: adapter defaults filled in and marked,
an unsupported reasoning effort refused rather than clamped. ``stream`` runs an
attempt through the ``llm/stream`` waterfall, turns any raise into an error finish,
honours a cancellation signal, and retries a retryable failure with backoff, but
only while nothing has reached the caller yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsh.kernel import ServiceKey
from dsh.llm.adapter import CatalogEntry, LlmAdapter, RetryPolicy
from dsh.llm.hooks import LLM_RETRY, LLM_STREAM, RetryNotice
from dsh.llm.request import (
    AdapterDefaults,
    GenerateOptions,
    LlmCallConfig,
    ModelInfo,
    ResolvedModel,
)
from dsh.llm.stream import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishAborted,
    FinishError,
    LlmError,
    LlmFailure,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    TokenUsage,
    ToolCallDelta,
)

if TYPE_CHECKING:
    from dsh.kernel import Context

_CONTENT = (BlockStart, TextDelta, ReasoningDelta, ToolCallDelta, BlockEnd)
"""Chunks that show the user something: after one, a failed attempt is not retried."""


class RouteConflictError(ValueError):
    """A provider route is already served by another adapter."""


@dataclass(frozen=True)
class PreparedCall:
    config: LlmCallConfig
    adapter_defaults: AdapterDefaults
    model: ResolvedModel
    retry_policy: RetryPolicy

    @property
    def context_window(self) -> int | None:
        return self.model.context_window


def failure_of(finish: Finish | None) -> LlmFailure | None:
    match finish:
        case Finish(reason=FinishError(failure=failure) | FinishAborted(failure=failure)):
            return failure
    return None


def _error(message: str, code: str) -> Finish:
    return Finish(reason=FinishError(failure=LlmFailure(message=message, code=code)))


ABORTED = Finish(
    reason=FinishAborted(failure=LlmFailure(message="the request was cancelled", code="ABORTED"))
)


class AdapterRegistration:
    """Holds routes for one adapter. Call it to release them; ``replace`` swaps them."""

    def __init__(self, service: LlmService, adapter: LlmAdapter) -> None:
        self._service = service
        self.adapter = adapter
        self.providers: tuple[str, ...] = ()
        self.disposed = False

    def replace(self, providers: Iterable[str]) -> None:
        """Serve exactly ``providers`` from now on; all or nothing."""
        if self.disposed:
            raise LlmError(
                LlmFailure(
                    message="the adapter registration was released", code="REGISTRATION_DISPOSED"
                )
            )
        self._service._swap(self, tuple(providers))

    def __call__(self) -> Awaitable[None]:
        return self.dispose()

    async def dispose(self) -> None:
        if self.disposed:
            return
        self.disposed = True
        self._service._swap(self, ())
        await self.adapter.aclose()


class LlmService:
    def __init__(
        self,
        ctx: Context | None = None,
        *,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._ctx = ctx
        self._routes: dict[str, AdapterRegistration] = {}
        self._sleep = sleep
        self._jitter = jitter

    def bind_context(self, ctx: Context) -> BoundLlmService:
        return BoundLlmService(self, ctx)

    # ------------------------------------------------------------------ routes

    def register_adapter(
        self, providers: Iterable[str], adapter: LlmAdapter
    ) -> AdapterRegistration:
        routes = tuple(providers)
        if not routes:
            raise ValueError("an adapter must serve at least one provider route")
        registration = AdapterRegistration(self, adapter)
        self._swap(registration, routes)
        return registration

    def _swap(self, registration: AdapterRegistration, routes: tuple[str, ...]) -> None:
        for route in routes:
            if not route or not route.replace("-", "").replace("_", "").isalnum():
                raise ValueError(f"invalid provider route name {route!r}")
            holder = self._routes.get(route)
            if holder is not None and holder is not registration:
                raise RouteConflictError(f"provider {route!r} is already served")
        for route in registration.providers:
            self._routes.pop(route, None)
        for route in routes:
            self._routes[route] = registration
        registration.providers = routes

    def providers(self) -> list[str]:
        return sorted(self._routes)

    def adapter(self, provider: str) -> LlmAdapter:
        registration = self._routes.get(provider)
        if registration is None:
            known = ", ".join(self.providers()) or "none"
            raise LlmError(
                LlmFailure(
                    message=f"no adapter serves provider {provider!r} (configured: {known})",
                    code="NO_ADAPTER",
                )
            )
        return registration.adapter

    async def list_models(self, provider: str | None = None) -> list[ModelInfo]:
        """Every route's advisory catalog (or one route's); a failing catalog is empty."""
        routes = [provider] if provider is not None else self.providers()
        found: list[ModelInfo] = []
        for route in routes:
            try:
                found.extend(await self.adapter(route).list_models(route))
            except Exception:
                continue
        return found

    def resolve(self, provider: str, model: str) -> ResolvedModel:
        return self.adapter(provider).resolve_model(provider, model)

    async def catalog(self, provider: str) -> list[CatalogEntry]:
        """The provider's models (its listing merged with what its adapter knows),
        each with its known facts and price: what ``dsh models`` and ``/model`` show."""
        registration = self._routes.get(provider)
        if registration is None:
            return []
        entries: list[CatalogEntry] = []
        listed = await self.list_models(provider)
        offered = {info.id: info.offered for info in listed}
        for info in listed:
            try:
                resolved = registration.adapter.resolve_model(provider, info.id)
            except Exception:
                resolved = ResolvedModel(provider=provider, id=info.id, name=info.name)
            if resolved.name == resolved.id and info.name != info.id:
                resolved = resolved.model_copy(update={"name": info.name})
            entries.append(
                CatalogEntry(
                    model=resolved,
                    price=registration.adapter.price(provider, info.id),
                    offered=offered.get(resolved.sent_as, info.offered)
                    if resolved.sent_as
                    else info.offered,
                )
            )
        return entries

    def cost(
        self, provider: str, model: str, usage: TokenUsage, at: datetime.datetime | None = None
    ) -> float | None:
        """What one call cost in US dollars at ``at`` (default: now), if the adapter
        knows the model's price."""
        registration = self._routes.get(provider)
        if registration is None:
            return None
        price = registration.adapter.price(provider, model)
        return price.cost(usage, at) if price is not None else None

    # ------------------------------------------------------------------ calls

    def prepare_call(self, config: LlmCallConfig) -> PreparedCall:
        """Fill in the exact model's defaults, marking them, and check the effort."""
        adapter = self.adapter(config.provider)
        model = adapter.resolve_model(config.provider, config.model)
        updates: dict[str, Any] = {}
        defaults: dict[str, bool] = {}
        if config.reasoning_effort is not None:
            if model.reasoning is None or not model.reasoning.accepts(config.reasoning_effort):
                offered = (
                    ", ".join(e.id for e in model.reasoning.efforts) if model.reasoning else "none"
                )
                raise LlmError(
                    LlmFailure(
                        message=(
                            f"{config.provider}/{config.model} does not accept reasoning effort "
                            f"{config.reasoning_effort!r} (it accepts: {offered})"
                        ),
                        code="UNSUPPORTED_REASONING_EFFORT",
                    )
                )
        elif model.reasoning is not None and model.reasoning.default_effort is not None:
            updates["reasoning_effort"] = model.reasoning.default_effort
            defaults["reasoning_effort"] = True
        if config.max_tokens is None and model.default_max_tokens is not None:
            updates["max_tokens"] = model.default_max_tokens
            defaults["max_tokens"] = True
        return PreparedCall(
            config=config.model_copy(update=updates),
            adapter_defaults=AdapterDefaults(**defaults),
            model=model,
            retry_policy=adapter.retry_policy,
        )

    async def attempt(self, options: GenerateOptions) -> AsyncGenerator[StreamChunk, None]:
        """One attempt: the adapter's chunks, always ending in exactly one ``finish``."""
        try:
            adapter = self.adapter(options.provider)
        except LlmError as error:
            yield Finish(reason=FinishError(failure=error.failure))
            return
        source: AsyncIterator[StreamChunk]
        if self._ctx is not None:
            source = await self._ctx.waterfall(LLM_STREAM, options, default=adapter.stream)
        else:
            source = adapter.stream(options)
        finished = False
        guarded = _until_cancelled(source, options.signal)
        try:
            async for chunk in guarded:
                yield chunk
                if isinstance(chunk, Finish):
                    finished = True
                    return
        except LlmError as error:
            finished = True
            yield Finish(reason=FinishError(failure=error.failure))
        except Exception as error:
            finished = True
            yield _error(f"the {options.provider} adapter failed: {error!r}", "ADAPTER_FAILURE")
        finally:
            await guarded.aclose()
            await _close(source)  # already closed, unless the consumer left early
        if not finished:
            yield _error("the stream ended without a finish", "STREAM_CLOSED")

    async def stream(
        self,
        options: GenerateOptions,
        *,
        on_retry: Callable[[RetryNotice], Any] | None = None,
    ) -> AsyncIterator[StreamChunk]:
        """Attempts until one succeeds, fails for good, or has delivered content.

        Until the first block starts, what an attempt sends (its usage so far) is held
        back: an attempt that fails then is retried as if it never started, and what it
        sent is dropped with it."""
        retry = 0
        while True:
            started = False
            held: list[StreamChunk] = []
            finish: Finish | None = None
            async with contextlib.aclosing(self.attempt(options)) as attempt:
                async for chunk in attempt:
                    if isinstance(chunk, Finish):
                        finish = chunk
                        break
                    if not started:
                        if not isinstance(chunk, _CONTENT):
                            held.append(chunk)
                            continue
                        started = True
                        for early in held:
                            yield early
                        held = []
                    yield chunk
            assert finish is not None  # attempt() always ends with one
            failure = failure_of(finish)
            policy = self._policy(options.provider)
            if (
                failure is None
                or started
                or isinstance(finish.reason, FinishAborted)
                or failure.code not in policy.retryable_codes | policy.retryable_before_content
                or retry >= policy.max_retries
            ):
                for early in held:
                    yield early
                yield finish
                return
            retry += 1
            delay = policy.delay_ms(retry, failure.provider_retry_after_ms, self._jitter())
            notice = RetryNotice(
                provider=options.provider,
                model=options.model,
                retry=retry,
                max_retries=policy.max_retries,
                delay_ms=delay,
                failure=failure,
            )
            if on_retry is not None:
                on_retry(notice)
            if self._ctx is not None:
                self._ctx.emit(LLM_RETRY, notice)
            if await _wait_or_cancel(self._sleep(delay / 1000), options.signal):
                yield ABORTED
                return

    def _policy(self, provider: str) -> RetryPolicy:
        registration = self._routes.get(provider)
        return registration.adapter.retry_policy if registration else RetryPolicy(max_retries=0)


class BoundLlmService:
    """The service as one context sees it: adapters it registers go when it goes."""

    def __init__(self, service: LlmService, ctx: Context) -> None:
        self._service = service
        self._ctx = ctx

    def register_adapter(
        self, providers: Iterable[str], adapter: LlmAdapter
    ) -> AdapterRegistration:
        registration = self._service.register_adapter(providers, adapter)
        self._ctx.effect(lambda: registration.dispose)
        return registration

    def __getattr__(self, name: str) -> Any:
        return getattr(self._service, name)


_END = object()
_NOTHING = object()

CLOSE_GRACE_S = 5.0
"""How long a source that has sent its finish may take to close (an adapter releasing
its connection): closing is cancelled only past this, since a close cut short can
leave a connection checked out of its pool for good."""


async def _until_cancelled(
    source: AsyncIterator[StreamChunk], signal: Any
) -> AsyncGenerator[StreamChunk, None]:
    """``source``'s chunks until ``signal`` (an ``asyncio.Event``) is set; then an
    aborted finish, with the source's pending read cancelled so the connection closes
    at once. One task reads the source into a queue, so streaming costs no task per
    chunk; text that has queued up meanwhile (a read's worth, at 500 tokens/s) is
    handed over as one delta, so each consumer downstream (the log, every UI) pays
    once for it rather than once a token.

    The task that reads the source also closes it, once it has read the finish: the
    consumer stops at the finish and would otherwise cancel that task while the
    source releases its connection (an adapter's ``async with`` around the stream,
    left after the finish), which httpx cannot survive: the connection stays checked
    out, and after a hundred of them no request gets one."""
    if signal is None:
        async for chunk in source:
            yield chunk
        return
    if signal.is_set():
        yield ABORTED
        return
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for chunk in source:
                queue.put_nowait(chunk)
                if isinstance(chunk, Finish):
                    break  # nothing comes after a finish
        except Exception as error:  # handed to the consumer, who raises it
            queue.put_nowait(error)
        else:
            queue.put_nowait(_END)
        finally:
            await _close(source)

    async def watch() -> None:
        await signal.wait()
        queue.put_nowait(_END)

    pumper = asyncio.ensure_future(pump())
    watcher = asyncio.ensure_future(watch())
    held: Any = _NOTHING  # taken from the queue while joining deltas, not joined
    finished = False  # the source's finish (or its end) was read: it is closing itself
    try:
        while True:
            if held is not _NOTHING:
                item, held = held, _NOTHING
            else:
                item = await queue.get()
            if signal.is_set():
                # Close the source (and its connection) now, not when this generator is
                # eventually closed: the consumer may just stop iterating.
                pumper.cancel()
                await asyncio.gather(pumper, return_exceptions=True)
                yield ABORTED
                return
            if item is _END:
                finished = True
                return
            if isinstance(item, Exception):
                raise item
            if isinstance(item, TextDelta | ReasoningDelta) and not queue.empty():
                item, held = _joined(item, queue)
            if isinstance(item, Finish):
                finished = True
            yield item
    finally:
        watcher.cancel()
        try:
            if finished and not pumper.done():
                await asyncio.wait({pumper}, timeout=CLOSE_GRACE_S)
        finally:
            pumper.cancel()
            await asyncio.gather(pumper, watcher, return_exceptions=True)


async def _close(source: AsyncIterator[StreamChunk]) -> None:
    close = getattr(source, "aclose", None)
    if close is not None:
        await close()


def _joined(
    delta: TextDelta | ReasoningDelta, queue: asyncio.Queue[Any]
) -> tuple[TextDelta | ReasoningDelta, Any]:
    """``delta`` with the deltas of its block queued right after it, and the first
    item after them (``_NOTHING`` if the queue ran out first)."""
    texts = [delta.text]
    following: Any = _NOTHING
    while not queue.empty():
        item = queue.get_nowait()
        if type(item) is not type(delta) or item.index != delta.index:
            following = item
            break
        texts.append(item.text)
    if len(texts) > 1:
        delta = type(delta)(index=delta.index, text="".join(texts))
    return delta, following


async def _wait_or_cancel(sleeping: Awaitable[Any], signal: Any) -> bool:
    """Sleep unless ``signal`` is set first; True if it was."""
    if signal is None:
        await sleeping
        return False
    sleeper = asyncio.ensure_future(sleeping)
    waiter = asyncio.ensure_future(signal.wait())
    try:
        await asyncio.wait({sleeper, waiter}, return_when=asyncio.FIRST_COMPLETED)
        return bool(signal.is_set())
    finally:
        sleeper.cancel()
        waiter.cancel()
        await asyncio.gather(sleeper, waiter, return_exceptions=True)


LLM: ServiceKey[BoundLlmService] = ServiceKey("llm")
"""Model calls and provider routes (``register_adapter``)."""
