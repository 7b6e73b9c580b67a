"""The first-run screen: pick a provider, give it a key, check that it answers.

Shown instead of the transcript when no key is configured for the provider. The
providers and what each asks are the provider plugins' forms (:mod:`dsh.setup`). Saving
writes the user's settings and (for a pasted key) the 0600 credential file through
:mod:`dsh.setup`, then dismisses with the choice so the app can start.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    ProviderSetup,
    SetupAnswer,
    SetupChoice,
    SetupError,
    check_connection,
    save_setup,
    setup_forms,
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
    SetupScreen Horizontal { height: auto; margin-top: 1; }
    SetupScreen Button { margin-right: 2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "quit_setup", "Quit")]
    # The first choice is focused in on_mount: AUTO_FOCUS would scroll it to the
    # middle, past the welcome, when the screen is taller than the terminal.
    AUTO_FOCUS = ""

    def __init__(
        self,
        home: Path,
        credentials: CredentialStore,
        forms: Sequence[ProviderSetup] | None = None,
    ) -> None:
        super().__init__()
        self.home = home
        self.credentials = credentials
        self.forms = list(setup_forms() if forms is None else forms)
        """The provider plugins' forms, as they declare them; the first is chosen."""
        self.form: ProviderSetup | None = self.forms[0] if self.forms else None
        self.fields: dict[SetupAnswer, tuple[Label, Input]] = {}

    def compose(self) -> ComposeResult:
        form = self.form
        with VerticalScroll():
            yield Static(INTRO if form else "No provider plugin offers a setup.", id="intro")
            with RadioSet(id="kind"):
                for index, each in enumerate(self.forms):
                    yield RadioButton(each.label, value=index == 0, id=each.id)
            for field in (field for each in self.forms for field in each.fields):
                if field.answer in self.fields:
                    continue
                label = Label(field.label)
                entry = Input(
                    value=field.default, placeholder=field.placeholder, id=_widget_id(field.answer)
                )
                self.fields[field.answer] = (label, entry)
                yield label
                yield entry
            yield Label("Model")
            yield Input(value=form.models[0] if form and form.models else "", id="model")
            yield Label("API key (paste it), or leave empty and name a variable below")
            yield Input(password=True, id="key")
            yield Label("Environment variable holding the key (optional)")
            yield Input(placeholder=form.key_env if form else "", id="key-env")
            yield Static("", id="result")
            with Horizontal():
                yield Button("Test connection", id="test")
                yield Button("Save and start", id="save", variant="primary")
                yield Button("Quit", id="quit")

    def on_mount(self) -> None:
        if self.form is not None:
            self._show_fields(self.form)
        # The first choice, not nothing (two Tabs away), seen from the top.
        self.set_focus(self.query_one("#kind"), scroll_visible=False)

    @on(Input.Submitted)
    def field_submitted(self, event: Input.Submitted) -> None:
        """Enter goes on: from the key, or the variable naming it (the last things to
        give), it saves and starts as the button does; from another field, to the
        next one."""
        event.stop()
        if event.input.id in ("key", "key-env"):
            self.save_pressed()
        else:
            self.focus_next()

    def _show_fields(self, form: ProviderSetup) -> None:
        """Only the fields ``form`` asks for, labelled as it labels them."""
        asked = {field.answer: field for field in form.fields}
        for answer, (label, entry) in self.fields.items():
            field = asked.get(answer)
            label.display = entry.display = field is not None
            if field is not None:
                label.update(field.label)
                entry.placeholder = field.placeholder

    def choice(self) -> SetupChoice:
        form = self.form
        answers = {
            answer: self.fields[answer][1].value.strip()
            for answer in (form.answers() if form else ())
        }
        key = self.query_one("#key", Input).value.strip()
        return SetupChoice(
            kind=form.id if form else "",
            model=self.query_one("#model", Input).value.strip(),
            base_url=answers.get("base_url") or None,
            name=answers.get("name") or "custom",
            key=Secret(key) if key else None,
            key_env=self.query_one("#key-env", Input).value.strip() or None,
        )

    @on(RadioSet.Changed, "#kind")
    def kind_changed(self, event: RadioSet.Changed) -> None:
        form = next((each for each in self.forms if each.id == event.pressed.id), None)
        if form is None:
            return
        self.form = form
        self._show_fields(form)
        # The variable the key is saved as, unless the person names another.
        self.query_one("#key-env", Input).placeholder = form.key_env
        # Another provider's model suggestion makes no sense here: this one's instead.
        model = self.query_one("#model", Input)
        suggested = {name for each in self.forms for name in each.models}
        if not model.value or (model.value in suggested and model.value not in form.models):
            model.value = form.models[0] if form.models else ""

    def say(self, text: str, *, ok: bool) -> None:
        style = "green" if ok else "red"
        self.query_one("#result", Static).update(f"[{style}]{text}[/]")

    @on(Button.Pressed, "#test")
    def test_pressed(self) -> None:
        self.say("Testing…", ok=True)
        self.run_test(self.choice())

    @work(exclusive=True, group="setup-test")
    async def run_test(self, choice: SetupChoice) -> None:
        problem = await check_connection(choice, forms=self.forms)
        if problem is None:
            provider = self.form.provider(choice) if self.form else choice.kind
            self.say(f"{provider}/{choice.model} answered.", ok=True)
        else:
            self.say(problem, ok=False)

    @on(Button.Pressed, "#save")
    def save_pressed(self) -> None:
        choice = self.choice()
        try:
            path = save_setup(self.home, self.credentials, choice, self.forms)
        except (SetupError, ValueError) as error:
            self.say(str(error), ok=False)
            return
        self.notify(f"Saved to {path}")
        self.dismiss(choice)

    @on(Button.Pressed, "#quit")
    def action_quit_setup(self) -> None:
        self.dismiss(None)


def _widget_id(answer: SetupAnswer) -> str:
    return answer.replace("_", "-")
