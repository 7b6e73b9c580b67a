"""The web plugin's event: one web request, logged with what it cost.

A search or fetch made through a provider is billed per request, not per token, so it
is its own ``web/request`` event whose type declares the paid request: ``/cost``, the
status bar, headless results and the session index count it without knowing this
plugin, at the price logged when it was made.
"""

from __future__ import annotations

from typing import Literal

from pydantic import NonNegativeFloat

from dsh.session import EventType, PaidRequest
from dsh.wire import Frozen


class WebRequest(Frozen):
    tool: Literal["search", "fetch"]
    backend: Literal["provider", "local"]
    provider: str | None = None
    """The provider whose key paid for it (``provider`` backend)."""
    target: str
    """The query searched for, or the URL fetched."""
    ok: bool
    cost: NonNegativeFloat | None = None
    """US dollars; None when free (failed, empty, or fetched locally) or unpriced."""


def _paid(data: WebRequest) -> PaidRequest | None:
    if data.backend != "provider" or not data.ok:
        return None
    return PaidRequest(f"web {data.tool}", data.cost)


WEB_REQUEST = EventType("web/request", WebRequest, paid_request=_paid)
