"""DeepSeek's web Search and Fetch, on the user's DeepSeek key.

Both are JSON endpoints of DeepSeek's API beside its models (``POST /v1/tools/search``
and ``POST /v1/tools/fetch``, billed per 1,000 requests that return something). They
go through the provider's adapter (:meth:`dsh.llm.LlmAdapter.post_json`), so the key
is sent exactly where the provider's model calls send it, and nowhere else.

The request and answer shapes are in this module only. Search: ``query`` (1-128
characters), ``count`` (1-50), ``need_content``, ``ori_question``; results carry
``title``, ``url``, ``snippet``, ``summary``, ``content``, ``date``, ``authority``,
``rerank_score``, ``site_name``. Fetch takes ``url`` and answers its ``title`` and
``content`` (Markdown); DeepSeek's guide says only "one URL to Markdown", so the
answer is read leniently (``content`` or ``markdown``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from dsh.llm import LlmAdapter, LlmError, ProviderReply

SEARCH_PATH = "tools/search"
FETCH_PATH = "tools/fetch"
REQUESTS_PER_SECOND = 5
"""DeepSeek's published limit for Search."""


class SearchHit(BaseModel):
    model_config = ConfigDict(extra="ignore")

    title: str = ""
    url: str
    snippet: str | None = None
    summary: str | None = None
    content: str | None = None
    date: str | None = None
    authority: float | None = None
    rerank_score: float | None = None
    site_name: str | None = None


class FetchedPage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    url: str | None = None
    title: str = ""
    content: str


class WebApiError(Exception):
    """DeepSeek refused or failed a search or fetch; the message says why."""


def versioned(path: str, base_url: str | None) -> str:
    """The API path below the provider's base URL: DeepSeek's tools live under
    ``/v1``, which a base URL may already end with."""
    if base_url is not None and base_url.rstrip("/").endswith("/v1"):
        return path
    return f"v1/{path}"


class RateLimiter:
    """At most ``rate`` requests started in any second, in call order."""

    def __init__(self, rate: int) -> None:
        self._rate = rate
        self._started: list[float] = []
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        async with self._lock:
            now = time.monotonic()
            self._started = [t for t in self._started if now - t < 1.0]
            if len(self._started) >= self._rate:
                await asyncio.sleep(1.0 - (now - self._started[0]))
                self._started.pop(0)
            self._started.append(time.monotonic())


class DeepSeekWeb:
    """Search and Fetch through one provider route's adapter."""

    def __init__(self, adapter: LlmAdapter, provider: str, *, timeout_s: float) -> None:
        self._adapter = adapter
        self._provider = provider
        self._timeout_s = timeout_s
        self._limiter = RateLimiter(REQUESTS_PER_SECOND)

    async def _post(self, path: str, body: dict[str, Any]) -> ProviderReply:
        await self._limiter.wait()
        full = versioned(path, self._adapter.api_base_url(self._provider))
        try:
            reply = await self._adapter.post_json(
                self._provider, full, body, timeout_s=self._timeout_s
            )
        except LlmError as error:
            raise WebApiError(error.failure.message) from None
        if reply.status != 200:
            raise WebApiError(f"{self._provider} answered {reply.status}: {_error_text(reply)}")
        return reply

    async def search(
        self, query: str, *, count: int, need_content: bool, question: str | None
    ) -> list[SearchHit]:
        body: dict[str, Any] = {"query": query, "count": count, "need_content": need_content}
        if question:
            body["ori_question"] = question[:128]
        reply = await self._post(SEARCH_PATH, body)
        data = reply.body
        results = data.get("results", data.get("data")) if isinstance(data, dict) else data
        if not isinstance(results, list):
            raise WebApiError(f"the search answer has no results list: {reply.text[:200]!r}")
        hits = []
        for entry in results:
            try:
                hits.append(SearchHit.model_validate(entry))
            except ValidationError:
                continue  # one odd result does not lose the others
        return hits

    async def fetch(self, url: str) -> FetchedPage:
        reply = await self._post(FETCH_PATH, {"url": url})
        data = reply.body
        if isinstance(data, dict) and "content" not in data and "markdown" in data:
            data = {**data, "content": data["markdown"]}
        try:
            return FetchedPage.model_validate(data)
        except ValidationError:
            raise WebApiError(f"the fetch answer has no content: {reply.text[:200]!r}") from None


def _error_text(reply: ProviderReply) -> str:
    body = reply.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return reply.text[:300] or "no details"
