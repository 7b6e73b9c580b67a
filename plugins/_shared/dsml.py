"""Tool calls a DeepSeek model wrote into its answer's text as DSML markup, salvaged.

DeepSeek's models are trained on a tool-call markup of their own, and now and then one
writes it into ``content`` instead of the API's ``tool_calls`` (deepseek-ai/DeepSeek-V3
issue 1244, still seen with V4); here with ``|`` for its full-width bar::

    <|DSML|tool_calls>
    <|DSML|invoke name="read">
    <|DSML|parameter name="path" string="true">main.py</|DSML|parameter>
    <|DSML|parameter name="limit" string="false">20</|DSML|parameter>
    </|DSML|invoke>
    </|DSML|tool_calls>

Left alone, the user sees the markup and the loop, seeing no tool call, ends the turn.
:class:`DsmlSalvage` is fed the answer's text deltas as they stream and hands back
:class:`Visible` text (the prose around the markup) and :class:`SalvagedCall` values
(the calls, arguments as JSON text). It holds back only what could still be the start
of a marker, so prose streams as it comes and no marker shows, even one split across
deltas. The variants seen in the wild are read alike: the bar U+FF5C (full width),
``‖`` or ``|``; the envelope ``tool_calls`` or ``function_calls``, or none around a
bare ``invoke``. A parameter with ``string="true"`` is its text as written;
``string="false"`` is a JSON value.

Markup that cannot be read whole (malformed, empty, or never closed) is never run in
part and never hides the text after it: it is released as written, fenced so a
Markdown view cannot swallow it, and the answer ends with a note saying the model
wrote tool calls as text that could not be read. The note goes back to the model with the answer, so
it can call the tools properly.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_FULL_WIDTH_BAR = "\uff5c"
_BARS = (_FULL_WIDTH_BAR, "\u2016", "|")
_OPENERS = tuple(f"<{slash}{bar}DSML{bar}" for slash in ("", "/") for bar in _BARS)
_LONGEST_OPENER = max(len(opener) for opener in _OPENERS)
_BAR = f"[{''.join(_BARS)}]"
_MARK = rf"{_BAR}DSML{_BAR}"
_ENVELOPES = ("tool_calls", "function_calls")
_TAG_LIMIT = 400
"""Characters after a marker within which its tag must close (``>``): a tag is a name
and a few short attributes, so more is prose that happens to mention the marker."""
_ATTRIBUTE = re.compile(r"""\s*([A-Za-z_][\w-]*)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_TAG_HEAD = re.compile(rf"<(/?){_MARK}([A-Za-z_]*)[^>\n]{{0,{_TAG_LIMIT}}}>")
"""A tag's name, whatever its attributes; judged whole later."""
_ATTRIBUTES = r"""(?:\s*[A-Za-z_][\w-]*\s*=\s*(?:"[^"]*"|'[^']*'))*"""
_TAG = re.compile(rf"<(/?){_MARK}([A-Za-z_]+)({_ATTRIBUTES})\s*(/?)>")


@dataclass(frozen=True, slots=True)
class Visible:
    """Answer text to show, in order with the calls."""

    text: str


@dataclass(frozen=True, slots=True)
class SalvagedCall:
    """A tool call read from the markup; ``arguments`` is a JSON object's text."""

    name: str
    arguments: str


Salvaged = Visible | SalvagedCall


class _Unreadable(Exception):
    """Markup that is not a whole, well-formed set of tool calls; says why."""


@dataclass(frozen=True, slots=True)
class _Tag:
    closing: bool
    name: str
    attributes: dict[str, str]
    start: int
    end: int


def _tag_at(text: str, position: int) -> _Tag | None:
    match = _TAG.match(text, position)
    if match is None:
        return None
    attributes: dict[str, str] = {}
    for found in _ATTRIBUTE.finditer(match.group(3)):
        key = found.group(1)
        value = found.group(2) if found.group(2) is not None else found.group(3)
        if key in attributes:
            raise _Unreadable(f"a tag names {key!r} twice")
        attributes[key] = value
    if match.group(4):
        raise _Unreadable(f"a self-closing <{match.group(2)}/> tag")
    return _Tag(bool(match.group(1)), match.group(2), attributes, match.start(), match.end())


def _expect_tag(text: str, position: int) -> _Tag:
    """The tag at ``position``, only whitespace before it."""
    start = len(text) - len(text[position:].lstrip())
    tag = _tag_at(text, start) if start < len(text) else None
    if tag is None:
        seen = text[start : start + 40]
        raise _Unreadable(f"text where a tag belongs: {seen!r}" if seen else "it stops short")
    return tag


def _value(raw: str, as_string: str | None, name: str) -> Any:
    if as_string == "true":
        return raw
    if as_string == "false":
        try:
            return json.loads(raw)
        except ValueError:
            raise _Unreadable(f"parameter {name!r} is not the JSON value it says") from None
    if as_string is not None:
        raise _Unreadable(f'parameter {name!r} has string="{as_string}"')
    # Some replies leave the attribute out: a JSON value where the text is one (a
    # number, true), else the text as written.
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _invoke(text: str, tag: _Tag) -> tuple[SalvagedCall, int]:
    """The call an ``invoke`` tag opens, and where its closing tag ends."""
    name = tag.attributes.get("name", "").strip()
    if not name:
        raise _Unreadable("an invoke without a tool name")
    arguments: dict[str, Any] = {}
    position = tag.end
    while True:
        inner = _expect_tag(text, position)
        if inner.closing:
            if inner.name != "invoke":
                raise _Unreadable(f"</{inner.name}> closes invoke {name!r}")
            break
        if inner.name != "parameter":
            raise _Unreadable(f"<{inner.name}> inside invoke {name!r}")
        key = inner.attributes.get("name", "")
        if not key:
            raise _Unreadable(f"a parameter of {name!r} without a name")
        if key in arguments:
            raise _Unreadable(f"parameter {key!r} of {name!r} given twice")
        close = re.compile(rf"</{_MARK}parameter\s*>").search(text, inner.end)
        if close is None:
            raise _Unreadable(f"parameter {key!r} of {name!r} is never closed")
        raw = text[inner.end : close.start()]
        if re.search(rf"<{_MARK}", raw):
            raise _Unreadable(f"parameter {key!r} of {name!r} runs into another tag")
        arguments[key] = _value(raw, inner.attributes.get("string"), key)
        position = close.end()
    call = SalvagedCall(name, json.dumps(arguments, ensure_ascii=False))
    return call, inner.end


def parse_region(text: str) -> list[SalvagedCall]:
    """The calls of one whole stretch of markup: an envelope holding invokes, or one
    or more bare invokes. Raises :class:`_Unreadable` for anything else."""
    first = _expect_tag(text, 0)
    calls: list[SalvagedCall] = []
    if first.name in _ENVELOPES and not first.closing:
        position = first.end
        while True:
            tag = _expect_tag(text, position)
            if tag.closing and tag.name == first.name:
                position = tag.end
                break
            if tag.closing or tag.name != "invoke":
                raise _Unreadable(f"<{'/' if tag.closing else ''}{tag.name}> in {first.name}")
            call, position = _invoke(text, tag)
            calls.append(call)
        if not calls:
            raise _Unreadable(f"an empty {first.name}")
    elif first.name == "invoke" and not first.closing:
        call, position = _invoke(text, first)
        calls.append(call)
    else:
        raise _Unreadable(f"<{'/' if first.closing else ''}{first.name}> where calls begin")
    if text[position:].strip():
        raise _Unreadable("text after the calls")
    return calls


def _held_from(text: str) -> int:
    """Where the part of ``text`` that could still become a marker starts: the first
    marker, else a ``<`` at the end that is the start of one, else ``len(text)``."""
    start = 0
    while (at := text.find("<", start)) != -1:
        rest = text[at : at + _LONGEST_OPENER]
        if any(rest.startswith(opener) or opener.startswith(rest) for opener in _OPENERS):
            return at
        start = at + 1
    return len(text)


def _fenced(raw: str) -> str:
    """``raw`` in a code fence longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", raw)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"\n\n{fence}\n{raw.strip(chr(10))}\n{fence}\n\n"


def unreadable_note(reasons: list[str]) -> str:
    return (
        "\n\n(dsh: the model wrote tool calls as text, and they could not be read "
        f"({'; '.join(dict.fromkeys(reasons))}); they are shown above as written, and "
        "nothing was run.)"
    )


class DsmlSalvage:
    """Text deltas in, visible text and salvaged calls out; :meth:`end` at the end."""

    def __init__(self) -> None:
        self._held = ""
        """Text not yet handed on: a possible marker's start, or markup being read."""
        self._in_markup = False
        self._close_searched = 0
        """How far into the held markup the search for its closing tag has looked."""
        self._closing: re.Pattern[str] | None = None
        self._after_markup = False
        """The whitespace right after salvaged markup is dropped, not shown."""
        self._broke_line = False
        self.calls = 0
        self._unreadable_why: list[str] = []

    def feed(self, text: str) -> list[Salvaged]:
        self._held += text
        out: list[Salvaged] = []
        while self._step(out):
            pass
        return out

    def end(self) -> list[Salvaged]:
        """What is still held, at the end of the answer (markup never closed is shown
        as written), and the note if any markup could not be read."""
        out: list[Salvaged] = []
        held, self._held = self._held, ""
        if self._in_markup:
            self._in_markup = False
            self._unreadable(held, "the markup is never closed", out)
        elif held:
            self._show(held, out)
        if self._unreadable_why:
            self._after_markup = False
            self._show(unreadable_note(self._unreadable_why), out)
            self._unreadable_why = []
        return out

    @property
    def unreadable(self) -> int:
        """How many stretches of markup could not be read (until :meth:`end`)."""
        return len(self._unreadable_why)

    # ------------------------------------------------------------------ stepping

    def _step(self, out: list[Salvaged]) -> bool:
        """One move; False when nothing more can be decided until more text comes."""
        if not self._in_markup:
            held_from = _held_from(self._held)
            if held_from:
                shown, self._held = self._held[:held_from], self._held[held_from:]
                self._show(shown, out)
            if not self._held or not any(self._held.startswith(o) for o in _OPENERS):
                return False
            self._in_markup, self._close_searched, self._closing = True, 0, None
        if self._closing is None:
            return self._read_first_tag(out)
        found = self._closing.search(self._held, self._close_searched)
        if found is None:
            # The closing tag may be arriving in pieces: look again from a little
            # before this delta's end, never scanning the whole markup again.
            self._close_searched = max(self._close_searched, len(self._held) - 64)
            return False
        region, self._held = self._held[: found.end()], self._held[found.end() :]
        self._in_markup = False
        try:
            calls = parse_region(region)
        except _Unreadable as why:
            self._unreadable(region, str(why), out)
        else:
            out.extend(calls)
            self.calls += len(calls)
            self._after_markup = True
        return True

    def _read_first_tag(self, out: list[Salvaged]) -> bool:
        """Decide, once the markup's first tag is whole, what closes it. Its attributes
        are judged with the rest, once the markup is whole."""
        head = _TAG_HEAD.match(self._held)
        if head is None:
            line_ends = "\n" in self._held or len(self._held) > _TAG_LIMIT
            if not line_ends:
                return False  # the tag is still arriving
            opener = next(o for o in _OPENERS if self._held.startswith(o))
            self._stray(len(opener), "a marker that opens no tag", out)
            return True
        closing, name = bool(head.group(1)), head.group(2)
        if closing or name not in (*_ENVELOPES, "invoke"):
            self._stray(head.end(), f"<{head.group(1)}{name}> where tool calls begin", out)
            return True
        self._closing = re.compile(rf"</{_MARK}{name}\s*>")
        self._close_searched = head.end()
        return True

    def _stray(self, length: int, why: str, out: list[Salvaged]) -> None:
        """A marker that begins no tool calls: shown as written, with the note, and
        reading goes on right after it."""
        stray, self._held = self._held[:length], self._held[length:]
        self._in_markup = False
        self._unreadable_why.append(why)
        self._show(stray, out)  # a lone tag shows as written, in the prose

    def _show(self, text: str, out: list[Salvaged]) -> None:
        if self._after_markup:
            # The line break after the markup is kept (one), not its indentation.
            kept = text.lstrip()
            if not kept:
                self._broke_line = self._broke_line or "\n" in text
                return
            if self._broke_line or "\n" in text[: len(text) - len(kept)]:
                kept = "\n" + kept
            text, self._after_markup, self._broke_line = kept, False, False
        if out and isinstance(out[-1], Visible):
            out[-1] = Visible(out[-1].text + text)
        else:
            out.append(Visible(text))

    def _unreadable(self, raw: str, why: str, out: list[Salvaged]) -> None:
        """Markup not read: shown as written, fenced; the note comes at the end."""
        self._unreadable_why.append(why)
        self._after_markup = False
        self._show(_fenced(raw), out)
