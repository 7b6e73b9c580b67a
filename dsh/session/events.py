"""The session event catalog: every kind of fact a session log can hold.

A :class:`SessionEvent` is an envelope (``type``, ``seq``, ``time``, surface metadata)
around a payload model chosen by ``type``. The core's own types are registered here;
a plugin declares its own as :class:`EventType` constants and registers them from its
``vocabulary`` with :func:`register_events`, for as long as it is loaded. An event of a
type this process does not know loads with an :class:`OpaqueData` payload and is
written back unchanged, so logs from newer versions or absent plugins survive.

What the core derives from the log (model history, spend, the session's title) reads
core types and the readers an :class:`EventType` declares, never a plugin's type by
name: a plugin that replaces history does it with a surface ``replace``.

Surface events (``user/message``, ``steering/message``, ``assistant/message``,
``tool/result``) are the ones that can become model history; only they carry
``surface_op`` and ``source_event_seqs``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, NamedTuple, Protocol, TypeAlias, TypeGuard

from pydantic import BaseModel, NonNegativeInt, ValidationError
from pydantic_core import PydanticSerializationError

from dsh.control_chars import escape_in_json
from dsh.llm import (
    BlockStart,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    UsageChunk,
    UserMessage,
)
from dsh.session.payloads import (
    AgentOptionsSet,
    ApprovalRequested,
    ApprovalResolved,
    AssistantChunk,
    AssistantMessageData,
    CommandDone,
    CommandRun,
    Corrupt,
    EndSeed,
    GrantsIgnored,
    HistoryRewound,
    InboxClaimed,
    InboxDiscarded,
    InboxEnqueued,
    InboxUpdated,
    LlmRetry,
    LlmRetryStarted,
    ModelRenamed,
    OpaqueData,
    PermissionModeSet,
    RequestContext,
    RequestHeader,
    SessionMoved,
    StepEnd,
    StepStart,
    ToolCall,
    ToolProgress,
    ToolResult,
    TurnEnd,
    TurnStart,
)
from dsh.wire import Frozen, dumps


class EventFormatError(ValueError):
    """An event or its payload is malformed; the message says which field and why."""


# ---------------------------------------------------------------------- registry


class PaidCall(NamedTuple):
    """A model call an event records, with what it used: the core prices it."""

    provider: str
    model: str
    usage: TokenUsage


class PaidRequest(NamedTuple):
    """A paid request that is not a model call (a web search billed per request): what
    it was, and what it cost, priced when it was made (None when unknown)."""

    service: str
    """What is counted, as people read it: ``web search``."""
    cost: float | None


class SideAnswer(NamedTuple):
    """What a model call made beside the conversation (a summary, a title) answered,
    as an event records it: ``dsh replay`` serves the text again to the call of the
    same purpose, since the log holds no stream of such a call."""

    purpose: str
    text: str
    usage: TokenUsage | None = None


@dataclass(frozen=True)
class EventType:
    """An event type: its name, its payload model, and what the core may read from it.

    A plugin declares its types once, as module constants, and registers them while
    it is loaded (:func:`register_events`). The readers are functions of the payload;
    the core calls them only with a payload of ``model``.
    """

    name: str
    model: type[BaseModel]
    surface: bool = False
    """Events of this type can become model history: core types only. A plugin adds to
    history with the core's (a ``user/message`` with its source), so what the model
    sees is rebuilt from a log the same whether or not the plugin is loaded."""
    title: Callable[[Any], str | None] | None = None
    """The session's title the event sets, if it sets one: the latest such wins, in the
    catalog, the transcript header and exports."""
    paid_call: Callable[[Any], PaidCall | None] | None = None
    """The paid model call the event records, if any: it counts in the session's spend
    (the status bar, ``/cost``, headless results, the catalog)."""
    paid_request: Callable[[Any], PaidRequest | None] | None = None
    """The paid request (not a model call) the event records, if any: it counts in the
    same totals, by its service."""
    side_answer: Callable[[Any], SideAnswer | None] | None = None
    """The answer of a model call beside the conversation the event records, if any:
    a replay of the log serves it again (:mod:`dsh.replay`)."""


_types: dict[str, EventType] = {}
_holders: dict[str, int] = {}
"""How many registrations hold each plugin type: two runtimes in one process (tests,
a reader beside a runtime) each register the same constants."""
_core: set[str] = set()


def register_event_type(spec: EventType) -> Callable[[], None]:
    """Register ``spec``; returns the function that gives the registration up.

    Registering the very same type again (an equal :class:`EventType`) only adds a
    holder: the type goes when the last holder gives it up. A different type under a
    taken name is refused, and so is a surface type: only the core's become history.
    """
    name = spec.name
    if "/" not in name:
        raise ValueError(f"event type {name!r} must be namespaced, as 'plugin/event'")
    if spec.surface:
        raise ValueError(f"event type {name!r}: only the core's event types are surface types")
    known = _types.get(name)
    if name in _core or (known is not None and known != spec):
        raise ValueError(f"event type {name!r} is already registered")
    _types.setdefault(name, spec)
    _holders[name] = _holders.get(name, 0) + 1
    held = True

    def unregister() -> None:
        nonlocal held
        if not held or name in _core or _types.get(name) != spec:
            return
        held = False
        _holders[name] -= 1
        if not _holders[name]:
            del _types[name], _holders[name]

    return unregister


def register_event(name: str, model: type[BaseModel]) -> Callable[[], None]:
    """Register a log-only event type with no readers; returns the function that
    unregisters it."""
    return register_event_type(EventType(name, model))


def register_events(owner: Owner, *specs: EventType) -> None:
    """Register ``specs`` for as long as ``owner`` (a plugin's context) lives: this is
    how a plugin adds its event types, from its ``vocabulary``."""
    for spec in specs:
        owner.effect(partial(register_event_type, spec))


class Owner(Protocol):
    """What owns a registration: a :class:`dsh.kernel.Context`."""

    def effect(self, setup: Callable[[], Callable[[], Any]]) -> Callable[[], Any]: ...


def event_type(name: str) -> EventType | None:
    return _types.get(name)


def is_core_type(name: str) -> bool:
    return name in _core


def is_surface_type(name: str) -> bool:
    spec = _types.get(name)
    return spec is not None and spec.surface


def registered_event_types() -> tuple[str, ...]:
    return tuple(_types)


def title_of(event: SessionEvent) -> str | None:
    """The session title ``event`` sets, or None (its type names no title, or its
    plugin is not loaded and its payload is opaque)."""
    spec = _types.get(event.type)
    if spec is None or spec.title is None or not isinstance(event.data, spec.model):
        return None
    return spec.title(event.data)


def side_answer_of(event: SessionEvent) -> SideAnswer | None:
    """The side call's answer ``event`` records, or None."""
    spec = _types.get(event.type)
    if spec is None or spec.side_answer is None or not isinstance(event.data, spec.model):
        return None
    return spec.side_answer(event.data)


def latest_title(events: Sequence[SessionEvent]) -> str | None:
    """The title the latest titling event of ``events`` set."""
    for event in reversed(events):
        title = title_of(event)
        if title is not None:
            return title
    return None


def _core_event(name: str, model: type[BaseModel], **readers: Any) -> None:
    _types[name] = EventType(name, model, **readers)
    _core.add(name)


def _assistant_call(data: AssistantMessageData) -> PaidCall | None:
    if data.usage is None:
        return None
    return PaidCall(data.message.source.provider, data.message.source.model, data.usage)


_core_event("turn/start", TurnStart)
_core_event("turn/end", TurnEnd)
_core_event("step/start", StepStart)
_core_event("step/end", StepEnd)
_core_event("user/message", UserMessage, surface=True)
_core_event("steering/message", UserMessage, surface=True)
_core_event("assistant/chunk", AssistantChunk)
_core_event("assistant/message", AssistantMessageData, surface=True, paid_call=_assistant_call)
_core_event("tool/call", ToolCall)
_core_event("tool/progress", ToolProgress)
_core_event("tool/result", ToolResult, surface=True)
_core_event("request/header", RequestHeader)
_core_event("request/context", RequestContext)
_core_event("session/end-seed", EndSeed)
_core_event("session/corrupt", Corrupt)
_core_event("llm/retry", LlmRetry)
_core_event("llm/retry-started", LlmRetryStarted)
_core_event("approval/requested", ApprovalRequested)
_core_event("approval/resolved", ApprovalResolved)
_core_event("approval/grants-ignored", GrantsIgnored)
_core_event("model/renamed", ModelRenamed)
_core_event("session/moved", SessionMoved)
_core_event("command/run", CommandRun)
_core_event("command/done", CommandDone)
_core_event("inbox/enqueued", InboxEnqueued)
_core_event("inbox/updated", InboxUpdated)
_core_event("inbox/claimed", InboxClaimed)
_core_event("inbox/discarded", InboxDiscarded)
_core_event("history/rewound", HistoryRewound)
_core_event("permissions/mode", PermissionModeSet)
_core_event("agent/options", AgentOptionsSet)


# ---------------------------------------------------------------------- the envelope


class ReplaceOp(Frozen):
    """Put a new surface node in place of the nodes from ``start`` to ``end`` (seqs)."""

    op: Literal["replace"] = "replace"
    start: NonNegativeInt
    end: NonNegativeInt


SurfaceOp: TypeAlias = Literal["append"] | ReplaceOp


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One immutable entry of a session log. ``seq`` is its index in the log."""

    type: str
    seq: int
    time: int  # epoch milliseconds
    data: Any  # the registered payload model for ``type``; OpaqueData when unknown
    ignorable: Literal[True] | None = None
    surface_op: SurfaceOp | None = None
    source_event_seqs: tuple[int, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form, as stored: camelCase, absent fields left out."""
        out: dict[str, Any] = {
            "type": self.type,
            "seq": self.seq,
            "time": self.time,
            "data": self.data.model_dump(mode="json", exclude_none=True, by_alias=True),
        }
        if self.ignorable:
            out["ignorable"] = True
        if self.surface_op is not None:
            out["surfaceOp"] = (
                "append" if self.surface_op == "append" else self.surface_op.to_dict()
            )
        if self.source_event_seqs is not None:
            out["sourceEventSeqs"] = list(self.source_event_seqs)
        return out

    def to_json(self) -> str:
        """``to_dict()`` as compact JSON, the payload serialised by pydantic's own
        encoder: several times faster than building the dict and dumping it."""
        try:
            data = self.data.model_dump_json(exclude_none=True, by_alias=True)
        except PydanticSerializationError:
            # Text pydantic cannot encode (a lone surrogate): the slow, exact way.
            return dumps(self.to_dict())
        head = f'{{"type":{json.dumps(self.type, ensure_ascii=False)},"seq":{self.seq},'
        text = f'{head}"time":{self.time},"data":{data}'
        if self.ignorable:
            text += ',"ignorable":true'
        if self.surface_op is not None:
            op = (
                '"append"'
                if self.surface_op == "append"
                else self.surface_op.model_dump_json(exclude_none=True, by_alias=True)
            )
            text += f',"surfaceOp":{op}'
        if self.source_event_seqs is not None:
            text += f',"sourceEventSeqs":[{",".join(map(str, self.source_event_seqs))}]'
        return escape_in_json(text + "}")


def parse_payload(type_name: str, data: Any) -> BaseModel:
    """Validate ``data`` (a dict, or already a model) as the payload of ``type_name``."""
    spec = _types.get(type_name)
    model = spec.model if spec is not None else OpaqueData
    if isinstance(data, model):
        return data
    if isinstance(data, BaseModel):
        raise EventFormatError(
            f"{type_name} needs a {model.__name__} payload, not {type(data).__name__}"
        )
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise EventFormatError(f"bad {type_name} payload: {_brief(error)}") from None


def parse_event(raw: Any) -> SessionEvent:
    """Validate one stored event (a dict decoded from JSON)."""
    if not isinstance(raw, dict):
        raise EventFormatError(f"an event must be an object, not {type(raw).__name__}")
    type_name = raw.get("type")
    seq = raw.get("seq")
    time = raw.get("time")
    if not isinstance(type_name, str) or not type_name:
        raise EventFormatError("an event needs a string 'type'")
    if not _is_int(seq) or seq < 0:
        raise EventFormatError(f"{type_name}: 'seq' must be a non-negative integer")
    if not _is_int(time):
        raise EventFormatError(f"{type_name}: 'time' must be an integer (epoch ms)")
    surface_op: SurfaceOp | None = None
    raw_op = raw.get("surfaceOp")
    if raw_op == "append":
        surface_op = "append"
    elif raw_op is not None:
        try:
            surface_op = ReplaceOp.model_validate(raw_op)
        except ValidationError as error:
            raise EventFormatError(f"{type_name}: bad surfaceOp: {_brief(error)}") from None
    sources = raw.get("sourceEventSeqs")
    if sources is not None and (
        not isinstance(sources, list) or not all(_is_int(s) and s >= 0 for s in sources)
    ):
        raise EventFormatError(f"{type_name}: 'sourceEventSeqs' must be a list of seqs")
    ignorable = raw.get("ignorable")
    if ignorable not in (None, True):
        raise EventFormatError(f"{type_name}: 'ignorable' can only be true")
    return SessionEvent(
        type=type_name,
        seq=seq,
        time=time,
        data=parse_payload(type_name, raw.get("data", {})),
        ignorable=ignorable,
        surface_op=surface_op,
        source_event_seqs=tuple(sources) if sources is not None else None,
    )


def json_check_targets(payload: BaseModel) -> Any:
    """What of a validated payload could hold what JSON cannot carry (NaN, infinities,
    non-string keys): only free-form fields (``meta``, opaque extras, ``replay_state``)
    and floats can. The events of every step name exactly those parts, so the check
    stays off the loop's hot path; any other payload is checked whole. None: nothing."""
    match payload:
        case AssistantChunk(
            chunk=TextDelta() | ReasoningDelta() | ToolCallDelta() | BlockStart() | UsageChunk()
        ):
            return None
        case StepStart() | StepEnd() | TurnStart() | ToolCall() | RequestContext():
            return None
        case RequestHeader(header=None):
            return None
        case ToolResult(meta=meta, message=message) if _plain_blocks(message.content):
            return meta
        case AssistantMessageData(message=message, usage=_) if _plain_blocks(message.content):
            return [message.source.replay_state, message.source.model_extra]
        case _:
            return payload.model_dump()


_PLAIN_BLOCKS = frozenset({TextBlock, ReasoningBlock, ToolCallBlock, ToolResultBlock})


def _plain_blocks(blocks: tuple[Any, ...]) -> bool:
    """Blocks of the known kinds, whose fields are all strings, ints and bools."""
    return all(type(block) in _PLAIN_BLOCKS for block in blocks) and all(
        _plain_blocks(block.content) for block in blocks if type(block) is ToolResultBlock
    )


def check_json_value(value: Any, where: str = "data") -> None:
    """Refuse what JSON cannot carry exactly: NaN, infinities, non-string keys."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise EventFormatError(f"{where} holds {value}, which JSON cannot represent")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise EventFormatError(f"{where} has a non-string key {key!r}")
            check_json_value(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_json_value(item, f"{where}[{index}]")


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _brief(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:3]:
        where = ".".join(str(p) for p in item["loc"]) or "value"
        parts.append(f"{where}: {item['msg']}")
    more = error.error_count() - 3
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
