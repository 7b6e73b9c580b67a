"""The subagents plugin's event: a child's paid call, counted in the parent's session.

A subagent's model calls are logged in its own session; each is logged again in the
parent's as a ``subagent/paid`` event whose type declares the paid call (or the paid
request, a child's web search), so the parent's ``/cost``, status bar, headless result
and index count what its children spent from the parent's log alone. A grandchild's
calls reach the grandparent the same way: the child's own ``subagent/paid`` events are
paid calls too.
"""

from __future__ import annotations

from dsh.llm import SessionId, TokenUsage
from dsh.session import EventType, PaidCall, PaidRequest
from dsh.wire import Frozen


class ChildCall(Frozen):
    provider: str
    model: str
    usage: TokenUsage


class ChildRequest(Frozen):
    service: str
    cost: float | None = None


class SubagentPaid(Frozen):
    session: SessionId
    """The child session whose call it was."""
    call: ChildCall | None = None
    request: ChildRequest | None = None


def _paid_call(data: SubagentPaid) -> PaidCall | None:
    if data.call is None:
        return None
    return PaidCall(data.call.provider, data.call.model, data.call.usage)


def _paid_request(data: SubagentPaid) -> PaidRequest | None:
    if data.request is None:
        return None
    return PaidRequest(data.request.service, data.request.cost)


SUBAGENT_PAID = EventType(
    "subagent/paid", SubagentPaid, paid_call=_paid_call, paid_request=_paid_request
)
