"""The title plugin's event types: a title, and the model call made for one.

``session/title`` declares the title it sets and the call it paid for (a ``provider``
title), so the catalog, the transcript's header, exports and every spend total read
them without knowing this plugin.
"""

from __future__ import annotations

from typing import Literal

from pydantic import NonNegativeInt

from dsh.llm import Purpose, TokenUsage
from dsh.session import EventType, PaidCall, SideAnswer
from dsh.wire import Frozen

PURPOSE = Purpose("session-title")
"""The purpose of the model call that writes a title."""


class SessionTitle(Frozen):
    title: str
    message_seqs: tuple[NonNegativeInt, ...] = ()
    source: Literal["fallback", "provider", "user"]
    provider: str | None = None
    model: str | None = None
    usage: TokenUsage | None = None
    """What the model call that made a ``provider`` title used: it is paid for too."""


class SessionTitleRequest(Frozen):
    provider: str
    model: str
    message_seqs: tuple[NonNegativeInt, ...] = ()


def _title(data: SessionTitle) -> str:
    return data.title


def _paid_call(data: SessionTitle) -> PaidCall | None:
    if data.provider is None or data.model is None or not data.usage:
        return None
    return PaidCall(data.provider, data.model, data.usage)


def _side_answer(data: SessionTitle) -> SideAnswer | None:
    if data.source != "provider":
        return None
    return SideAnswer(PURPOSE, data.title, data.usage)


TITLE = EventType(
    "session/title", SessionTitle, title=_title, paid_call=_paid_call, side_answer=_side_answer
)
TITLE_REQUEST = EventType("session/title-llm-request", SessionTitleRequest)
