"""Columns between what the tool shows (code points) and what servers count (UTF-16
units by the spec; UTF-8 bytes or code points for some)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_plugins.lsp.positions import (
    ENCODINGS,
    Encoding,
    from_utf8,
    from_utf16,
    from_wire,
    line_count,
    split_lines,
    to_utf8,
    to_utf16,
    to_wire,
)

LINE = 's = "héllo 😀"; area(x)'


def test_utf16_counts_astral_characters_twice() -> None:
    area = LINE.index("area")
    assert area == 15
    assert to_utf16(LINE, area) == 16  # é is one unit, 😀 two
    assert from_utf16(LINE, 16) == area
    assert to_utf16("plain ascii", 6) == 6
    assert from_utf16("plain ascii", 6) == 6


def test_utf8_counts_bytes() -> None:
    area = LINE.index("area")
    assert to_utf8(LINE, area) == len(LINE[:area].encode())  # é two bytes, 😀 four
    assert to_utf8(LINE, area) == 19
    assert from_utf8(LINE, 19) == area


def test_columns_inside_a_character_or_past_the_end_are_clamped() -> None:
    emoji = LINE.index("😀")
    units = to_utf16(LINE, emoji)
    assert from_utf16(LINE, units + 1) == emoji  # between the surrogates: the character
    assert from_utf8(LINE, to_utf8(LINE, emoji) + 2) == emoji
    assert from_utf16(LINE, 999) == len(LINE)
    assert from_utf16(LINE, -3) == 0
    assert to_utf16(LINE, 999) == len(LINE.encode("utf-16-le")) // 2
    assert from_wire(LINE, 999, "utf-32") == len(LINE)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_wire_encodings_agree_with_python_codecs(encoding: Encoding) -> None:
    codec, width = {"utf-8": ("utf-8", 1), "utf-16": ("utf-16-le", 2), "utf-32": ("utf-32-le", 4)}[
        encoding
    ]
    for index in range(len(LINE) + 1):
        units = len(LINE[:index].encode(codec)) // width
        assert to_wire(LINE, index, encoding) == units
        assert from_wire(LINE, units, encoding) == index


@given(st.text(), st.data())
def test_every_column_round_trips(text: str, data: st.DataObject) -> None:
    index = data.draw(st.integers(min_value=0, max_value=len(text)))
    for encoding in ENCODINGS:
        assert from_wire(text, to_wire(text, index, encoding), encoding) == index


def test_lines_break_as_lsp_breaks_them() -> None:
    assert split_lines("a\nb\r\nc\rd") == ["a", "b", "c", "d"]
    # Form feeds and Unicode line separators are not line breaks in LSP.
    assert split_lines("a\x0cb\u2028c\n") == ["a\x0cb\u2028c", ""]
    assert line_count(split_lines("a\nb\n")) == 2
    assert line_count(split_lines("a\nb")) == 2
    assert line_count(split_lines("")) == 1
