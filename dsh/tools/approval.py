"""The approval seam: asking the person before a call that needs it, and remembering.

:class:`ApprovalService` (the ``approvals`` service) decides each call with
:func:`~dsh.policy.permissions.assess`; when the verdict is *ask*, it asks through the
``approval/ask`` hook (:data:`dsh.hooks.APPROVAL_ASK`), where a UI registered its
approver (the TUI's dialog, the line mode's prompt); the newest approver decides.
With none registered (as in headless mode) an ask is a denial the model is told about. Every decision about a
call that writes or runs something is logged as ``approval/requested`` and
``approval/resolved``; an "allow for this session" answer is logged with its rule and
signed with this installation's key (:mod:`dsh.policy.grants`), so a resumed session
remembers it, and a log edited by hand, or made by another installation, grants nothing.
A "reject for this session" answer (``deny_session``, which an editor offers) is
logged as a denial with the same narrow rule; a call that would be asked about with
that rule again is denied unasked, in this process and once the session is resumed.
It needs no signature: a denial a log claims can only narrow what runs.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from dsh.kernel import Context, Disposer, First, Notify, ServiceKey
from dsh.policy.escalation import sandbox_need
from dsh.policy.grants import InstallationKey, KeyRefused, grant_fields, sign, verify
from dsh.policy.permissions import (
    MODES,
    Assessment,
    PermissionMode,
    Rule,
    RuleError,
    assess,
    describe_grant,
    parse_rules,
    read_denied,
    session_rules,
)
from dsh.sandbox.policy import Widening
from dsh.session import Session, SessionHeader
from dsh.session.payloads import ApprovalRequested, ApprovalResolved, GrantsIgnored
from dsh.session.plan_events import PlanProposed, PlanReviewed
from dsh.tools.definition import Action, Risk, ToolContext, ToolDefinition
from dsh.tools.plan_review import (
    APPROVED_MODES,
    PLAN_REVIEW,
    PlanDecision,
    PlanReview,
    Reviewer,
)
from dsh.wire import Frozen

if TYPE_CHECKING:
    from dsh.sandbox.service import SandboxStatus

_log = logging.getLogger("dsh.approvals")

ApprovalOutcome = Literal[
    "allow_once", "allow_session", "deny", "deny_session", "cancelled", "unavailable"
]


class ApprovalRequest(Frozen):
    id: str
    session_id: str
    call_id: str
    tool_name: str
    summary: str
    details: str | None = None
    risk: Risk
    reason: str | None = None
    grant: str | None = None
    """The rules "allow for this session" would add (comma-separated); None when it
    cannot be offered. "Reject for this session" denies what asks for the same rules."""
    grant_covers: str | None = None
    """What that grant allows, in words: ``exactly `rm -rf build` ``."""
    paths: tuple[str, ...] = ()
    """The files the call would write (absolute), as its tool declares them: where an
    editor shows the change."""
    agent_label: str | None = None
    """The subagent that asks (its description), None for the session's own agent."""


class ApprovalDecision(Frozen):
    outcome: ApprovalOutcome
    feedback: str | None = None
    """Said to the model with a denial."""
    rule: str | None = None
    """For allow_session: the rule to grant, if the person edited the offered one."""


Approver = Callable[[ApprovalRequest], Awaitable[ApprovalDecision]]

D = TypeVar("D", ApprovalDecision, PlanDecision)


@dataclass(frozen=True)
class Gate:
    """The decision for one call: run it, or tell the model why not."""

    allowed: bool
    message: str | None = None
    code: str | None = None
    widening: Widening | None = None
    """Allowed: what the person approved beyond the sandbox's policy for this call."""


class ApprovalService:
    def __init__(
        self,
        ctx: Context,
        mode: PermissionMode = "default",
        *,
        allow: Iterable[Rule] = (),
        deny: Iterable[Rule] = (),
        home: Path | None = None,
    ) -> None:
        """``ctx``: the kernel the approvers listen on; ``home``: where the installation
        key lives (None: ``dsh_home()`` when needed)."""
        if mode not in MODES:
            raise ValueError(f"unknown permission mode {mode!r} (one of: {', '.join(MODES)})")
        self._ctx = ctx
        self._mode: PermissionMode = mode
        self.allow = list(allow)
        self.deny = list(deny)
        self._grants: dict[str, list[Rule]] = {}
        self._headers: dict[str, SessionHeader] = {}
        """The sessions seen, by id: how a subagent's grants reach its parents'."""
        self._denials: dict[str, set[str]] = {}
        self._key = InstallationKey(home)

    @property
    def mode(self) -> PermissionMode:
        """The permission mode every call is judged in."""
        return self._mode

    @mode.setter
    def mode(self, mode: PermissionMode) -> None:
        """Change the mode; every front end hears of it on ``permissions/mode-changed``
        (the status bar, an editor's mode picker)."""
        if mode not in MODES:
            raise ValueError(f"unknown permission mode {mode!r} (one of: {', '.join(MODES)})")
        if mode == self._mode:
            return
        self._mode = mode
        self._ctx.emit(PERMISSION_MODE_CHANGED, mode)

    def add_plan_reviewer(self, reviewer: Reviewer) -> Disposer:
        """Review plans (before any reviewer registered earlier) until the service's
        context is disposed, or the returned disposer is called."""
        return self._ctx.on(PLAN_REVIEW, reviewer, prepend=True)

    async def review_plan(
        self,
        plan: str,
        *,
        session: Session,
        call_id: str,
        signal: asyncio.Event | None = None,
        agent_label: str | None = None,
    ) -> PlanDecision:
        """Ask the person about ``plan`` (Markdown) and log what they decided: approved,
        the mode is then the one they chose; sent back, the note is for the model.
        ``signal`` set (the turn cancelled) takes the review away. With nobody to ask
        the outcome is ``unavailable`` and the mode stays as it is."""
        review_id = uuid.uuid4().hex
        session.append(
            "plan/proposed", PlanProposed(review_id=review_id, call_id=call_id, plan=plan)
        )
        review = PlanReview(
            id=review_id,
            session_id=session.id,
            call_id=call_id,
            plan=plan,
            agent_label=agent_label,
        )
        try:
            reviewing = self._ctx.serial(PLAN_REVIEW, review)
            answer = await _unless_cancelled(
                reviewing,
                signal,
                PlanDecision(outcome="cancelled", note="the turn was cancelled"),
            )
        except asyncio.CancelledError:
            # The call itself cancelled (its turn's cancel reached the tool first): the
            # proposal still gets its verdict, so no plan is left open in the log.
            session.append(
                "plan/reviewed",
                PlanReviewed(
                    review_id=review_id,
                    outcome="cancelled",
                    by="user",
                    note="the call was cancelled",
                ),
            )
            raise
        except Exception as error:  # a broken dialog approves nothing
            answer = PlanDecision(outcome="unavailable", note=f"the review failed: {error}")
        by: Literal["user", "headless"] = "user"
        if answer is None:
            answer, by = PlanDecision(outcome="unavailable"), "headless"
        mode = APPROVED_MODES.get(answer.outcome)
        if mode is not None:
            self.mode = mode
        session.append(
            "plan/reviewed",
            PlanReviewed(
                review_id=review_id, outcome=answer.outcome, by=by, note=answer.note, mode=mode
            ),
        )
        return answer

    def read_denied(self, path: Path, cwd: Path) -> bool:
        """Whether a deny rule hides ``path`` from every reading tool (searches leave
        it out, mentions do not attach it)."""
        return read_denied(self.deny, path, cwd) is not None

    def bind_context(self, ctx: Context) -> BoundApprovals:
        return BoundApprovals(self, ctx)

    def add_approver(self, approver: Approver) -> Disposer:
        """Decide approvals (before any approver registered earlier) until the
        service's context is disposed, or the returned disposer is called."""
        return self._ctx.on(APPROVAL_ASK, approver, prepend=True)

    def grants(self, session: Session) -> list[Rule]:
        """Session grants, restored from the log the first time a session is seen: those
        this installation signed. A resumed session was checked (and told) by
        :meth:`restore` already; a session seen only here is checked quietly."""
        if session.id not in self._grants:
            self._headers[session.id] = session.header
            self._grants[session.id] = self._verified(session)[0]
        return self._grants[session.id]

    def _granted(self, session: Session) -> list[Rule]:
        """The session's grants, and a subagent's parents' too: a child works under
        what the person granted the session that delegated to it. A grant the person
        gives in a child's dialog is the child's."""
        rules = list(self.grants(session))
        for parent in self._parents(session):
            rules.extend(self._grants.get(parent, ()))
        return rules

    def _parents(self, session: Session) -> list[str]:
        """The sessions a subagent's session was delegated from, nearest first (as far
        as this service has seen them); none for a session's own agent."""
        parents: list[str] = []
        header: SessionHeader | None = session.header
        seen = {session.id}
        while header is not None and header.origin == "subagent":
            parent = header.parent_session
            if parent is None or parent in seen:
                break
            seen.add(parent)
            parents.append(parent)
            header = self._headers.get(parent)
        return parents

    def denials(self, session: Session) -> set[str]:
        """The grants the person rejected for the rest of the session (the rules, as
        :attr:`ApprovalRequest.grant` words them), read from the log the first time a
        session is seen."""
        if session.id not in self._denials:
            self._denials[session.id] = {
                event.data.pattern
                for event in session.scan("approval/resolved")
                if isinstance(event.data, ApprovalResolved)
                and event.data.outcome == "deny"
                and event.data.by == "user"
                and event.data.pattern
            }
        return self._denials[session.id]

    def _rejected(self, session: Session, grant: str) -> bool:
        """Whether the person rejected ``grant`` for the session, or for a subagent's
        parents (as their grants reach it, :meth:`_granted`)."""
        if grant in self.denials(session):
            return True
        return any(grant in self._denials.get(parent, ()) for parent in self._parents(session))

    def restore(self, session: Session) -> list[Rule]:
        """Check the grants of a session being resumed, and log
        ``approval/grants-ignored`` when some do not hold, so every UI says so before
        anything is asked (or quietly denied)."""
        held, ignored, problem = self._verified(session)
        self._headers[session.id] = session.header
        self._grants[session.id] = held
        if ignored:
            session.append("approval/grants-ignored", GrantsIgnored(count=ignored, problem=problem))
        return held

    def _verified(self, session: Session) -> tuple[list[Rule], int, str | None]:
        """The grants in the log that verify, how many did not, and why none could."""
        tools: dict[str, str] = {}
        claimed: list[tuple[list[str] | None, str, str | None]] = []  # (fields, pattern, mac)
        for event in session.scan("approval/requested", "approval/resolved"):
            data = event.data
            if isinstance(data, ApprovalRequested):
                tools[data.request_id] = data.tool
            elif (
                isinstance(data, ApprovalResolved)
                and data.outcome == "allow-session"
                and data.pattern
            ):
                # The tool is named by the request the grant answers: one without its
                # request cannot be checked, and does not hold.
                tool = tools.get(data.request_id)
                fields = (
                    None
                    if tool is None
                    else grant_fields(session.id, data.request_id, tool, data.outcome, data.pattern)
                )
                claimed.append((fields, data.pattern, data.mac))
        if not claimed:
            return [], 0, None  # nothing to check: the key is not even read
        try:
            # Not made when missing: with no key, no grant can have been signed here.
            key = self._key.get(create=False)
        except KeyRefused as refused:
            return [], len(claimed), str(refused)
        held: list[Rule] = []
        for fields, pattern, mac in claimed:
            if key is None or fields is None or not verify(key, fields, mac):
                continue
            try:
                held.extend(parse_rules(pattern))
            except RuleError:
                continue  # signed, so written by dsh: by a version that reads it otherwise
        return held, len(claimed) - len(held), None

    def _sign_grant(self, session: Session, request_id: str, tool: str, pattern: str) -> str | None:
        """The grant's MAC; None (the grant then holds until the process ends, and is
        not restored) when the installation key cannot be used."""
        try:
            key = self._key.get(create=True)
        except KeyRefused as refused:
            _log.warning("the session grant %s will not survive a resume: %s", pattern, refused)
            return None
        assert key is not None
        return sign(key, grant_fields(session.id, request_id, tool, "allow-session", pattern))

    async def check(
        self,
        tool: ToolDefinition,
        action: Action,
        *,
        session: Session,
        call_id: str,
        cwd: Any,
        force_ask: str | None = None,
        signal: asyncio.Event | None = None,
        extra_allow: Sequence[Rule] = (),
        agent_label: str | None = None,
        sandbox: SandboxStatus | None = None,
    ) -> Gate:
        """Decide one call. ``force_ask`` (a pre-execute hook's reason) turns an allow
        into an ask; it never overrides a denial. ``signal`` set (the turn cancelled)
        while the person is asked: the question is taken away and the call denied.
        ``agent_label``: the subagent whose call it is, for the dialog to say.
        ``sandbox``: the sandbox's status, for a call it contains: an escalation, or a
        command while the sandbox cannot start, is asked in every mode whatever the
        rules say (:mod:`dsh.policy.escalation`)."""
        assessment = assess(
            self.mode,
            tool,
            action,
            cwd,
            allow=[*self.allow, *extra_allow],
            deny=self.deny,
            granted=self._granted(session),
        )
        if force_ask is not None and assessment.verdict == "allow":
            assessment = Assessment("ask", force_ask, grantable=False)
        need = sandbox_need(action, sandbox, self._granted(session))
        allowed = Gate(True, widening=need.widening if need is not None else None)
        escalation_grant: list[Rule] = []
        if need is not None and need.question is not None and assessment.verdict != "deny":
            # The command's own grant still goes with the escalation's, when it had one.
            command_grant = (
                session_rules(tool, action, Path(cwd))
                if assessment.verdict == "ask" and assessment.grantable
                else None
            )
            escalation_grant = [*(command_grant or []), *need.grant] if need.grant else []
            assessment = Assessment(
                "ask",
                need.question,
                grantable=bool(escalation_grant),
                headless=f"{need.question}; no mode or rule allows that unasked",
            )
        if assessment.verdict == "allow" and action.risk == "read":
            return allowed
        request_id = uuid.uuid4().hex
        session.append(
            "approval/requested",
            ApprovalRequested(
                request_id=request_id,
                tool=tool.name,
                summary=action.summary,
                call_id=call_id,
                details=action.details,
                risk=action.risk,
                reason=assessment.reason,
            ),
        )

        def resolve(
            outcome: Literal["allow-once", "allow-session", "deny"], by: Any, **extra: Any
        ) -> None:
            session.append(
                "approval/resolved",
                ApprovalResolved(request_id=request_id, outcome=outcome, by=by, **extra),
            )

        match assessment.verdict:
            case "allow":
                resolve("allow-once", assessment.by, reason=assessment.reason)
                return allowed
            case "deny":
                resolve("deny", assessment.by, reason=assessment.reason)
                return Gate(False, f"{tool.name} is not allowed: {assessment.reason}", "DENIED")
        grant: list[Rule] | None = None
        if escalation_grant:
            grant = escalation_grant
        elif assessment.grantable:
            grant = session_rules(tool, action, Path(cwd))
        offered = ", ".join(str(rule) for rule in grant) if grant else None
        if offered is not None and self._rejected(session, offered):
            resolve("deny", "user", reason="rejected for the rest of the session")
            return Gate(False, f"the user denied {tool.name} for the rest of the session", "DENIED")
        request = ApprovalRequest(
            id=request_id,
            session_id=session.id,
            call_id=call_id,
            tool_name=tool.name,
            summary=action.summary,
            details=action.details,
            risk=action.risk,
            reason=assessment.reason,
            grant=offered,
            grant_covers=(
                describe_grant(grant, commands=action.command is not None) if grant else None
            ),
            paths=tuple(str(path) for path in action.paths),
            agent_label=agent_label,
        )
        try:
            asking = self._ctx.serial(APPROVAL_ASK, request)
            answer = await _unless_cancelled(
                asking,
                signal,
                ApprovalDecision(outcome="cancelled", feedback="the turn was cancelled"),
            )
        except Exception as error:  # a broken dialog must not run the call
            answer = ApprovalDecision(
                outcome="unavailable", feedback=f"the approval failed: {error}"
            )
        if answer is None:
            hint = assessment.headless or "allow it with --permission-mode or an allow rule"
            reason = f"no one is here to approve it (headless); {hint}"
            resolve("deny", "headless", reason=reason)
            return Gate(False, f"{tool.name} was not run: {reason}", "DENIED")
        decision = answer
        match decision.outcome:
            case "allow_once":
                resolve("allow-once", "user")
                return allowed
            case "allow_session" if grant:
                try:
                    rules = parse_rules(decision.rule) if decision.rule else grant
                except RuleError:
                    rules = grant  # an edit that does not read grants what was shown
                self.grants(session).extend(rules)
                pattern = ", ".join(str(rule) for rule in rules)
                mac = self._sign_grant(session, request_id, tool.name, pattern)
                resolve("allow-session", "user", pattern=pattern, mac=mac)
                return allowed
            case "allow_session":
                resolve("allow-once", "user")
                return allowed
            case "deny_session" if offered is not None:
                self.denials(session).add(offered)
                resolve("deny", "user", reason=decision.feedback, pattern=offered)
                said = f": {decision.feedback}" if decision.feedback else ""
                return Gate(
                    False,
                    f"the user denied {tool.name} for the rest of the session{said}",
                    "DENIED",
                )
            case "deny" | "deny_session":
                resolve("deny", "user", reason=decision.feedback)
                said = f": {decision.feedback}" if decision.feedback else ""
                return Gate(False, f"the user denied {tool.name}{said}", "DENIED")
            case _:
                resolve("deny", "user", reason=decision.feedback or decision.outcome)
                return Gate(
                    False, f"{tool.name} was not run: the approval was {decision.outcome}", "DENIED"
                )


async def _unless_cancelled(
    asking: Awaitable[D | None], signal: asyncio.Event | None, cancelled: D
) -> D | None:
    """The approver's decision, or "cancelled" once ``signal`` is set: a turn cancelled
    (Esc elsewhere, quitting, /new) must not wait on a dialog nobody will answer, and
    the approver's task is cancelled so that its dialog goes away."""
    if signal is None:
        return await asking
    answer = asyncio.ensure_future(asking)
    stopped = asyncio.ensure_future(signal.wait())
    try:
        await asyncio.wait({answer, stopped}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        answer.cancel()  # the caller cancelled (the call under the dialog): it goes too
        raise
    finally:
        stopped.cancel()
    # A cancel that came with the answer wins: once the turn is cancelled nothing new
    # runs, even a call the person allowed in the same instant.
    if answer.done() and not signal.is_set():
        return answer.result()
    answer.cancel()
    await asyncio.gather(answer, return_exceptions=True)
    return cancelled


def denied_reads(context: ToolContext) -> Callable[[Path], bool] | None:
    """For a tool that reads many files (a search): what the deny rules hide from it,
    or None when they hide nothing."""
    services = context.services
    approvals = services.get(APPROVALS, None) if services is not None else None
    if approvals is None or not any(rule.kind == "read" for rule in approvals.deny):
        return None
    cwd = context.cwd
    return lambda path: bool(approvals.read_denied(path, cwd))


class BoundApprovals:
    """The approvals service as one context sees it: approvers it adds go with it."""

    def __init__(self, service: ApprovalService, ctx: Context) -> None:
        self._service = service
        self._ctx = ctx

    def add_approver(self, approver: Approver) -> Disposer:
        """Decide approvals (before any approver registered earlier) until this
        context is disposed."""
        return self._ctx.on(APPROVAL_ASK, approver, prepend=True)

    def add_plan_reviewer(self, reviewer: Reviewer) -> Disposer:
        """Review plans (before any reviewer registered earlier) until this context is
        disposed."""
        return self._ctx.on(PLAN_REVIEW, reviewer, prepend=True)

    @property
    def mode(self) -> PermissionMode:
        return self._service.mode

    @mode.setter
    def mode(self, mode: PermissionMode) -> None:
        # The service's, for every context: set on this view alone (as plain attribute
        # assignment did), a switch of mode applied to nothing.
        self._service.mode = mode

    def __getattr__(self, name: str) -> Any:
        return getattr(self._service, name)


APPROVAL_ASK: First[[ApprovalRequest], ApprovalDecision] = First(
    "approval/ask",
    doc="a call needs the person's approval: the newest approver (a UI's dialog) "
    "decides; none at all is a denial (headless)",
)


APPROVALS: ServiceKey[BoundApprovals] = ServiceKey("approvals")
"""The permission mode and rules, and the approvers (``add_approver``)."""


PERMISSION_MODE_CHANGED: Notify[[PermissionMode]] = Notify(
    "permissions/mode-changed",
    doc="the permission mode changed (the person, a command, an approved plan): the "
    "new mode, for every front end to show",
)
