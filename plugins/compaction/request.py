"""The summariser's request, and the message that takes the history's place.

The request replays the conversation's own system prompt, tools and the history to
be replaced (so a provider's prompt cache still holds most of it), then asks for the
summary. When that history does not fit the summariser's window (the context is
already over its limit), the oldest tool outputs are cut short first, then, if it
must be, the oldest messages are left out; the summary event records which, so the
request can be rebuilt from the log (:func:`rebuild_request`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dsh.llm import (
    Block,
    GenerateOptions,
    Message,
    PluginSource,
    ReasoningBlock,
    SessionId,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultMessage,
    UserMessage,
    joined_text,
    message_tokens,
    messages_tokens,
    text_tokens,
    user_text,
)
from dsh.session import (
    EpochHeader,
    RequestHeader,
    Session,
    SessionEvent,
    derive_history,
    event_message,
    shadowing,
)
from dsh_plugins.compaction.events import PURPOSE, CompactionStart, CompactionSummary
from dsh_plugins.compaction.meter import epoch_tokens
from dsh_plugins.compaction.selection import SUMMARY_PLUGIN
from dsh_plugins.todo import TODO_WRITE, TodoItem, TodoWrite

KEEP_CHARS = 400
"""What a trimmed tool output keeps of its beginning."""

INSTRUCTION = """\
The conversation above is about to be replaced by a summary, to free room in the \
context window. Write that summary now. You will carry on the work from it alone, with \
no other memory of the messages above, so leave out nothing you would need. Do not \
call any tools: answer with the summary only, in plain text or Markdown.

Cover, briefly and concretely:
1. What the user asked for and wants, in their own words where they matter, including \
preferences and constraints they stated.
2. The work done so far: files read, created or changed (exact paths, and the functions \
or lines involved), commands run and what they showed.
3. Decisions taken and why; approaches tried that failed and why.
4. Errors met and how they were fixed, or that they are still open.
5. Where things stand now: what is finished, what is in progress, and the next step, \
with anything needed to take it (names, values, commands).

If the conversation begins with an earlier summary, fold what still matters of it \
into yours."""


@dataclass(frozen=True)
class Trim:
    """What of the history to be replaced the summariser is not sent in full."""

    trimmed: tuple[int, ...] = ()
    """Tool results (seqs) whose output is cut short."""
    omitted: tuple[int, ...] = ()
    """Events (seqs) left out altogether."""


def latest_todos(events: Sequence[SessionEvent]) -> tuple[TodoItem, ...]:
    """The todo list as the latest ``todo/write`` of ``events`` left it, leaving out
    what a rewind took back (the list written in a rewound turn is not the model's)."""
    rewound = shadowing(events)
    for event in reversed(events):
        if isinstance(event.data, TodoWrite) and not rewound.shadowed(event.seq):
            return event.data.todos
    return ()


def session_todos(session: Session) -> tuple[TodoItem, ...]:
    """:func:`latest_todos` of a live session, reading only its ``todo/write`` events
    from the latest back (a long resumed log stays in its file)."""
    for event in session.scan_back(TODO_WRITE.name):
        if isinstance(event.data, TodoWrite) and not session.shadowed(event.seq):
            return event.data.todos
    return ()


def todo_text(todos: Sequence[TodoItem]) -> str:
    lines = [f"- [{todo.status}] {todo.content}" for todo in todos]
    return "\n".join(lines)


def instruction(focus: str | None, todos: Sequence[TodoItem], omitted: int) -> str:
    parts = [INSTRUCTION]
    if focus:
        parts.append(f"The user asked the summary to pay particular attention to: {focus}")
    if todos:
        parts.append(
            "Your todo list at this point (it is kept as it is, next to your summary; "
            f"refer to it rather than copy it):\n{todo_text(todos)}"
        )
    if omitted:
        parts.append(
            f"The oldest {omitted} messages of the conversation did not fit in this request "
            "and were left out; say so in the summary."
        )
    return "\n\n".join(parts)


def summary_message(compaction_id: str, summary: str, todos: Sequence[TodoItem]) -> UserMessage:
    """The message that stands for the replaced history from now on."""
    parts = [
        "The earlier part of this conversation was compacted into this summary "
        "(written by you, for you):",
        summary.strip(),
    ]
    if todos:
        parts.append(
            "Your todo list when the conversation was compacted (todo_write replaces it):\n"
            + todo_text(todos)
        )
    text = "<compacted-summary>\n" + "\n\n".join(parts) + "\n</compacted-summary>"
    source = PluginSource.model_validate(
        {"plugin": SUMMARY_PLUGIN, "form": "summary", "compactionId": compaction_id}
    )
    return user_text(text, source=source)


def trimmed_result(message: ToolResultMessage) -> ToolResultMessage:
    """A tool result cut to its beginning, saying how much was left out."""
    text = joined_text(message.result.content)
    note = (
        f"[output cut short for the summary: {len(text) - KEEP_CHARS:,} more characters "
        "were left out]"
    )
    block = message.result.model_copy(
        update={"content": (TextBlock(text=f"{text[:KEEP_CHARS]}\n{note}"),)}
    )
    return message.model_copy(update={"content": (block,)})


def trimmable(message: Message | None) -> bool:
    return (
        isinstance(message, ToolResultMessage)
        and len(joined_text(message.result.content)) > 2 * KEEP_CHARS
    )


def history(events: Sequence[SessionEvent], head: Sequence[int], trim: Trim) -> list[Message]:
    """The replaced history as the summariser is sent it."""
    messages: list[Message] = []
    omitted, trimmed = set(trim.omitted), set(trim.trimmed)
    for seq in head:
        if seq in omitted:
            continue
        message = event_message(events[seq])
        if message is None:
            continue
        if seq in trimmed and isinstance(message, ToolResultMessage):
            message = trimmed_result(message)
        messages.append(as_text(message))
    return derive_history(messages)


_KNOWN = (TextBlock, ReasoningBlock, ToolCallBlock, ToolResultBlock)


def _named(block: Block) -> TextBlock:
    """A note in place of a block a summary cannot use: ``[image shot.png]``."""
    name = getattr(block, "name", None)
    return TextBlock(text=f"[{block.type} {name}]" if isinstance(name, str) else f"[{block.type}]")


def as_text(message: Message) -> Message:
    """``message`` with every block other than text, reasoning and tool calls and
    results (an image, say) replaced by a note naming it: the summariser is asked for
    text, and an image would cost the request more than the summary can keep of it."""

    def blocks(content: tuple[Block, ...]) -> tuple[Block, ...]:
        out: list[Block] = []
        for block in content:
            if isinstance(block, ToolResultBlock):
                out.append(block.model_copy(update={"content": blocks(block.content)}))
            elif isinstance(block, _KNOWN):
                out.append(block)
            else:
                out.append(_named(block))
        return tuple(out)

    def plain(content: tuple[Block, ...]) -> bool:
        return all(
            isinstance(b, _KNOWN) and (not isinstance(b, ToolResultBlock) or plain(b.content))
            for b in content
        )

    if plain(message.content):
        return message
    return message.model_copy(update={"content": blocks(message.content)})


@dataclass(frozen=True)
class Call:
    """The summariser's route and limits."""

    provider: str
    model: str
    reasoning_effort: str | None
    max_tokens: int | None


def build_request(
    header: EpochHeader | None,
    events: Sequence[SessionEvent],
    head: Sequence[int],
    trim: Trim,
    *,
    call: Call,
    focus: str | None,
    todos: Sequence[TodoItem],
    session_id: SessionId | None = None,
    signal: Any = None,
) -> GenerateOptions:
    messages = history(events, head, trim)
    ask = user_text(instruction(focus, todos, len(trim.omitted)))
    return GenerateOptions(
        provider=call.provider,
        model=call.model,
        messages=(*messages, ask),
        reasoning_effort=call.reasoning_effort,
        system=header.system if header is not None else None,
        tools=header.tools if header is not None else None,
        max_tokens=call.max_tokens,
        session_id=session_id,
        purpose=PURPOSE,
        signal=signal,
    )


def fit(
    header: EpochHeader | None,
    events: Sequence[SessionEvent],
    head: Sequence[int],
    *,
    budget: int | None,
    ratio: float,
    focus: str | None,
    todos: Sequence[TodoItem],
) -> Trim | None:
    """What to cut so that the request fits ``budget`` tokens (None: no limit). The
    oldest tool outputs are cut short first, then the oldest messages left out. None
    when even that is not enough."""
    if budget is None:
        return Trim()

    def size(trim: Trim) -> int:
        fixed = epoch_tokens(header) + text_tokens(instruction(focus, todos, len(trim.omitted)))
        return round((fixed + messages_tokens(history(events, head, trim))) * ratio)

    messages = {seq: event_message(events[seq]) for seq in head}
    estimates = {seq: message_tokens(m) if m is not None else 0 for seq, m in messages.items()}
    current = size(Trim())
    if current <= budget:
        return Trim()
    trimmed: list[int] = []
    for seq in head:  # the oldest tool outputs first
        message = messages[seq]
        if not trimmable(message):
            continue
        assert isinstance(message, ToolResultMessage)
        trimmed.append(seq)
        current -= round((estimates[seq] - message_tokens(trimmed_result(message))) * ratio)
        if current <= budget:
            break
    trim = Trim(tuple(trimmed))
    current = size(trim)
    omitted: list[int] = []
    for seq in head:  # then the oldest messages, while it still does not fit
        if current <= budget:
            return trim
        omitted.append(seq)
        trim = Trim(tuple(s for s in trimmed if s not in omitted), tuple(omitted))
        current = size(trim)
    return None


def rebuild_request(events: Sequence[SessionEvent], compaction_id: str) -> GenerateOptions:
    """The summariser's request of a compaction that produced its summary, rebuilt
    from the log alone (the same function builds it live)."""
    start_index = next(
        i
        for i, event in enumerate(events)
        if isinstance(event.data, CompactionStart) and event.data.compaction_id == compaction_id
    )
    start = events[start_index].data
    assert isinstance(start, CompactionStart)
    summary = next(
        event.data
        for event in events[start_index:]
        if isinstance(event.data, CompactionSummary) and event.data.compaction_id == compaction_id
    )
    before = events[: start_index + 1]
    return build_request(
        latest_header(before),
        events,
        summary.shadowed_seqs,
        Trim(summary.trimmed_seqs, summary.omitted_seqs),
        call=Call(summary.provider, summary.model, summary.reasoning_effort, summary.max_tokens),
        focus=start.focus,
        todos=latest_todos(before),
    )


def latest_header(events: Sequence[SessionEvent]) -> EpochHeader | None:
    """The latest full request header of ``events``."""
    for event in reversed(events):
        if isinstance(event.data, RequestHeader) and event.data.header is not None:
            return event.data.header
    return None
