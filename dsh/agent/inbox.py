"""The agent's inbox: prompts waiting for a turn, and steering waiting for a step.

Two FIFOs. A *queued* item is the prompt of a turn of its own; *steering* joins the
running turn at its next step. Both are durable: every change is a log-only event, so
a prompt typed while the agent worked survives a crash and is found again, still
queued, when the session is resumed. Injected context never enters the FIFOs: it is
staged for the next step (or appended at once when no turn is open).
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from dsh.llm import Block, UserMessage
from dsh.session import Session, SessionEvent
from dsh.session.events import InboxClaimed, InboxDiscarded, InboxEnqueued, InboxUpdated

Placement = Literal["queued", "steering"]


@dataclass(frozen=True)
class InboxItem:
    id: str
    message: UserMessage
    placement: Placement


class Inbox:
    def __init__(self, session: Session) -> None:
        self._session = session
        self.queued: deque[InboxItem] = deque()
        self.steering: deque[InboxItem] = deque()
        self.injected: list[UserMessage] = []

    @property
    def has_queued(self) -> bool:
        return bool(self.queued)

    @property
    def has_next_step(self) -> bool:
        return bool(self.steering or self.injected)

    def enqueue(self, message: UserMessage, placement: Placement) -> InboxItem:
        item = InboxItem(uuid.uuid4().hex, message, placement)
        self._session.append(
            "inbox/enqueued", InboxEnqueued(item_id=item.id, message=message, placement=placement)
        )
        (self.queued if placement == "queued" else self.steering).append(item)
        return item

    def edit(self, item_id: str, content: tuple[Block, ...]) -> bool:
        for index, item in enumerate(self.queued):
            if item.id == item_id:
                message = item.message.model_copy(update={"content": content})
                self._session.append(
                    "inbox/updated", InboxUpdated(item_id=item_id, message=message)
                )
                self.queued[index] = InboxItem(item_id, message, "queued")
                return True
        return False

    def remove(self, item_id: str) -> bool:
        for item in self.queued:
            if item.id == item_id:
                self.queued.remove(item)
                self.discard([item], "removed")
                return True
        return False

    def claim_turn(self) -> InboxItem | None:
        if not self.queued:
            return None
        item = self.queued.popleft()
        self._session.append("inbox/claimed", InboxClaimed(item_ids=(item.id,)))
        return item

    def claim_step(self) -> tuple[list[InboxItem], list[UserMessage]]:
        """Every steering item, and every staged injection."""
        items, injected = list(self.steering), list(self.injected)
        self.steering.clear()
        self.injected.clear()
        if items:
            self._session.append("inbox/claimed", InboxClaimed(item_ids=tuple(i.id for i in items)))
        return items, injected

    def discard(
        self,
        items: Iterable[InboxItem],
        reason: Literal["removed", "cancelled", "disposed", "blocked"],
        detail: str | None = None,
    ) -> None:
        ids = tuple(item.id for item in items)
        if ids:
            self._session.append(
                "inbox/discarded", InboxDiscarded(item_ids=ids, reason=reason, detail=detail)
            )

    def clear(self, reason: Literal["cancelled", "disposed"]) -> None:
        self.discard([*self.queued, *self.steering], reason)
        self.queued.clear()
        self.steering.clear()
        self.injected.clear()

    def restore(self, events: Iterable[SessionEvent]) -> None:
        """Rebuild the FIFOs from a stored log: what was enqueued and never claimed,
        discarded or run. Steering left over from a closed turn waits as a prompt."""
        pending: dict[str, InboxItem] = {}
        for event in events:
            match event.data:
                case InboxEnqueued(item_id=item_id, message=message, placement=placement):
                    pending[item_id] = InboxItem(item_id, message, placement)
                case InboxUpdated(item_id=item_id, message=message) if item_id in pending:
                    pending[item_id] = InboxItem(item_id, message, pending[item_id].placement)
                case InboxClaimed(item_ids=ids) | InboxDiscarded(item_ids=ids):
                    for item_id in ids:
                        pending.pop(item_id, None)
        self.queued.extend(InboxItem(i.id, i.message, "queued") for i in pending.values())
