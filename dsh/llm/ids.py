"""Identifiers that cross module boundaries: plain strings, distinct to the type checker."""

from __future__ import annotations

import uuid
from typing import NewType

SessionId = NewType("SessionId", str)
"""Shared by a live agent and its durable session."""

CallId = NewType("CallId", str)
"""Issued by the provider; pairs a tool call with its result."""

MessageId = NewType("MessageId", str)
"""A uuid4 minted when a message is made; kept across every representation of it."""


def new_message_id() -> MessageId:
    return MessageId(str(uuid.uuid4()))


def new_session_id() -> SessionId:
    return SessionId(str(uuid.uuid4()))
