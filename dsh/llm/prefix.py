"""What keeps two requests from sharing a cached prompt prefix.

Providers with a prompt cache (DeepSeek's costs a fiftieth of a miss) reuse the longest
prefix a new request shares with earlier ones: the model, then the system prompt and the
tool list, then the messages in order. The loop builds each request to extend the one
before; :func:`prefix_changes` names what, between two requests, makes the later one
start the cache over, so the person can be told why a request costs more.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Literal

from dsh.llm.messages import Message
from dsh.llm.request import GenerateOptions, ToolSchema
from dsh.wire import Frozen

__all__ = ["PrefixChange", "PrefixPart", "first_difference", "prefix_changes"]

PrefixPart = Literal["model", "system", "tools", "history"]

PART_LABELS: dict[PrefixPart, str] = {
    "model": "the model",
    "system": "the system prompt",
    "tools": "the tool list",
    "history": "the conversation",
}


class PrefixChange(Frozen):
    """One part of a request that no longer begins as the previous request did."""

    part: PrefixPart
    detail: str
    """What changed, in a few words (``deepseek/a → deepseek/b``, ``+mcp__x__y``)."""

    def describe(self) -> str:
        return f"{PART_LABELS[self.part]}: {self.detail}"


def prefix_changes(before: GenerateOptions, after: GenerateOptions) -> tuple[PrefixChange, ...]:
    """What keeps ``after`` from extending ``before``, in prompt order; empty when it
    does. Messages are compared by identity first (the loop's history keeps unchanged
    messages as the same objects), so a long history costs little to check."""
    changes: list[PrefixChange] = []
    if (before.provider, before.model) != (after.provider, after.model):
        changes.append(
            PrefixChange(
                part="model",
                detail=f"{before.provider}/{before.model} → {after.provider}/{after.model}",
            )
        )
    if (before.system or "") != (after.system or ""):
        changes.append(PrefixChange(part="system", detail=_system_detail(before, after)))
    tools = _tools_detail(before.tools or (), after.tools or ())
    if tools is not None:
        changes.append(PrefixChange(part="tools", detail=tools))
    index = first_difference(before.messages, after.messages)
    if index is not None:
        kept = len(before.messages)
        detail = (
            f"rewritten from message {index + 1} of {kept} on"
            if index < len(after.messages)
            else f"cut to {len(after.messages)} of {kept} messages"
        )
        changes.append(PrefixChange(part="history", detail=detail))
    return tuple(changes)


def first_difference(before: Sequence[Message], after: Sequence[Message]) -> int | None:
    """The index of the first message of ``before`` that ``after`` does not repeat in
    its place; None when ``after`` begins with all of ``before``."""
    # The usual case, at every step: the same objects, checked at C speed (a long
    # history is thousands of messages).
    if len(after) >= len(before) and all(map(operator.is_, before, after)):
        return None
    for index, message in enumerate(before):
        if index >= len(after):
            return index
        other = after[index]
        if other is not message and other != message:
            return index
    return None


def _system_detail(before: GenerateOptions, after: GenerateOptions) -> str:
    old = (before.system or "").split("\n\n")
    new = (after.system or "").split("\n\n")
    for index, paragraph in enumerate(new):
        if index >= len(old) or old[index] != paragraph:
            return f"changed from “{_first_line(paragraph)}”"
    return "shortened" if len(old) > len(new) else "changed"


def _first_line(text: str, width: int = 60) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def _tools_detail(before: Sequence[ToolSchema], after: Sequence[ToolSchema]) -> str | None:
    if tuple(before) == tuple(after):
        return None
    old = {tool.name: tool for tool in before}
    new = {tool.name: tool for tool in after}
    parts = [f"+{name}" for name in new if name not in old]
    parts += [f"-{name}" for name in old if name not in new]
    parts += [f"{name} changed" for name in new if name in old and old[name] != new[name]]
    if not parts:
        return "the same tools in another order"
    shown = ", ".join(parts[:6])
    return shown + (f" and {len(parts) - 6} more" if len(parts) > 6 else "")
