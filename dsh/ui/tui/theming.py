"""Themes as data: TOML or JSON files turned into validated Textual themes.

dsh ships three themes in the top-level ``themes/`` folder (``dsh-dark``,
``dsh-light``, ``dsh-high-contrast``); a person adds or overrides themes with files
in ``$DSH_HOME/themes/`` (a user theme with a bundled theme's name wins). Each file
holds :class:`~textual.theme.Theme` fields at the top level and stylesheet variables
in a ``[variables]`` table.

Everything is validated before Textual sees it: ``register_theme`` accepts a theme
with ``primary = "zzz"`` and activating it kills the app, and a ``$variable`` the
stylesheet uses but the theme lacks breaks stylesheet parsing. So bad files become
error strings for the app to show, never exceptions, and every theme (Textual's
built-in ones too) gets the app's own variables (``$diff-added`` …, the keys of
:data:`THEME_VARIABLE_DEFAULTS`), derived from its palette unless it sets them.

Public API:

- ``load_themes(folders) -> (themes, errors)``: every valid theme in the folders, a
  later folder's theme replacing an earlier one of the same name; one error string
  per unusable file. ``load_theme(path) -> Theme`` and ``theme_from_data(data) ->
  Theme`` do one file / one parsed table and raise :class:`ThemeError`.
- ``theme_folders(home) -> [bundled, home/"themes"]``; ``bundled_themes_folder()``.
- ``register_themes(app, home) -> errors``: load and register them all (call it in
  the app's ``__init__``); ``choose_theme(app, name) -> problem | None``: switch to
  a theme, falling back to :data:`DEFAULT_THEME`.
- ``variable_defaults(app) -> dict``: for the app's ``get_theme_variable_defaults``
  (the app variables for its current theme); ``app_variables(theme)``,
  ``with_app_variables(theme)``.
- :data:`THEME_VARIABLE_DEFAULTS` (fixed fallbacks of the app variables),
  :data:`APP_VARIABLES` (their names), :data:`DEFAULT_THEME`.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from textual.app import App
from textual.color import Color, ColorParseError
from textual.theme import Theme

import dsh

DEFAULT_THEME = "dsh-dark"
FALLBACK_THEME = "textual-dark"
"""Used when the bundled themes cannot be found (a broken install)."""

FIELDS = frozenset(field.name for field in dataclasses.fields(Theme))
COLOURS = (
    "primary",
    "secondary",
    "accent",
    "warning",
    "error",
    "success",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
THEME_VARIABLE_DEFAULTS: dict[str, str] = {
    "diff-added": "#98C379",
    "diff-removed": "#E06C75",
    "tool-running": "#E5C07B",
    "tool-done": "#98C379",
    "tool-failed": "#E06C75",
    "reasoning": "#8B95A5",
    "muted": "#7A8494",
}
"""The app's own stylesheet variables (``$diff-added`` …) with fixed fallback values
(``dsh-dark``'s). Every registered theme carries its own values for them; these are
only used when no theme can be consulted."""

APP_VARIABLES = tuple(THEME_VARIABLE_DEFAULTS)
"""The names of the app's own stylesheet variables."""

SUFFIXES = (".toml", ".json")


class ThemeError(ValueError):
    """A theme file that cannot be used; the message says why."""


def bundled_themes_folder() -> Path | None:
    """The shipped ``themes/`` folder: inside the package in an installed wheel, else
    next to it in a checkout. Inside first: next to an installed package is
    site-packages, where a ``themes`` folder would be another project's."""
    package = Path(dsh.__file__).resolve().parent
    for folder in (package / "themes", package.parent / "themes"):
        if folder.is_dir():
            return folder
    return None


def theme_folders(home: Path) -> list[Path]:
    """Where themes come from, in order: later folders override earlier ones by name."""
    folders = []
    bundled = bundled_themes_folder()
    if bundled is not None:
        folders.append(bundled)
    folders.append(home / "themes")
    return folders


def load_themes(folders: Iterable[Path]) -> tuple[list[Theme], list[str]]:
    """Every valid theme in ``folders`` (a later folder's theme replaces an earlier one
    of the same name) and one error string per file that could not be used."""
    themes: dict[str, Theme] = {}
    errors: list[str] = []
    for folder in folders:
        if not folder.is_dir():
            continue
        paths = sorted(path for path in folder.iterdir() if path.suffix in SUFFIXES)
        for path in paths:
            try:
                theme = load_theme(path)
            except ThemeError as error:
                errors.append(f"theme {path}: {error}")
                continue
            themes.pop(theme.name, None)  # re-insert: the overriding file's position
            themes[theme.name] = theme
    return list(themes.values()), errors


def load_theme(path: Path) -> Theme:
    """One theme file, validated. Raises :class:`ThemeError`."""
    try:
        raw = path.read_text(encoding="utf-8")
        data = tomllib.loads(raw) if path.suffix == ".toml" else json.loads(raw)
    except (OSError, UnicodeDecodeError, ValueError) as error:  # TOMLDecodeError, JSON
        raise ThemeError(f"cannot read it: {error}") from None
    if not isinstance(data, dict):
        raise ThemeError("expected a table of theme fields")
    data.setdefault("name", path.stem)
    return theme_from_data(data)


def theme_from_data(data: dict[str, Any]) -> Theme:
    """A :class:`Theme` from parsed fields, every key and colour checked, with the
    app's variables filled in. Raises :class:`ThemeError`."""
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        raise ThemeError(f"unknown keys {', '.join(unknown)} (known: {', '.join(sorted(FIELDS))})")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ThemeError("name must be a non-empty string")
    if "primary" not in data:
        raise ThemeError("primary is required")
    for key in COLOURS:
        value = data.get(key)
        if value is None and key != "primary":
            continue
        if not isinstance(value, str) or not is_colour(value):
            raise ThemeError(f"{key}: {value!r} is not a colour")
    for key in ("dark", "ansi"):
        if key in data and not isinstance(data[key], bool):
            raise ThemeError(f"{key} must be true or false")
    for key in ("luminosity_spread", "text_alpha"):
        value = data.get(key)
        if key in data and (
            isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1
        ):
            raise ThemeError(f"{key} must be a number from 0 to 1")
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        raise ThemeError("variables must be a table of names and values")
    try:
        theme = Theme(**{**data, "variables": {}})
        palette = theme.to_color_system().generate()  # anything else the palette chokes on
    except Exception as error:  # Textual's own checks, whatever they raise
        raise ThemeError(str(error)) from None
    for key, value in variables.items():
        if not isinstance(value, str) or not value.strip():
            raise ThemeError(f"variables.{key} must be a non-empty string")
        # A colour variable (one of the app's, or one of Textual's that holds a colour)
        # must stay a colour: the stylesheet uses it where only a colour parses.
        wants_colour = key in APP_VARIABLES or (
            key in palette and is_colour(palette[key], alpha_suffix=True)
        )
        if wants_colour and not is_colour(value, alpha_suffix=True):
            raise ThemeError(f"variables.{key}: {value!r} is not a colour")
    theme = dataclasses.replace(theme, variables=dict(variables))
    return with_app_variables(theme)


def is_colour(value: str, *, alpha_suffix: bool = False) -> bool:
    """Whether Textual parses ``value`` as a colour; with ``alpha_suffix`` the
    stylesheet form ``"#rrggbb 60%"`` counts too."""
    text = value.strip()
    if alpha_suffix:
        colour, _, alpha = text.rpartition(" ")
        if colour and alpha.endswith("%") and alpha[:-1].replace(".", "", 1).isdigit():
            text = colour.strip()
    try:
        Color.parse(text)
    except ColorParseError:
        return False
    return True


def app_variables(theme: Theme) -> dict[str, str]:
    """The app's variables derived from ``theme``'s palette: concrete colours, because
    a variable's value cannot refer to another variable."""
    palette = theme.to_color_system().generate()
    return {
        "diff-added": palette["success"],
        "diff-removed": palette["error"],
        "tool-running": palette["warning"],
        "tool-done": palette["success"],
        "tool-failed": palette["error"],
        "reasoning": palette["foreground-muted"],
        "muted": palette["foreground-muted"],
    }


def with_app_variables(theme: Theme) -> Theme:
    """``theme`` with every app variable it lacks filled in from its palette."""
    if all(name in theme.variables for name in APP_VARIABLES):
        return theme
    return dataclasses.replace(theme, variables={**app_variables(theme), **theme.variables})


def register_themes(app: App[Any], home: Path) -> list[str]:
    """Register the bundled and the user's themes with ``app`` and give Textual's
    built-in themes the app's variables; the error strings are for the app to show.

    Call it in the app's ``__init__`` (before the stylesheet is first parsed), then
    set ``app.theme`` (see :func:`choose_theme`)."""
    themes, errors = load_themes(theme_folders(home))
    if not any(theme.name == DEFAULT_THEME for theme in themes):
        errors.append(f"the bundled theme {DEFAULT_THEME} was not found (is dsh fully installed?)")
    ours = {theme.name for theme in themes}
    for name, theme in list(app.available_themes.items()):
        if name not in ours:
            app.register_theme(with_app_variables(theme))
    for theme in themes:
        app.register_theme(theme)
    return errors


def preset_theme(app: App[Any], name: str | None) -> None:
    """Before ``app`` runs (its themes registered): a dark theme ``name`` (the default
    when None) made current as Textual makes its own default current, so that the
    stylesheet is parsed once, with this theme's variables, and :func:`choose_theme`
    then finds it set. Set later, a theme restyles the whole screen again (a reparse
    of every stylesheet: 13-15 ms of a launch). Textual's own start-up prepared a dark
    theme's colours (its ANSI filter, ``-dark-mode``); a light or unknown one is left
    to :func:`choose_theme`."""
    wanted = name or DEFAULT_THEME
    theme = app.get_theme(wanted) if wanted in app.available_themes else None
    if theme is None or not theme.dark or not app.current_theme.dark:
        return
    app.set_reactive(App.theme, wanted)
    app.set_class(True, f"-theme-{wanted}", update=False)  # as Textual's watcher adds
    # The stylesheet took its variables from Textual's default theme when it was made.
    app.stylesheet.set_variables(app.get_css_variables())


def choose_theme(app: App[Any], name: str | None) -> str | None:
    """Switch ``app`` to the theme ``name`` (the default when None); if there is no
    such theme, to the default (or Textual's own dark theme), and say so."""
    wanted = name or DEFAULT_THEME
    available = app.available_themes
    if wanted in available:
        app.theme = wanted
        return None
    fallback = DEFAULT_THEME if DEFAULT_THEME in available else FALLBACK_THEME
    app.theme = fallback
    return f"unknown theme {wanted!r}; using {fallback} (themes: {', '.join(sorted(available))})"


def variable_defaults(app: App[Any]) -> dict[str, str]:
    """For an app's ``get_theme_variable_defaults``: the app variables for its current
    theme, so even a theme registered behind :func:`register_themes`' back parses
    (:data:`THEME_VARIABLE_DEFAULTS` when there is no theme to derive them from)."""
    theme = app.get_theme(app.theme) or app.get_theme(FALLBACK_THEME)
    if theme is None:
        return dict(THEME_VARIABLE_DEFAULTS)
    return {**THEME_VARIABLE_DEFAULTS, **app_variables(theme)}
