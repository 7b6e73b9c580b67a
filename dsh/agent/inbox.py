"""The agent's inbox: prompts waiting for a turn, and steering waiting for a step.

Two FIFOs. A *queued* item is the prompt of a turn of its own; *steering* joins the
running turn at its next step. Both are durable: each method that changes them logs
its event (``inbox/enqueued``, ``inbox/updated``, ``inbox/claimed``,
``inbox/discarded``), and nothing else changes them, so a prompt typed while the agent
worked survives a crash and is found again, still queued, when the session is
resumed (:meth:`Inbox.restore`). Two moves log nothing, because the log already says
all they do: steering left over when a turn ends waits as a queued prompt, which is
how a resumed log reads left-over steering too; and context *staged* for the next
step, which never enters the FIFOs, enters the log as a message when that step (or
the end of the turn) takes it.
"""

from __future__ import annotations

import itertools
import uuid
from collections import deque
from collections.abc import Iterable
from typing import Literal

from dsh.agent_handle import InboxItem, Placement
from dsh.llm import Block, UserMessage
from dsh.session import Session, SessionEvent
from dsh.session.payloads import InboxClaimed, InboxDiscarded, InboxEnqueued, InboxUpdated


class Inbox:
    def __init__(self, session: Session) -> None:
        self._session = session
        self._queued: deque[InboxItem] = deque()
        self._steering: deque[InboxItem] = deque()
        self._staged: list[UserMessage] = []
        self._sent = itertools.count()
        self._order: dict[str, int] = {}
        """Each live item's place in the order of enqueueing (the log's order)."""

    # ------------------------------------------------------------------ reading

    @property
    def queued(self) -> tuple[InboxItem, ...]:
        return tuple(self._queued)

    @property
    def steering(self) -> tuple[InboxItem, ...]:
        return tuple(self._steering)

    @property
    def staged(self) -> tuple[UserMessage, ...]:
        """Context waiting for the running turn's next step."""
        return tuple(self._staged)

    @property
    def next_queued(self) -> InboxItem | None:
        """The prompt the next turn would answer."""
        return self._queued[0] if self._queued else None

    @property
    def has_queued(self) -> bool:
        return bool(self._queued)

    @property
    def has_next_step(self) -> bool:
        return bool(self._steering or self._staged)

    # ------------------------------------------------------------------ changing

    def enqueue(self, message: UserMessage, placement: Placement) -> InboxItem:
        item = InboxItem(uuid.uuid4().hex, message, placement)
        self._session.append(
            "inbox/enqueued", InboxEnqueued(item_id=item.id, message=message, placement=placement)
        )
        (self._queued if placement == "queued" else self._steering).append(item)
        self._order[item.id] = next(self._sent)
        return item

    def edit(self, item_id: str, content: tuple[Block, ...]) -> bool:
        for index, item in enumerate(self._queued):
            if item.id == item_id:
                message = item.message.model_copy(update={"content": content})
                self._session.append(
                    "inbox/updated", InboxUpdated(item_id=item_id, message=message)
                )
                self._queued[index] = InboxItem(item_id, message, "queued")
                return True
        return False

    def remove(
        self,
        item_id: str,
        reason: Literal["removed", "blocked"] = "removed",
        detail: str | None = None,
    ) -> bool:
        """Take a queued prompt out: the person removed it, or a ``prompt-submit``
        hook blocked it (``detail`` says why)."""
        for item in self._queued:
            if item.id == item_id:
                self._queued.remove(item)
                self._discard([item], reason, detail)
                return True
        return False

    def claim_turn(self) -> InboxItem | None:
        if not self._queued:
            return None
        item = self._queued.popleft()
        self._order.pop(item.id, None)
        self._session.append("inbox/claimed", InboxClaimed(item_ids=(item.id,)))
        return item

    def claim_step(self) -> tuple[list[InboxItem], list[UserMessage]]:
        """Every steering item, and every staged context message."""
        items, staged = list(self._steering), list(self._staged)
        self._steering.clear()
        self._staged.clear()
        for item in items:
            self._order.pop(item.id, None)
        if items:
            self._session.append("inbox/claimed", InboxClaimed(item_ids=tuple(i.id for i in items)))
        return items, staged

    def stage(self, *messages: UserMessage) -> None:
        """Context for the running turn's next step (injected, or a tool's)."""
        self._staged.extend(messages)

    def close_turn(self) -> list[UserMessage]:
        """The turn ended: left-over steering waits as queued prompts, and the staged
        context is handed back, for the log."""
        # In the order sent, as a resumed log reads them: a steer the turn no longer
        # took goes before a prompt queued after it, not behind it.
        waiting = sorted([*self._queued, *self._steering], key=lambda i: self._order.get(i.id, -1))
        self._queued = deque(waiting)
        self._steering.clear()
        staged, self._staged = self._staged, []
        return staged

    def clear(self, reason: Literal["cancelled", "disposed"]) -> None:
        self._discard([*self._queued, *self._steering], reason)
        self._queued.clear()
        self._steering.clear()
        self._staged.clear()

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
        self._queued.extend(InboxItem(i.id, i.message, "queued") for i in pending.values())

    def _discard(
        self,
        items: Iterable[InboxItem],
        reason: Literal["removed", "cancelled", "disposed", "blocked"],
        detail: str | None = None,
    ) -> None:
        ids = tuple(item.id for item in items)
        for item_id in ids:
            self._order.pop(item_id, None)
        if ids:
            self._session.append(
                "inbox/discarded", InboxDiscarded(item_ids=ids, reason=reason, detail=detail)
            )
