"""The compaction plugin's event types, and how they show in a transcript.

One compaction is bracketed by ``compaction/start`` and ``compaction/end``; the
``compaction/summary`` between them records the summary, what it replaced and the
model call that wrote it (which counts in the session's spend). The history itself
changes through the core's surface ``replace`` (the summary message that follows), so
the model's view of a log is the same whether or not this plugin is loaded.
"""

from __future__ import annotations

from pydantic import NonNegativeInt, PositiveInt

from dsh.llm import Purpose, TokenUsage
from dsh.session import EventType, PaidCall, SessionEvent, SideAnswer
from dsh.transcript import Transcript
from dsh.wire import Frozen

PURPOSE = Purpose("compaction")
"""The purpose of the model call that writes a summary."""
ACTIVITY = "compacting"
"""What the status line says while a compaction runs."""


class CompactionStart(Frozen):
    compaction_id: str
    turn: PositiveInt | None = None
    focus: str | None = None
    """What the person asked the summary to dwell on (``/compact FOCUS``)."""


class CompactionSummary(Frozen):
    compaction_id: str
    summary: str
    shadowed_range: tuple[NonNegativeInt, NonNegativeInt]
    shadowed_seqs: tuple[NonNegativeInt, ...]
    shadowed_token_count: NonNegativeInt
    provider: str
    model: str
    usage: TokenUsage | None = None
    reasoning_effort: str | None = None
    max_tokens: PositiveInt | None = None
    trimmed_seqs: tuple[NonNegativeInt, ...] = ()
    """Tool results sent to the summariser cut short, so its request fit the window."""
    omitted_seqs: tuple[NonNegativeInt, ...] = ()
    """Shadowed events left out of the summariser's request altogether, for the same reason."""
    context_tokens: NonNegativeInt | None = None
    """The estimated size of the context right after the compaction: what a status line
    shows as context use until the next request reports the real figure."""


class CompactionEnd(Frozen):
    compaction_id: str
    turn: PositiveInt | None = None
    error: str | None = None


class CeilingFit(Frozen):
    """What was done so that a request's prompt and its longest answer fit the model's
    ceiling (its context window, which counts both): the output cap lowered, or, when
    even ``min_answer_tokens`` would not fit, the history compacted first."""

    turn: PositiveInt | None = None
    context_tokens: NonNegativeInt
    """The estimated size of the prompt."""
    ceiling: PositiveInt
    max_tokens: PositiveInt
    """The output cap the request would have asked."""
    lowered_to: PositiveInt | None = None
    """The cap it asks instead; None when the history is compacted first."""


def _paid_call(data: CompactionSummary) -> PaidCall | None:
    if data.usage is None:
        return None
    return PaidCall(data.provider, data.model, data.usage)


def _side_answer(data: CompactionSummary) -> SideAnswer:
    return SideAnswer(PURPOSE, data.summary, data.usage)


START = EventType("compaction/start", CompactionStart)
SUMMARY = EventType(
    "compaction/summary", CompactionSummary, paid_call=_paid_call, side_answer=_side_answer
)
END = EventType("compaction/end", CompactionEnd)
CEILING = EventType("compaction/ceiling", CeilingFit)
EVENTS = (START, SUMMARY, END, CEILING)


# ---------------------------------------------------------------------- transcript


def show_start(event: SessionEvent, transcript: Transcript) -> None:
    transcript.set_activity(ACTIVITY)


def show_summary(event: SessionEvent, transcript: Transcript) -> None:
    data: CompactionSummary = event.data
    if data.context_tokens is not None:  # until the next request reports it
        transcript.set_context_tokens(data.context_tokens)
    transcript.notice(
        event,
        "info",
        f"Compacted {data.shadowed_token_count:,} tokens of earlier conversation into a summary.",
    )


def show_end(event: SessionEvent, transcript: Transcript) -> None:
    data: CompactionEnd = event.data
    transcript.set_activity("idle" if data.turn is None else "thinking")
    if data.error:
        transcript.notice(event, "error", f"Compaction failed: {data.error}")


def show_ceiling(event: SessionEvent, transcript: Transcript) -> None:
    data: CeilingFit = event.data
    limit = f"the model's {data.ceiling:,}-token limit"
    if data.lowered_to is None:
        text = (
            f"The conversation (about {data.context_tokens:,} tokens) leaves too little "
            f"room for an answer under {limit} (prompt and answer together): compacting "
            "it first."
        )
    else:
        text = (
            f"This answer may use at most {data.lowered_to:,} tokens (not "
            f"{data.max_tokens:,}): the conversation (about {data.context_tokens:,} tokens) "
            f"and the answer must fit within {limit}."
        )
    transcript.notice(event, "info", text)


FOLD_STEPS = {
    START.name: show_start,
    SUMMARY.name: show_summary,
    END.name: show_end,
    CEILING.name: show_ceiling,
}
