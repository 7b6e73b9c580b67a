"""What a front end gives its session controller: the command line's choices
(:class:`SessionChoice`), and how it shows a session and asks the person
(:class:`UserInterface`, its :class:`Dialogs` included).

The TUI, plain mode, ``dsh -p`` and ``dsh acp`` each implement :class:`UserInterface`;
the :class:`~dsh.ui.session_controller.SessionController` does the rest, the same for
all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from dsh.agent import AgentHandle
    from dsh.frontend import Kind, ToolServer
    from dsh.permission_modes import PermissionMode
    from dsh.sandbox import Policy
    from dsh.session import SessionBusyError, SessionEvent
    from dsh.settings import Settings
    from dsh.tools.approval import ApprovalDecision, ApprovalRequest
    from dsh.tools.plan_review import PlanDecision, PlanReview
    from dsh.tools.questions import Answer, Question
    from dsh.ui.opening import BusyChoice
    from dsh.ui.trusting import TrustAnswer, TrustQuestion


@dataclass(frozen=True, kw_only=True)
class SessionChoice:
    """What every front end takes from the command line: where, which session, which
    model. Each front end's request adds what only it has."""

    prompt: str | None = None
    """Sent first, once the session is open."""
    cwd: Path | None = None
    home: Path | None = None
    """dsh's own folder (None: ``$DSH_HOME`` or its default)."""
    resume: str | None = None
    pick: bool = False
    """``--resume`` without an id: the person picks the session first."""
    continue_last: bool = False
    fork: bool = False
    """``--fork-session``: the resumed session continues in a new one."""
    wait: bool = False
    """``--wait``: a session another dsh writes is opened once that one closes it."""
    model: str | None = None
    provider: str | None = None
    effort: str | None = None
    permission_mode: PermissionMode | None = None
    sandbox: Policy | None = None
    """``--sandbox``: the sandbox policy, over ``[sandbox] policy``."""
    trust: bool = False
    """``--trust``: the project's own configuration applies in full for this run."""
    plugin_configs: dict[str, dict[str, Any]] | None = None
    """Replaces the configured plugin settings (the demo's scripted server)."""
    tool_servers: tuple[ToolServer, ...] = ()
    """MCP servers the front end's client offers its sessions (an editor's)."""
    settings: Settings | None = None
    """The process's settings, when the front end loaded them already (the TUI, which
    reads ``[tui]`` before it paints; ``trust`` applied); else the controller loads
    them. Either way they are read once (:meth:`SessionController.settings`)."""


class Dialogs(Protocol):
    """What the controller asks the person through a front end. Where nobody can
    answer (a script on stdin, ``dsh -p``), each returns what "no answer" means."""

    async def ask_trust(self, question: TrustQuestion) -> TrustAnswer:
        """The project's configuration would change what dsh does: trust it?
        ("later" when nobody can say)."""
        ...

    async def set_up(self, home: Path, settings: Settings) -> bool | None:
        """First run: the chance to set a model provider up. True: the person did (the
        settings are read again); False: they left (start-up ends); None: there was
        nothing to set up, or this front end sets nothing up."""
        ...

    async def ask_busy(self, busy: SessionBusyError) -> BusyChoice | None:
        """The session to open is written by another dsh: one of
        :data:`~dsh.ui.opening.BUSY_CHOICES`, or None (start-up ends)."""
        ...

    async def ask_approval(self, request: ApprovalRequest) -> ApprovalDecision:
        """The ``approvals`` service's approver (wired when :attr:`UserInterface.answers`)."""
        ...

    async def ask_questions(self, questions: Sequence[Question]) -> list[Answer] | None:
        """The ``questions`` service's answerer: None when the person dismissed them."""
        ...

    async def ask_plan(self, review: PlanReview) -> PlanDecision:
        """The ``approvals`` service's plan reviewer: approve the plan (and the mode to
        carry it out in) or send it back with a note."""
        ...

    async def choose(
        self, title: str, items: Sequence[str], *, current: int | None = None
    ) -> int | None:
        """The index of the item the person picks, or None: they closed the list, or
        nobody is there to ask."""
        ...

    async def pick_session(self) -> str | None:
        """A session id the person picks (``/resume`` alone, ``--resume`` without an
        id), or None."""
        ...


class UserInterface(Dialogs, Protocol):
    """A front end, as the controller sees it: it shows lines and the session on
    screen, and asks the person (:class:`Dialogs`)."""

    @property
    def kind(self) -> Kind:
        """Which front end this is; it names the front end's own context."""
        ...

    @property
    def attended(self) -> bool:
        """Somebody answers :meth:`Dialogs.choose` (see
        :attr:`~dsh.commands.CommandHost.attended`)."""
        ...

    @property
    def answers(self) -> bool:
        """Somebody answers approvals and questions. False (``dsh -p`` without stdin
        commands): what needs approval is denied, and asking is an error the model
        is told about."""
        ...

    @property
    def one_session(self) -> bool:
        """The front end shows only the session it opened (``dsh -p``): ``/new`` and
        ``/resume`` are refused."""
        ...

    def show(self, text: str, *, level: str = "info") -> None:
        """A line (or a few) for the person, outside the transcript the model sees:
        ``info``, ``warning``, ``error`` (or a front end's own style)."""
        ...

    def show_ignored(self, settings: Settings) -> None:
        """Say which of the project's settings do not apply (it is not trusted); called
        once at start-up, with or without any."""
        ...

    def show_warning(self, text: str) -> None:
        """A warning the person must see before going on, said once per process
        (the sandbox is off, or cannot start): where it is seen before typing."""
        ...

    async def attach(self, agent: AgentHandle, *, replay: bool) -> None:
        """Show ``agent``'s session from now on; ``replay``: its log so far is an
        earlier conversation, to be shown as such."""
        ...

    def detach(self) -> None:
        """Stop showing the session on screen (the controller closes its agent)."""
        ...

    async def show_read_only(self, events: Sequence[SessionEvent]) -> None:
        """Show a stored session another dsh writes, as it is now; nothing is sent."""
        ...

    async def quit(self) -> None:
        """``/quit``: end the front end."""
        ...
