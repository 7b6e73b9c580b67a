"""Agents: the handle, the inbox, the turn and step loop, and the ``agents`` service.

This module is public API: plugins import from ``dsh.agent``.
"""

from __future__ import annotations

from dsh.agent.agent import Agent, AgentOptions, Edit, Remove
from dsh.agent.inbox import Inbox, InboxItem
from dsh.agent.interception import (
    Enter,
    PreStep,
    PromptAllow,
    PromptBlock,
    Reject,
    RequestError,
    Retry,
)
from dsh.agent.service import AgentService
from dsh.agent.signal import TurnSignal

__all__ = [
    "Agent",
    "AgentOptions",
    "AgentService",
    "Edit",
    "Enter",
    "Inbox",
    "InboxItem",
    "PreStep",
    "PromptAllow",
    "PromptBlock",
    "Reject",
    "Remove",
    "RequestError",
    "Retry",
    "TurnSignal",
]
