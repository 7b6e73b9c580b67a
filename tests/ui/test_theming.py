"""Themes as data: the bundled files, user overrides, validation, and a host app that
uses the app variables in its stylesheet under every theme."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.color import Color
from textual.theme import Theme
from textual.widgets import Static

from dsh.runtime import Runtime
from dsh.ui.tui.app import DshApp, TuiRequest
from dsh.ui.tui.theming import (
    APP_VARIABLES,
    DEFAULT_THEME,
    THEME_VARIABLE_DEFAULTS,
    ThemeError,
    app_variables,
    bundled_themes_folder,
    choose_theme,
    load_theme,
    load_themes,
    register_themes,
    theme_folders,
    theme_from_data,
    variable_defaults,
    with_app_variables,
)
from tests.support.waits import HANG_S
from tests.ui.tui_support import SIZE

BUNDLED = ("dsh-dark", "dsh-high-contrast", "dsh-light")


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def test_the_bundled_themes_load_whole() -> None:
    folder = bundled_themes_folder()
    assert folder is not None
    assert folder.name == "themes"
    themes, errors = load_themes([folder])
    assert errors == []
    assert sorted(theme.name for theme in themes) == list(BUNDLED)
    by_name = {theme.name: theme for theme in themes}
    for theme in themes:
        assert set(APP_VARIABLES) <= set(theme.variables)  # each sets its own
    assert by_name["dsh-light"].dark is False
    assert by_name["dsh-dark"].dark is True
    assert by_name["dsh-high-contrast"].text_alpha == 1.0
    # The fixed fallbacks are dsh-dark's own colours.
    assert {k: by_name["dsh-dark"].variables[k] for k in APP_VARIABLES} == THEME_VARIABLE_DEFAULTS


def test_user_themes_come_after_the_bundled_ones_and_win_by_name(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(home / "themes", "dsh-dark.toml", 'primary = "#FF0000"\n')  # name from the file
    write(home / "themes", "mine.json", json.dumps({"name": "ocean", "primary": "#0077BE"}))
    write(home / "themes", "notes.txt", "not a theme")
    folders = theme_folders(home)
    assert folders == [bundled_themes_folder(), home / "themes"]
    themes, errors = load_themes(folders)
    assert errors == []
    names = [theme.name for theme in themes]
    assert sorted(names) == sorted([*BUNDLED, "ocean"])
    dark = next(theme for theme in themes if theme.name == "dsh-dark")
    assert dark.primary == "#FF0000"
    # Not set by the file: derived from its palette, concrete colours.
    assert dark.variables["diff-added"] == app_variables(dark)["diff-added"]
    assert dark.variables["diff-added"].startswith("#")


def test_missing_folders_are_no_error(tmp_path: Path) -> None:
    assert load_themes([tmp_path / "nowhere"]) == ([], [])


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("bad-colour.toml", 'primary = "zzz"', "primary: 'zzz' is not a colour"),
        ("no-primary.toml", 'secondary = "#123456"', "primary is required"),
        ("unknown.toml", 'primary = "#123456"\nprimray = "#123456"', "unknown keys primray"),
        ("broken.toml", "primary = ", "cannot read it"),
        ("broken.json", "{", "cannot read it"),
        ("list.json", "[1, 2]", "expected a table"),
        ("dark.toml", 'primary = "#123456"\ndark = "yes"', "dark must be true or false"),
        ("spread.toml", 'primary = "#123456"\nluminosity_spread = 3', "from 0 to 1"),
        ("alpha.toml", 'primary = "#123456"\ntext_alpha = true', "from 0 to 1"),
        ("name.json", '{"name": "", "primary": "#123456"}', "name must be"),
        ("vars.toml", 'primary = "#123456"\nvariables = 3', "variables must be a table"),
        (
            "app-var.toml",
            'primary = "#123456"\n[variables]\ndiff-added = "greenish"',
            "variables.diff-added: 'greenish' is not a colour",
        ),
        (
            "textual-var.toml",
            'primary = "#123456"\n[variables]\nfooter-background = "bold"',
            "variables.footer-background: 'bold' is not a colour",
        ),
        ("empty-var.toml", 'primary = "#123456"\n[variables]\nmuted = ""', "non-empty"),
    ],
)
def test_a_bad_theme_file_is_an_error_string_not_an_exception(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    path = write(tmp_path, name, text)
    write(tmp_path, "good.toml", 'primary = "#123456"')
    themes, errors = load_themes([tmp_path])
    assert [theme.name for theme in themes] == ["good"]
    assert len(errors) == 1
    assert errors[0].startswith(f"theme {path}: ")
    assert problem in errors[0]
    with pytest.raises(ThemeError):
        load_theme(path)


def test_variables_other_than_colours_and_alpha_suffixes_are_kept() -> None:
    theme = theme_from_data(
        {
            "name": "t",
            "primary": "#123456",
            "variables": {
                "muted": "#777777 60%",
                "block-cursor-text-style": "bold",  # not a colour in Textual either
                "my-own": "anything",
            },
        }
    )
    assert theme.variables["muted"] == "#777777 60%"
    assert theme.variables["block-cursor-text-style"] == "bold"
    assert theme.variables["my-own"] == "anything"
    assert set(APP_VARIABLES) <= set(theme.variables)


def test_with_app_variables_keeps_what_a_theme_sets() -> None:
    theme = Theme(name="t", primary="#123456", success="#00AA00", variables={"muted": "#111111"})
    filled = with_app_variables(theme)
    assert filled.variables["muted"] == "#111111"
    assert filled.variables["diff-added"] == app_variables(theme)["diff-added"]
    assert filled.variables["diff-added"].upper() == "#00AA00"
    assert with_app_variables(filled) is filled  # nothing left to fill


class Themed(App[None]):
    """Like the real app: themes registered in ``__init__``, the variable defaults
    from the current theme, and a stylesheet that uses the app variables."""

    CSS = """
    #added { color: $diff-added; background: $diff-removed; }
    #tool { color: $tool-running; border: solid $tool-done; }
    #other { color: $tool-failed; background: $reasoning; }
    #muted { color: $muted; }
    """

    def __init__(self, home: Path) -> None:
        super().__init__()
        self.errors = register_themes(self, home)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return {**super().get_theme_variable_defaults(), **variable_defaults(self)}

    def compose(self) -> ComposeResult:
        for name in ("added", "tool", "other", "muted"):
            yield Static(name, id=name)


def colour_of(app: Themed, selector: str) -> str:
    return app.query_one(selector).styles.color.hex.upper()


async def test_every_theme_gives_the_stylesheet_the_app_variables(tmp_path: Path) -> None:
    write(tmp_path / "themes", "plain.toml", 'primary = "#336699"\ndark = false\n')
    write(tmp_path / "themes", "zzz.toml", 'primary = "zzz"\n')
    app = Themed(tmp_path)
    async with app.run_test(size=(40, 10)) as pilot:
        assert len(app.errors) == 1
        assert "zzz.toml" in app.errors[0]
        assert choose_theme(app, None) is None
        assert app.theme == DEFAULT_THEME
        await pilot.pause()
        assert colour_of(app, "#added") == "#98C379"
        app.theme = "dsh-light"
        await pilot.pause()
        assert colour_of(app, "#added") == "#1A7F37"
        # Every theme: dsh's, the user's and Textual's own parse and style the app.
        for name in sorted(app.available_themes):
            app.theme = name
            await pilot.pause()
            assert app.current_theme.name == name
            assert set(APP_VARIABLES) <= set(app.theme_variables), name
        # A theme registered behind dsh's back still gets the variables by default.
        app.register_theme(Theme(name="bare", primary="#884400", success="#00CC00"))
        app.theme = "bare"
        await pilot.pause()
        assert colour_of(app, "#added") == "#00CC00"


async def test_choose_theme_falls_back_and_says_so(tmp_path: Path) -> None:
    app = Themed(tmp_path)
    async with app.run_test(size=(40, 10)):
        assert app.errors == []
        assert choose_theme(app, "dsh-high-contrast") is None
        assert app.theme == "dsh-high-contrast"
        problem = choose_theme(app, "nope")
        assert problem is not None
        assert problem.startswith("unknown theme 'nope'; using dsh-dark")
        assert "dsh-light" in problem
        assert app.theme == DEFAULT_THEME


async def test_registering_without_the_bundled_themes_reports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dsh.ui.tui.theming as theming

    monkeypatch.setattr(theming, "bundled_themes_folder", lambda: None)
    app = Themed(tmp_path)
    async with app.run_test(size=(40, 10)):
        assert any("dsh-dark was not found" in error for error in app.errors)
        problem = choose_theme(app, None)
        assert problem is not None
        assert "using textual-dark" in problem
        assert app.theme == "textual-dark"
        assert set(APP_VARIABLES) <= set(app.theme_variables)


def test_variable_defaults_without_any_theme_are_the_fixed_ones() -> None:
    class NoThemes:
        theme = "gone"

        def get_theme(self, name: str) -> Any:
            return None

    assert variable_defaults(NoThemes()) == THEME_VARIABLE_DEFAULTS  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("wanted", "restyles"),
    [
        (None, 0),  # the default, dark: styled once, with its own variables
        ("dsh-high-contrast", 0),
        ("dsh-light", 1),  # Textual started dark: a light theme restyles the screen
    ],
)
async def test_the_app_comes_up_in_its_theme_styled_once_when_it_can(
    runtime: Runtime, tmp_path: Path, wanted: str | None, restyles: int
) -> None:
    app = DshApp(TuiRequest(cwd=tmp_path, home=tmp_path / "home", theme=wanted), runtime=runtime)
    restyled: list[bool] = []
    restyle = app.refresh_css

    def counted(animate: bool = True) -> None:
        restyled.append(animate)
        restyle(animate)

    app.refresh_css = counted  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.wait_for(app.ready.wait(), HANG_S)
        await pilot.pause()
        name = wanted or DEFAULT_THEME
        theme = app.get_theme(name)
        assert theme is not None
        assert app.theme == name
        assert app.has_class(f"-theme-{name}")
        assert app.has_class("-dark-mode") is theme.dark
        assert app.has_class("-light-mode") is not theme.dark
        assert app.screen.styles.background == Color.parse(theme.background or "")
        assert app.get_css_variables()["primary"] == Color.parse(theme.primary).hex
        assert len(restyled) == restyles
        await app.shutdown()
