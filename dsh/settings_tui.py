"""``[tui]``, the interactive UI's table: checked without pydantic.

The TUI reads this table before it paints its first frame, and pydantic (with the
models it builds) costs a tenth of the start-up budget, so this one core table is a
plain dataclass whose few keys (text, switches, a choice of words) are checked here.
The other core tables are pydantic models (:mod:`dsh.settings_tables`, which exports
this one too)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

Notify = Literal["auto", "bell", "osc9", "osc777", "off"]


class TableProblem(ValueError):
    """A key of a table holds what its model refuses (``loc`` the key's path in the
    table, ``msg`` what is wrong), as pydantic reports a validation error."""

    def __init__(self, loc: tuple[str, ...], msg: str) -> None:
        super().__init__(f"{'.'.join(loc)}: {msg}")
        self.loc = loc
        self.msg = msg


@dataclass(frozen=True)
class TuiTable:
    """``[tui]``: the interactive UI."""

    theme: str = "dsh-dark"
    mouse: bool = True
    """Off lets the terminal's own selection work (the app then ignores the mouse)."""
    copy_on_select: bool = True
    """Text selected in the transcript with the mouse is copied when the button is
    released; off, it is copied with Ctrl+C only."""
    notify: Notify = "auto"
    """How dsh calls you back while the terminal is not focused, when an approval or a
    question waits or a turn of 30 s or more ends: the terminal's bell, a desktop
    notification by OSC 9 or OSC 777 (wrapped for tmux's passthrough inside tmux), or
    nothing. ``auto`` sends OSC 9 to iTerm2, WezTerm, kitty and Ghostty, OSC 777 to
    foot, and rings the bell elsewhere (tmux and screen included)."""

    @classmethod
    def model_validate(cls, table: Mapping[str, Any]) -> TuiTable:
        """The table checked key by key, as the pydantic tables are: unknown keys and
        values of the wrong type are refused (:class:`TableProblem`), never coerced."""
        hints = get_type_hints(cls, globals())
        known = {field.name for field in dataclasses.fields(cls)}
        for key, value in table.items():
            if key not in known:
                raise TableProblem((key,), "Extra inputs are not permitted")
            _check(key, hints[key], value)
        return cls(**table)

    @classmethod
    def default_of(cls, key: str) -> tuple[bool, Any]:
        """Whether ``key`` is one of the table's, and its default."""
        for field in dataclasses.fields(cls):
            if field.name == key:
                return True, field.default
        return False, None


def _check(key: str, kind: Any, value: Any) -> None:
    if get_origin(kind) is Literal:
        choices = get_args(kind)
        if value not in choices:
            listed = [repr(choice) for choice in choices]
            said = f"{', '.join(listed[:-1])} or {listed[-1]}"
            raise TableProblem((key,), f"Input should be {said}")
    elif kind is bool and not isinstance(value, bool):
        raise TableProblem((key,), "Input should be a valid boolean")
    elif kind is str and not isinstance(value, str):
        raise TableProblem((key,), "Input should be a valid string")


def save_tui_choice(settings_file: Path, key: str, value: str | bool) -> Path:
    """``[tui] key = value`` in the user's ``settings_file`` (``$DSH_HOME/settings.toml``),
    the rest of it kept as written, comments included: a choice made in the TUI
    (``/theme``) that the next start reads. Returns the path written; raises
    :class:`~dsh.settings_files.SettingsError` when the document cannot be read as
    TOML or written (it is then left as it was)."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    from dsh.regular_files import read_regular_file
    from dsh.settings_files import SettingsError, write_private

    known, _ = TuiTable.default_of(key)
    if not known:
        raise ValueError(f"[tui] has no key {key!r}")
    _check(key, get_type_hints(TuiTable, globals())[key], value)
    # A document kept elsewhere and linked (dotfiles) is written where it lives.
    path = settings_file.resolve()
    try:
        text = read_regular_file(path).decode("utf-8") if path.exists() else ""
        document = tomlkit.parse(text)
        table = document.get("tui")
        if table is None:
            table = tomlkit.table()
            document["tui"] = table
        elif not isinstance(table, dict):
            raise SettingsError(f"{path}: `tui` is not a table; the choice is not saved")
        table[key] = value
        write_private(path, tomlkit.dumps(document))
    except (TOMLKitError, UnicodeDecodeError) as error:
        raise SettingsError(f"{path}: not valid TOML ({error}); the choice is not saved") from None
    except OSError as error:
        raise SettingsError(f"{path}: cannot be written: {error.strerror}") from None
    return path
