"""What goes wrong, as an :class:`~dsh.llm.LlmFailure`.

:func:`http_failure` maps an HTTP error from a model server (its status, headers and
body) to a failure in the provider's own words, with the retry hints its headers give
(:func:`retry_after_ms`, :func:`reset_at_ms`); :func:`malformed` is a response of the
wrong shape.

Part of the chat-completions library (see :mod:`dsh_plugins._shared.chat_completions`).
"""

from __future__ import annotations

import datetime
import email.utils
import json
import re
import time
from collections.abc import Mapping
from typing import Any

from dsh.llm import (
    LlmFailure,
)


def malformed(what: str) -> LlmFailure:
    return LlmFailure(
        message=f"malformed response from the model server: {what}", code="MALFORMED_RESPONSE"
    )


def provider_code(error: Mapping[str, Any]) -> str | None:
    code = error.get("code") or error.get("type")
    return str(code).upper() if code else None


_OVERFLOW = re.compile(r"context (length|window)|maximum context|too many tokens|too long", re.I)
_QUOTA = re.compile(r"insufficient (balance|quota)|quota|billing|credit", re.I)
_DURATION = re.compile(
    r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?$"
)


def _seconds(value: str) -> float | None:
    """A header duration: ``12``, ``1.5``, ``6m0s``, ``250ms``; None if unreadable."""
    value = value.strip()
    try:
        return float(value)
    except ValueError:
        pass
    match = _DURATION.match(value)
    if not match or not any(match.groups()):
        return None
    hours, minutes, secs, millis = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + secs + millis / 1000


def retry_after_ms(headers: Mapping[str, str], now: float | None = None) -> int | None:
    """``Retry-After`` as milliseconds: seconds, or an HTTP date."""
    value = headers.get("retry-after")
    if not value:
        return None
    seconds = _seconds(value)
    if seconds is None:
        try:
            moment = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.UTC)
        seconds = moment.timestamp() - (now if now is not None else time.time())
    return max(0, round(seconds * 1000))


def reset_at_ms(headers: Mapping[str, str], now: float | None = None) -> int | None:
    """When the provider says its rate limit resets, from the usual headers."""
    for name in (
        "x-ratelimit-reset-requests",
        "x-ratelimit-reset-tokens",
        "x-ratelimit-reset",
        "ratelimit-reset",
    ):
        value = headers.get(name)
        if not value:
            continue
        seconds = _seconds(value)
        if seconds is None:
            continue
        base = now if now is not None else time.time()
        # Some servers send an epoch second instead of a duration.
        return round(seconds * 1000) if seconds > 1_000_000_000 else round((base + seconds) * 1000)
    return None


def http_failure(
    status: int,
    headers: Mapping[str, str],
    body: str,
    *,
    provider: str,
    credential: str | None,
) -> LlmFailure:
    """What an HTTP error from a model server means, in the provider's own words."""
    detail = body.strip()
    try:
        parsed = json.loads(body)
        error = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
        if isinstance(error, dict) and error.get("message"):
            detail = str(error["message"])
        elif isinstance(error, str):
            detail = error
    except ValueError:
        pass
    detail = detail[:2000] or f"HTTP {status}"
    if status in (401, 403):
        fix = f"; check {credential}" if credential else ""
        message, code = f"{provider} rejected the credentials ({status}): {detail}{fix}", "AUTH"
    elif status == 402 or (status in (400, 403, 429) and _QUOTA.search(detail)):
        message, code = f"{provider} account: {detail}", "QUOTA"
    elif status == 429:
        message, code = f"{provider} is rate limiting requests: {detail}", "RATE_LIMIT"
    elif status == 400 and _OVERFLOW.search(detail):
        message, code = (
            f"the conversation is too long for the model: {detail}",
            "CONTEXT_WINDOW_EXCEEDED",
        )
    elif status in (400, 404, 413, 422):
        message, code = f"{provider} refused the request ({status}): {detail}", "INVALID_REQUEST"
    elif status >= 500:
        message, code = f"{provider} server error ({status}): {detail}", "SERVER"
    else:
        message, code = f"{provider} answered HTTP {status}: {detail}", f"HTTP_{status}"
    return LlmFailure(
        message=message,
        code=code,
        status=status,
        provider_retry_after_ms=retry_after_ms(headers),
        reset_at_ms=reset_at_ms(headers),
        request_id=headers.get("x-request-id") or headers.get("request-id"),
    )
