"""The agent handle: what plugins, tools, commands and front ends may use of one agent.

:class:`AgentHandle` is the public surface of :class:`dsh.agent.Agent` as a Protocol,
with the values its methods take and return. Plugins import it from ``dsh.agent``.
It lives here, beneath the agent, because the seams the agent is built on (a tool's
``ToolContext``, a renderer's ``PromptContext``, the questions service) name the
agent that calls them, and they cannot import the agent that imports them.

``send`` is the one delivery primitive, over (target, wakeup):

- ``followup`` (next-turn, wakes): a prompt that gets a turn of its own, in order;
- ``steer`` (next-step, wakes): joins the running turn at its next step; when no turn
  can take it, it becomes a follow-up;
- ``inject`` (next-step, no wake): context for the next step, or appended at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from dsh.kernel import Context
from dsh.llm import Block, LlmService, SessionId, UserMessage
from dsh.session import CancelCause, Session
from dsh.settings_tables import AgentOptions

T = TypeVar("T")

Status = Literal["idle", "running"]
"""``running`` from a waking send until the agent has no turn left to run."""
Target = Literal["next-turn", "next-step"]
Placement = Literal["queued", "steering"]


class RewindError(Exception):
    """A rewind that cannot be done (a turn runs, no such turn, one rewound already);
    the message says why and what can be chosen. Nothing was logged."""


@dataclass(frozen=True)
class InboxItem:
    """A prompt waiting in the inbox: ``queued`` for a turn of its own, or
    ``steering`` for the running turn's next step."""

    id: str
    message: UserMessage
    placement: Placement


@dataclass(frozen=True)
class Edit:
    """``update_inbox``: a queued prompt's new content."""

    content: tuple[Block, ...]


@dataclass(frozen=True)
class Remove:
    """``update_inbox``: take a queued prompt out."""


class AgentHandle(Protocol):
    """One agent: its session, its options, and how to talk to it."""

    @property
    def id(self) -> SessionId:
        """The session's id."""
        ...

    @property
    def session(self) -> Session:
        """The session's event log (read it, subscribe to it)."""
        ...

    @property
    def options(self) -> AgentOptions:
        """Provider, model, effort and limits, as of the next request."""
        ...

    @property
    def cwd(self) -> Path:
        """The working directory its tools run in."""
        ...

    @property
    def label(self) -> str | None:
        """Who this agent is to the person when it is not the one a front end shows (a
        subagent's description, said in approval dialogs); None for a session's own."""
        ...

    @property
    def parent(self) -> AgentHandle | None:
        """The live agent that delegated to this one (a subagent's parent); None for a
        session's own agent."""
        ...

    @property
    def ctx(self) -> Context:
        """The agent's scope: what is registered here is for this agent only, and goes
        when it is disposed."""
        ...

    @property
    def llm(self) -> LlmService:
        """The model service its requests go through."""
        ...

    @property
    def status(self) -> Status: ...

    @property
    def opened_at(self) -> int:
        """The log's length when this process took the session up: the events from
        here on are this run's."""
        ...

    @property
    def accepts_next_step(self) -> bool:
        """Whether a waking next-step send can join the running turn now."""
        ...

    def send(self, message: UserMessage, target: Target, wakeup: bool) -> InboxItem | None: ...

    def followup(self, message: UserMessage) -> InboxItem | None: ...

    def steer(self, message: UserMessage) -> InboxItem | None: ...

    def try_steer(self, message: UserMessage) -> bool:
        """Steer only if the running turn can still take it; never becomes a follow-up."""
        ...

    def inject(self, message: UserMessage) -> None:
        """Context for the model without running it: staged for the next step of the
        open turn, or appended to the log now when no turn is open."""
        ...

    def update_inbox(self, item_id: str, action: Edit | Remove) -> bool:
        """Edit or remove a queued prompt; False when it is no longer queued."""
        ...

    def set_options(self, **changes: Any) -> None:
        """Switch model, provider, effort or limits from the next request on."""
        ...

    def cancel(self, cause: CancelCause, *, keep_inbox: bool = False) -> None:
        """Abort the running turn (the first cause wins) and clear the inbox unless
        ``keep_inbox``. Does nothing while idle."""
        ...

    async def when_idle(self) -> None:
        """Return once no turn runs and none is about to."""
        ...

    async def run_maintenance(self, task: Callable[[], Awaitable[T]]) -> T:
        """Run ``task`` (say, compaction) while no turn can start; the agent must be idle."""
        ...

    async def flush(self, *, sync: bool = True) -> bool:
        """Store the session's events so far (``sync``: through a power cut too)."""
        ...

    def entered_context(self) -> dict[str, str]:
        """The text of each context entry as history holds it now, by entry name."""
        ...

    def rewind(self, turn: int, *, restore_id: str | None = None) -> UserMessage:
        """Take the conversation back to just before ``turn`` (``history/rewound``: the
        log keeps the rewound turns, the next request does not hold them) and return
        the prompt that opened it, to edit and send again. ``restore_id``: the
        workspace restore done with it. Raises :class:`RewindError` while a turn runs
        or is about to, or for a turn that is not there to rewind."""
        ...
