"""Named keys a model can send to a terminal, as the bytes a terminal would send."""

from __future__ import annotations

import re

NAMED = {
    "enter": b"\r",
    "return": b"\r",
    "tab": b"\t",
    "esc": b"\x1b",
    "escape": b"\x1b",
    "backspace": b"\x7f",
    "space": b" ",
    "up": b"\x1b[A",
    "down": b"\x1b[B",
    "right": b"\x1b[C",
    "left": b"\x1b[D",
    "home": b"\x1b[H",
    "end": b"\x1b[F",
    "pageup": b"\x1b[5~",
    "pagedown": b"\x1b[6~",
    "delete": b"\x1b[3~",
    **{
        f"f{n}": code
        for n, code in zip(range(1, 5), (b"\x1bOP", b"\x1bOQ", b"\x1bOR", b"\x1bOS"), strict=True)
    },
    **{
        f"f{n}": f"\x1b[{code}~".encode()
        for n, code in zip(range(5, 13), (15, 17, 18, 19, 20, 21, 23, 24), strict=True)
    },
}
CONTROL = re.compile(r"^(?:c-|ctrl-|ctrl\+|\^)([a-z@\[\\\]^_])$")


class KeyError_(ValueError):
    """A key name nobody knows; the message lists the ones that exist."""


def key_bytes(name: str) -> bytes:
    """The bytes for one named key: ``Enter``, ``Up``, ``C-c`` (also ``Ctrl-C``, ``^C``)."""
    lowered = name.strip().lower()
    if lowered in NAMED:
        return NAMED[lowered]
    control = CONTROL.match(lowered)
    if control:
        return bytes([ord(control.group(1).upper()) & 0x1F])
    raise KeyError_(
        f"unknown key {name!r}; use Enter, Tab, Esc, Backspace, Space, Up, Down, Left, "
        "Right, Home, End, PageUp, PageDown, Delete, F1-F12, or C-a … C-z (Ctrl+letter)"
    )
