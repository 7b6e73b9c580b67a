"""The words of a title: cut from the first prompt, cleaned from a model's reply, or
typed by the person. Pure functions, so the rules are tested without a model."""

from __future__ import annotations

import re

FALLBACK_CHARS = 50
"""A fallback title is the first prompt's opening words, at most this long."""
MODEL_CHARS = 60
"""A model's title is cut to this; it was asked for six words."""
USER_CHARS = 120
"""A title typed with ``/title`` is cut to this: it is shown on one line."""

SYSTEM = (
    "You name sessions of a coding assistant. Reply with only a title of at most six "
    "words that says what the session is about: plain text on one line, in the "
    "language of the conversation, without quotes, markdown or a final period."
)

_LIST_MARK = re.compile(r"^(?:#+|[-*+>]|\d+[.)])\s+")
_DASHES = "\u2013\u2014"  # en and em dash
_LABEL = re.compile(rf"^(?:session\s+)?title(?:\s*:|\s+[-{_DASHES}])\s*", re.IGNORECASE)
_WRAPPERS = "\"'`*\u201c\u201d\u2018\u2019\u00ab\u00bb\u201e"  # quotes of many languages


def one_line(text: str) -> str:
    """Every run of whitespace (newlines too) as one space, trimmed."""
    return " ".join(text.split())


def shorten(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, cut at a word boundary when one is near
    enough, with an ellipsis to show it was cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(f" ,.;:-{_DASHES}") + "…"


def fallback_title(prompt: str, limit: int = FALLBACK_CHARS) -> str | None:
    """The first words of the first prompt; None when it has none (an image alone)."""
    text = one_line(prompt)
    return shorten(text, limit) if text else None


def clean_title(reply: str, limit: int = MODEL_CHARS) -> str | None:
    """A model's reply as a title: its first non-blank line without list or heading
    marks, a ``Title:`` label, wrapping quotes or emphasis, or a final period. None
    when nothing is left."""
    line = next((line.strip() for line in reply.splitlines() if line.strip()), "")
    line = _LIST_MARK.sub("", line)
    line = _LABEL.sub("", line)
    previous = None
    while previous != line:  # "**"Fix the parser"**" sheds both layers
        previous = line
        line = line.strip().strip(_WRAPPERS).strip()
    line = one_line(line)
    if line.endswith(".") and not line.endswith(".."):
        line = line[:-1].rstrip()
    return shorten(line, limit) if line else None


def user_title(text: str, limit: int = USER_CHARS) -> str | None:
    """What the person typed after ``/title``, on one line."""
    line = one_line(text)
    return shorten(line, limit) if line else None


def title_prompt(first_prompt: str, answer: str | None) -> str:
    """The one user message of a title request: the session's opening exchange, cut
    short, since its beginning says what it is about."""
    parts = [
        "Write the title of the session that begins like this.",
        f"<first_prompt>\n{shorten(first_prompt.strip(), 2000)}\n</first_prompt>",
    ]
    if answer and answer.strip():
        parts.append(f"<first_answer>\n{shorten(answer.strip(), 1000)}\n</first_answer>")
    return "\n\n".join(parts)
