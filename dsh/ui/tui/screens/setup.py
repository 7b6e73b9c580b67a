"""The first-run screen: pick a provider, give it a key, check that it answers.

Shown instead of the transcript when no key is configured for the provider. Saving
writes the user's settings and (for a pasted key) the 0600 credential file through
:mod:`dsh.setup`, then dismisses with the choice so the app can start.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Input, Label, RadioButton, RadioSet, Static

from dsh.credentials import CredentialStore, Secret
from dsh.setup import (
    CUSTOM_KEY,
    DEEPSEEK_KEY,
    DEEPSEEK_MODELS,
    SetupChoice,
    SetupError,
    check_connection,
    save_setup,
)

INTRO = (
    "Welcome to dsh. No API key is configured yet. Choose where your model runs, "
    "give dsh a key (stored in a file only you can read) or the name of the "
    "environment variable that holds one, and test the connection."
)


class SetupScreen(Screen["SetupChoice | None"]):
    DEFAULT_CSS = """
    SetupScreen { align: center middle; }
    SetupScreen > VerticalScroll { width: 84; max-width: 100%; height: auto;
        max-height: 100%; border: round $primary; padding: 1 2; }
    SetupScreen Label { margin-top: 0; }
    SetupScreen #intro { margin-bottom: 1; }
    SetupScreen #result { margin-top: 1; height: auto; }
    SetupScreen .compat-only { display: none; }
    SetupScreen.compat .compat-only { display: block; }
    SetupScreen Horizontal { height: auto; margin-top: 1; }
    SetupScreen Button { margin-right: 2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "quit_setup", "Quit")]
    AUTO_FOCUS = "#kind"  # the first choice, not nothing (two Tabs away)

    def __init__(self, home: Path, credentials: CredentialStore) -> None:
        super().__init__()
        self.home = home
        self.credentials = credentials

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(INTRO, id="intro")
            with RadioSet(id="kind"):
                yield RadioButton("DeepSeek", value=True, id="deepseek")
                yield RadioButton("Any OpenAI-compatible endpoint", id="openai-compat")
            yield Label("Base URL", classes="compat-only")
            yield Input(
                placeholder="http://127.0.0.1:11434/v1", id="base-url", classes="compat-only"
            )
            yield Label("Provider name", classes="compat-only")
            yield Input(value="custom", id="name", classes="compat-only")
            yield Label("Model")
            yield Input(value=DEEPSEEK_MODELS[0], id="model")
            yield Label("API key (paste it), or leave empty and name a variable below")
            yield Input(password=True, id="key")
            yield Label("Environment variable holding the key (optional)")
            yield Input(placeholder="DEEPSEEK_API_KEY", id="key-env")
            yield Static("", id="result")
            with Horizontal():
                yield Button("Test connection", id="test")
                yield Button("Save and start", id="save", variant="primary")
                yield Button("Quit", id="quit")

    def choice(self) -> SetupChoice:
        key = self.query_one("#key", Input).value.strip()
        return SetupChoice(
            kind="openai-compat" if self.has_class("compat") else "deepseek",
            model=self.query_one("#model", Input).value.strip(),
            base_url=self.query_one("#base-url", Input).value.strip() or None,
            name=self.query_one("#name", Input).value.strip() or "custom",
            key=Secret(key) if key else None,
            key_env=self.query_one("#key-env", Input).value.strip() or None,
        )

    @on(RadioSet.Changed, "#kind")
    def kind_changed(self, event: RadioSet.Changed) -> None:
        compat = event.pressed.id == "openai-compat"
        self.set_class(compat, "compat")
        # The variable the key is saved as, unless the person names another.
        self.query_one("#key-env", Input).placeholder = CUSTOM_KEY if compat else DEEPSEEK_KEY
        model = self.query_one("#model", Input)
        if not compat and not model.value:
            model.value = DEEPSEEK_MODELS[0]
        elif compat and model.value in DEEPSEEK_MODELS:
            model.value = ""

    def say(self, text: str, *, ok: bool) -> None:
        style = "green" if ok else "red"
        self.query_one("#result", Static).update(f"[{style}]{text}[/]")

    @on(Button.Pressed, "#test")
    def test_pressed(self) -> None:
        self.say("Testing…", ok=True)
        self.run_test(self.choice())

    @work(exclusive=True, group="setup-test")
    async def run_test(self, choice: SetupChoice) -> None:
        problem = await check_connection(choice)
        if problem is None:
            self.say(f"{choice.provider}/{choice.model} answered.", ok=True)
        else:
            self.say(problem, ok=False)

    @on(Button.Pressed, "#save")
    def save_pressed(self) -> None:
        choice = self.choice()
        try:
            path = save_setup(self.home, self.credentials, choice)
        except (SetupError, ValueError) as error:
            self.say(str(error), ok=False)
            return
        self.notify(f"Saved to {path}")
        self.dismiss(choice)

    @on(Button.Pressed, "#quit")
    def action_quit_setup(self) -> None:
        self.dismiss(None)
