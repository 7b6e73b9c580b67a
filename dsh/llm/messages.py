"""Messages and where they came from.

A :class:`Message` is immutable: an id, a role, its content blocks and its source. The
source says who produced it: the person (``user``), a command the person ran from the
prompt (``shell``), a plugin injecting context (``plugin``), a model (``model``, with
provider and model id), or a tool (``tool``).
Plugins may add source kinds; unknown kinds load as :class:`UnknownSource`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, model_validator

from dsh.llm.blocks import (
    Block,
    ContentBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from dsh.llm.ids import CallId, MessageId, new_message_id
from dsh.wire import Frozen, Opaque, TaggedUnion


class Source(Frozen):
    """Base of every message source."""

    kind: str


class UnknownSource(Source, Opaque):
    """A source kind this process does not know."""


message_sources: TaggedUnion[Source] = TaggedUnion("message source", Source, "kind", UnknownSource)
MessageSource: TypeAlias = Annotated[Source, message_sources.validator, message_sources.serializer]


@message_sources.member
class UserSource(Source):
    kind: Literal["user"] = "user"


PluginForm = Literal["instructions", "catalog", "snapshot", "notice", "relay", "recall"]


@message_sources.member
class PluginSource(Source, Opaque):
    """Context a plugin put in front of the model; ``form`` hints how a UI shows it.
    Plugins may add fields of their own (``compactionId``, ``sections``...)."""

    kind: Literal["plugin"] = "plugin"
    plugin: str
    form: str | None = None


@message_sources.member
class ShellSource(Source):
    """A shell command the person ran from the prompt (``!command``) through a tool
    (the model's own path: its permissions, hooks and runner). The message's text is
    the command and its output, for the model; these fields are the call, for the
    card a UI shows of it."""

    kind: Literal["shell"] = "shell"
    call_id: CallId
    tool: str
    arguments: str
    result: str
    """What the tool returned, as the model's own call of it would have read it."""
    error_code: str | None = None
    meta: Any = None


@message_sources.member
class ModelSource(Source):
    kind: Literal["model"] = "model"
    provider: str
    model: str
    replay_state: Any = None
    """Adapter-private state needed to replay this answer to the same adapter."""


@message_sources.member
class ToolSource(Source):
    kind: Literal["tool"] = "tool"
    call_id: CallId


Role = Literal["system", "user", "assistant"]


class Message(Frozen):
    id: MessageId = Field(default_factory=new_message_id)
    role: Role
    content: tuple[ContentBlock, ...]
    source: MessageSource

    def text(self) -> str:
        """The visible text of this message (text blocks only)."""
        return "".join(block.text for block in self.content if isinstance(block, TextBlock))


class UserMessage(Message):
    """User-role input: a prompt, steering, injected context or a summary."""

    role: Literal["user"] = "user"
    source: MessageSource = Field(default_factory=UserSource)

    @model_validator(mode="after")
    def _no_model_or_tool_source(self) -> UserMessage:
        if isinstance(self.source, ModelSource | ToolSource):
            raise ValueError(f"a user message cannot have a {self.source.kind} source")
        return self


class AssistantMessage(Message):
    """What one model call produced."""

    role: Literal["assistant"] = "assistant"
    source: ModelSource

    @property
    def tool_calls(self) -> tuple[ToolCallBlock, ...]:
        return tuple(block for block in self.content if isinstance(block, ToolCallBlock))

    @property
    def reasoning(self) -> str:
        return "".join(block.text for block in self.content if isinstance(block, ReasoningBlock))


class ToolResultMessage(Message):
    """One tool's result: a single tool-result block, sourced from the same call."""

    role: Literal["user"] = "user"
    source: ToolSource

    @model_validator(mode="after")
    def _one_matching_result(self) -> ToolResultMessage:
        if len(self.content) != 1 or not isinstance(self.content[0], ToolResultBlock):
            raise ValueError("a tool-result message holds exactly one tool-result block")
        if self.content[0].tool_call_id != self.source.call_id:
            raise ValueError(
                f"tool-result block answers {self.content[0].tool_call_id!r} "
                f"but the message source is call {self.source.call_id!r}"
            )
        return self

    @property
    def result(self) -> ToolResultBlock:
        block = self.content[0]
        assert isinstance(block, ToolResultBlock)
        return block


def user_text(text: str, *, source: Source | None = None) -> UserMessage:
    """A user message holding one text block."""
    return UserMessage(content=(TextBlock(text=text),), source=source or UserSource())


def tool_result(
    call_id: CallId, content: tuple[Block, ...] | str, *, is_error: bool | None = None
) -> ToolResultMessage:
    """The message that answers tool call ``call_id``."""
    blocks = (TextBlock(text=content),) if isinstance(content, str) else content
    return ToolResultMessage(
        content=(ToolResultBlock(tool_call_id=call_id, content=blocks, is_error=is_error),),
        source=ToolSource(call_id=call_id),
    )


def parse_message(value: dict[str, Any] | Message) -> Message:
    """Validate a message as its most specific class (by role and source kind)."""
    if isinstance(value, Message):
        return value
    role = value.get("role")
    kind = (value.get("source") or {}).get("kind")
    if role == "assistant":
        return AssistantMessage.model_validate(value)
    if role == "user" and kind == "tool":
        return ToolResultMessage.model_validate(value)
    if role == "user":
        return UserMessage.model_validate(value)
    return Message.model_validate(value)
