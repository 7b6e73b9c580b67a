"""What the loop's interception points carry, and the decisions plugins return.

The hook specs themselves are declared in :mod:`dsh.hooks`:

- ``agent/prompt-submit`` (chain, before a turn opens): given a :class:`PromptSubmit`,
  :class:`PromptAllow`, which may rewrite the prompt and add context, or
  :class:`PromptBlock`, which drops it with a reason and opens no turn.
- ``agent/pre-step`` (chain, before each step): given a :class:`PreStep`,
  :class:`Enter` the messages that begin the step, or :class:`Reject` the turn (it
  ends ``blocked``).
- ``agent/request`` (chain): given a :class:`PreRequest`, the
  :class:`~dsh.llm.LlmCallConfig` of the next request; a listener may switch provider,
  model, effort or sampling.
- ``agent/request-error`` (chain, after a request failed for good): given a
  :class:`RequestError`, :class:`Retry` repeats the request within the same step; the
  default ends the turn with the error.
- ``agent/turn-stopping`` (first): the turn is about to end; ``agent.steer(...)``
  from a listener keeps it going.
- ``prompt/paste`` (first, from an interactive UI): what was pasted into the prompt
  (a path, say), or ``None`` for the clipboard's content the UI cannot read itself (an
  image: Ctrl+V); a listener that takes it returns a :class:`PasteResult`, the text
  the prompt shows instead and what to tell the person.
- ``prompt/attach`` (first, from a front end whose client sends bytes with a prompt:
  an editor's image): the :class:`Attachment` list; a listener that takes them returns
  :class:`Attached`, the blocks the prompt carries or why none is sent.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from dsh.agent_handle import AgentHandle
from dsh.control_chars import is_visible
from dsh.llm import Block, LlmCallConfig, LlmFailure, RetryPolicy, UserMessage
from dsh.policy.rules import Rule


@dataclass(frozen=True)
class PromptSubmit:
    """A queued prompt about to open a turn."""

    agent: AgentHandle
    message: UserMessage


@dataclass(frozen=True)
class PromptAllow:
    content: tuple[Block, ...] | None = None
    """Replaces the prompt's content when given."""
    additional_contexts: tuple[UserMessage, ...] = ()
    allow: tuple[Rule, ...] = ()
    """Permission rules (``Rule("bash", "git status:*")``, as ``parse_rules`` reads
    text) the turn this prompt opens may use without asking, beside the settings' own:
    for a prompt the person chose to run with them (a custom command's
    ``allowed-tools``). Deny rules, protected paths and the mode still decide first;
    the next turn asks again."""

    def __post_init__(self) -> None:
        # Rules were text once: a listener written then fails here, naming the fix,
        # rather than deep in the permission check of a later call.
        for rule in self.allow:
            if not isinstance(rule, Rule):
                raise TypeError(
                    f"PromptAllow.allow takes dsh.tools.Rule objects, not {rule!r}: "
                    "read text with dsh.tools.parse_rules"
                )


@dataclass(frozen=True)
class PasteResult:
    """A paste a plugin took: what to put in the prompt, and a line for the person."""

    text: str
    notice: str | None = None
    level: str = "info"
    """``info``, ``warning`` or ``error``."""


@dataclass(frozen=True)
class Attachment:
    """Bytes a front end's client sent with a prompt (an image an editor pasted)."""

    data: bytes
    media_type: str | None
    """As the client declared it: a listener judges the bytes themselves."""
    name: str
    """What to call it (the file name the client gave, else one made up)."""


@dataclass(frozen=True)
class Attached:
    """What ``prompt/attach`` made of the attachments: a block for each, in their order
    (stored, so the session can send them again), or why the prompt goes without them
    (then nothing of it is sent)."""

    blocks: tuple[Block, ...] = ()
    refusal: str | None = None


@dataclass(frozen=True)
class MentionChoice:
    """Something a plugin offers to complete an ``@`` the person is typing."""

    insert: str
    """What replaces the ``@token`` (its ``@`` included): ``@tracker:issue/12``."""
    label: str
    meta: str = ""
    """A few words beside the label (a description, a kind)."""
    more: bool = False
    """``insert`` is a prefix to go on from (``@tracker:``): no space is added after it
    and the choices for it follow."""

    def usable(self) -> bool:
        """Whether ``insert`` is one ``@token`` with nothing a terminal obeys: it comes
        from a plugin's source (a server's resource list), so the UIs check."""
        text = self.insert
        return text.startswith("@") and is_visible(text) and not any(c.isspace() for c in text)


@dataclass(frozen=True)
class PromptBlock:
    reason: str


PromptDecision = PromptAllow | PromptBlock


@dataclass(frozen=True)
class PreStep:
    agent: AgentHandle
    claimed: tuple[UserMessage, ...]
    turn: int
    step: int
    signal: asyncio.Event


@dataclass(frozen=True)
class Enter:
    messages: tuple[UserMessage, ...]


@dataclass(frozen=True)
class Reject:
    reason: str = ""


PreStepDecision = Enter | Reject


@dataclass(frozen=True)
class PreRequest:
    """A model request about to be built: the config proposed for it."""

    agent: AgentHandle
    config: LlmCallConfig


@dataclass(frozen=True)
class RequestError:
    agent: AgentHandle
    turn: int
    step: int
    provider: str
    failure: LlmFailure
    retry_policy: RetryPolicy
    signal: asyncio.Event


@dataclass(frozen=True)
class Retry:
    """Returned from ``agent/request-error``: send the request again, same step."""
