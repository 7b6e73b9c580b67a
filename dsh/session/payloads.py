"""The core's event payloads, and the reasons they carry: why a turn started, how it
ended, what cancelled it; what each core event type (``turn/start``, ``tool/result``,
``request/header``, ``inbox/enqueued``…) holds.

Re-exported by :mod:`dsh.session.events`, which registers each as its type's payload
and holds the registry, the event envelope and its parsing.
"""

from __future__ import annotations

import shlex
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import NonNegativeInt, PositiveInt, model_validator

from dsh.llm import (
    AssistantMessage,
    CallId,
    LlmCallConfig,
    LlmFailure,
    StreamChunk,
    TokenUsage,
    ToolResultMessage,
    ToolSchema,
    UserMessage,
)
from dsh.permission_modes import PermissionMode
from dsh.wire import Frozen, Opaque, TaggedUnion

# ---------------------------------------------------------------------- reasons


class CancelCause(Frozen):
    kind: str


class UnknownCancelCause(CancelCause, Opaque):
    pass


cancel_causes: TaggedUnion[CancelCause] = TaggedUnion(
    "cancel cause", CancelCause, "kind", UnknownCancelCause
)
AnyCancelCause: TypeAlias = Annotated[
    CancelCause, cancel_causes.validator, cancel_causes.serializer
]


@cancel_causes.member
class CancelByUser(CancelCause):
    kind: Literal["user"] = "user"


@cancel_causes.member
class CancelByParent(CancelCause):
    kind: Literal["parent"] = "parent"


@cancel_causes.member
class CancelByHook(CancelCause):
    kind: Literal["hook"] = "hook"
    reason: str


@cancel_causes.member
class CancelByDisposal(CancelCause):
    kind: Literal["disposed"] = "disposed"


class TurnTrigger(Frozen):
    """What opened a turn."""

    kind: str


class UnknownTurnTrigger(TurnTrigger, Opaque):
    pass


turn_triggers: TaggedUnion[TurnTrigger] = TaggedUnion(
    "turn trigger", TurnTrigger, "kind", UnknownTurnTrigger
)
AnyTurnTrigger: TypeAlias = Annotated[
    TurnTrigger, turn_triggers.validator, turn_triggers.serializer
]


@turn_triggers.member
class PromptTrigger(TurnTrigger):
    """A prompt the person typed (or a follow-up queued while the agent ran)."""

    kind: Literal["prompt"] = "prompt"


@turn_triggers.member
class SteeringTrigger(TurnTrigger):
    """Steering that arrived after the previous turn had already ended."""

    kind: Literal["steering"] = "steering"


@turn_triggers.member
class InjectTrigger(TurnTrigger):
    kind: Literal["inject"] = "inject"


@turn_triggers.member
class ResumeTrigger(TurnTrigger):
    kind: Literal["resume"] = "resume"


@turn_triggers.member
class JobTrigger(TurnTrigger):
    """A background job finished and its notice woke the agent."""

    kind: Literal["job"] = "job"
    job_id: str | None = None


class TurnEndReason(Frozen):
    kind: str


class UnknownTurnEndReason(TurnEndReason, Opaque):
    pass


turn_end_reasons: TaggedUnion[TurnEndReason] = TaggedUnion(
    "turn end reason", TurnEndReason, "kind", UnknownTurnEndReason
)
AnyTurnEndReason: TypeAlias = Annotated[
    TurnEndReason, turn_end_reasons.validator, turn_end_reasons.serializer
]


@turn_end_reasons.member
class TurnCompleted(TurnEndReason):
    kind: Literal["completed"] = "completed"


@turn_end_reasons.member
class TurnAborted(TurnEndReason):
    kind: Literal["aborted"] = "aborted"
    reason: AnyCancelCause


@turn_end_reasons.member
class TurnBlocked(TurnEndReason):
    kind: Literal["blocked"] = "blocked"


@turn_end_reasons.member
class TurnFailed(TurnEndReason):
    kind: Literal["error"] = "error"
    error: LlmFailure


@turn_end_reasons.member
class TurnMaxTokens(TurnEndReason):
    kind: Literal["max-tokens"] = "max-tokens"


@turn_end_reasons.member
class TurnMaxSteps(TurnEndReason):
    """The turn reached the steps-per-turn limit while the model still wanted more."""

    kind: Literal["max-steps"] = "max-steps"
    limit: PositiveInt


@turn_end_reasons.member
class TurnInterrupted(TurnEndReason):
    """Written only by crash repair: the process died while this turn was open."""

    kind: Literal["interrupted"] = "interrupted"


# ---------------------------------------------------------------------- payloads


class TurnStart(Frozen):
    turn: PositiveInt
    trigger: AnyTurnTrigger | None = None
    mode: PermissionMode | None = None
    """The permission mode the turn started in (it decides the system prompt's plan
    section and what runs unasked); None in a log from before dsh kept it."""


class PermissionModeSet(Frozen):
    """``permissions/mode``: the permission mode changed while the session was open
    (the person, an editor, a command, an approved plan), logged when it happened so a
    replay changes it at the same moment."""

    mode: PermissionMode


class AgentOptionsSet(Frozen):
    """``agent/options``: the agent's options changed while the session was open (a
    ``/model`` switch, a resume with ``--model``, an editor's model picker, a replay's
    fork), logged when it happened with what changed, so a replay changes them at the
    same moment. A session with nothing in it yet logs no change: its first
    ``request/header`` says the options."""

    changes: dict[str, str | int | float | None]
    """Each option that changed (``model``, ``provider``, ``reasoning_effort``,
    ``max_steps``...), by the name ``AgentOptions`` gives it, and its new value."""


class TurnEnd(Frozen):
    turn: PositiveInt
    reason: AnyTurnEndReason


class StepStart(Frozen):
    turn: PositiveInt
    step: PositiveInt


class StepEnd(Frozen):
    turn: PositiveInt
    step: PositiveInt


class AssistantChunk(Frozen):
    turn: PositiveInt
    step: PositiveInt
    chunk: StreamChunk


class AssistantMessageData(Frozen):
    turn: PositiveInt
    step: PositiveInt
    message: AssistantMessage
    usage: TokenUsage | None = None
    interrupted: Literal[True] | None = None


class ToolCall(Frozen):
    turn: PositiveInt
    step: PositiveInt
    call_id: CallId
    name: str
    arguments: str


class ToolProgress(Frozen):
    """What a running call says of its progress (a server's ``3/10 pages``): shown on
    its card until the result comes; never sent to the model."""

    turn: PositiveInt
    step: PositiveInt
    call_id: CallId
    message: str


class ToolErrorIdentity(Frozen):
    name: str
    code: str


class ToolResult(Frozen):
    turn: PositiveInt
    step: PositiveInt
    message: ToolResultMessage
    error: ToolErrorIdentity | None = None
    meta: Any = None


class EpochHeader(Frozen):
    """Everything about a request that is not history: config, prompt and tools."""

    config: LlmCallConfig
    adapter_defaults: dict[str, Literal[True]] | None = None
    adjusted: dict[str, Literal[True]] | None = None
    """The fields an ``agent/request`` listener changed from what was proposed (a cap
    lowered near the model's ceiling): that moment's answer, never carried to a later
    request as a choice (see :func:`dsh.agent.requests.seed_config`)."""
    system: str | None = None
    tools: tuple[ToolSchema, ...] | None = None


class RequestHeader(Frozen):
    """Logged before every model request. The full header is written when it is new
    or changed; a request that repeats the latest one cites it by seq instead."""

    header: EpochHeader | None = None
    reason: Literal["initial", "resume", "change", "repeat"]
    same_as: NonNegativeInt | None = None

    @model_validator(mode="after")
    def _header_or_reference(self) -> RequestHeader:
        if (self.header is None) == (self.same_as is None):
            raise ValueError("a request header holds either the header or same_as, not both")
        if (self.reason == "repeat") != (self.same_as is not None):
            raise ValueError("same_as goes with reason 'repeat' and only with it")
        return self


class RequestContext(Frozen):
    provider: str
    model: str
    context_window: PositiveInt | None = None


class EndSeed(Frozen):
    pass


class Corrupt(Frozen):
    """Stands in for a stored line that could not be read, keeping seq numbers whole."""

    line: PositiveInt
    error: str


class LlmRetry(Frozen):
    retry_id: str
    turn: PositiveInt
    step: PositiveInt
    provider: str
    retry: PositiveInt
    max_retries: PositiveInt
    delay_ms: NonNegativeInt
    failure: LlmFailure

    def notice(self) -> str:
        """What to tell the person (every front end says the same): what went wrong,
        and which retry comes when."""
        message = self.failure.message
        said = message if message.startswith(self.provider) else f"{self.provider}: {message}"
        return f"{said} - retry {self.retry} of {self.max_retries} in {self.delay_ms / 1000:.1f} s"


class LlmRetryStarted(Frozen):
    retry_id: str


class ApprovalRequested(Frozen):
    request_id: str
    tool: str
    summary: str
    call_id: CallId | None = None
    details: str | None = None
    risk: str | None = None
    reason: str | None = None
    """Why it needs approval (or why a rule decided)."""


class ApprovalResolved(Frozen):
    request_id: str
    outcome: Literal["allow-once", "allow-session", "deny"]
    reason: str | None = None
    pattern: str | None = None
    by: Literal["user", "rule", "mode", "headless"] = "user"
    mac: str | None = None
    """For allow-session: this installation's signature of the grant
    (:mod:`dsh.policy.grants`); a grant without a valid one is not restored on resume.
    A ``deny`` by the user with a ``pattern`` rejected those rules for the rest of the
    session (unsigned: a denial only narrows)."""


class GrantsIgnored(Frozen):
    """Logged when a session is resumed and some of its "allow for this session"
    grants do not hold: this installation did not sign them (or its key is refused)."""

    count: PositiveInt
    problem: str | None = None
    """Why no grant could be checked (the installation key was refused), when that is why."""

    def notice(self) -> str:
        """What to tell the person (every front end says the same)."""
        one = self.count == 1
        grants = "1 session grant" if one else f"{self.count} session grants"
        if self.problem is not None:
            return (
                f"{grants} in this log {'is' if one else 'are'} ignored: this installation's "
                f"key cannot be used ({self.problem}); dsh will ask again"
            )
        return (
            f"{grants} in this log {'was' if one else 'were'} not made on this installation "
            f"and {'is' if one else 'are'} ignored; dsh will ask again"
        )


class SessionMoved(Frozen):
    """Logged when a session is resumed (or forked) in another folder than the one its
    log names: the agent works where it was resumed, since a log, imported or edited,
    is text anyone can write (``--cwd`` chooses the folder)."""

    stored: str
    """The folder the log's header names."""
    cwd: str
    """Where the agent works now."""

    def notice(self) -> str:
        """What to tell the person (every front end says the same)."""
        return (
            f"this session was made in {self.stored}; working in {self.cwd} "
            f"(resume it with --cwd {shlex.quote(self.stored)} to work there)"
        )


class ModelRenamed(Frozen):
    """Logged once per session, at the first request for a model id its provider now
    serves (and dsh sends) under another id: a legacy id mapped to its successor."""

    provider: str
    model: str
    sent_as: str

    def notice(self) -> str:
        """What to tell the person (every front end says the same)."""
        return (
            f"{self.provider}/{self.model} is a legacy id: requests are sent as "
            f'{self.sent_as} (set agent.model = "{self.sent_as}" to use it directly)'
        )


class CommandRun(Frozen):
    command_id: str
    name: str
    args: str | None = None
    source: Literal["user", "plugin"] = "user"


class CommandDone(Frozen):
    command_id: str
    kind: Literal["success", "error"]
    text: str | None = None
    source_event_seq: NonNegativeInt | None = None


class InboxEnqueued(Frozen):
    """A prompt or steering accepted while it could not run yet: durable until claimed."""

    item_id: str
    message: UserMessage
    placement: Literal["queued", "steering"]


class InboxUpdated(Frozen):
    item_id: str
    message: UserMessage


class InboxClaimed(Frozen):
    item_ids: tuple[str, ...]


class InboxDiscarded(Frozen):
    item_ids: tuple[str, ...]
    reason: Literal["removed", "cancelled", "disposed", "blocked"]
    detail: str | None = None
    """Why, in words: a prompt-submit hook's reason for blocking, say."""


class HistoryRewound(Frozen):
    """The conversation goes back to just before turn ``turn``: every event from
    ``to_seq`` (that turn's ``turn/start``) up to this one is shadowed. Model history
    becomes what it was before ``to_seq``; the log itself only grows."""

    turn: PositiveInt
    to_seq: NonNegativeInt
    restore_id: str | None = None
    """The workspace restore (``checkpoint/restoring``) done with it, when the code went
    back too."""


class OpaqueData(Opaque):
    """The payload of an event of a type this process does not know."""
