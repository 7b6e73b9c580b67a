"""Agents: the handle, the inbox, the turn and step loop, and the ``agents`` service.

This module is public API: plugins import from ``dsh.agent``. A plugin names an agent
by :class:`AgentHandle`, the Protocol :class:`Agent` implements.
"""

from __future__ import annotations

from dsh.agent.agent import Agent
from dsh.agent.inbox import Inbox
from dsh.agent.interception import (
    Attached,
    Attachment,
    Enter,
    MentionChoice,
    PasteResult,
    PreRequest,
    PreStep,
    PreStepDecision,
    PromptAllow,
    PromptBlock,
    PromptDecision,
    PromptSubmit,
    Reject,
    RequestError,
    Retry,
)
from dsh.agent.service import AgentService
from dsh.agent.signal import TurnSignal
from dsh.agent_handle import (
    AgentHandle,
    Edit,
    InboxItem,
    Placement,
    Remove,
    RewindError,
    Status,
    Target,
)
from dsh.settings_tables import AgentOptions

__all__ = [
    "Agent",
    "AgentHandle",
    "AgentOptions",
    "AgentService",
    "Attached",
    "Attachment",
    "Edit",
    "Enter",
    "Inbox",
    "InboxItem",
    "MentionChoice",
    "PasteResult",
    "Placement",
    "PreRequest",
    "PreStep",
    "PreStepDecision",
    "PromptAllow",
    "PromptBlock",
    "PromptDecision",
    "PromptSubmit",
    "Reject",
    "Remove",
    "RequestError",
    "Retry",
    "RewindError",
    "Status",
    "Target",
    "TurnSignal",
]
