"""The question dialog: the model asks, the person picks or writes.

One page per question: its header and text, the options (each with its description)
and an "Other…" input for an answer in the person's own words.

- Single select: Enter (or a click) picks the highlighted option. Typing in the
  input and pressing Enter answers with that text instead (no option selected).
- Multi-select: Space (or a click) toggles an option, Enter confirms the toggled
  ones (the highlighted one when none is toggled); text in the input is added as
  the custom answer.
- Tab moves between the options and the input; Esc dismisses all the questions
  (the model is told the person did not answer).

Like the approval dialog it takes no answer from keys typed for the prompt as it
opens, and takes a key pressed once it is there (see :mod:`.guard`).

Public API: ``QuestionScreen(questions, *, guard_seconds=GUARD_SECONDS)``, a
``ModalScreen[list[Answer] | None]`` (one :class:`~dsh.tools.questions.Answer` per
question, in order; None when dismissed); ``Choices``, its option list.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from dsh.control_chars import visible
from dsh.tools.questions import Answer, Question
from dsh.ui.tui.screens.guard import GUARD_SECONDS, KeyGuard

UNCHECKED, CHECKED = "☐ ", "☑ "


class Choices(OptionList):
    """The options of one question. Enter confirms (a message to the dialog), Space
    toggles in a multi-select question; a click arrives as ``OptionSelected``."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "confirm", "Confirm", show=False),
        Binding("space", "toggle_option", "Toggle", show=False),
    ]

    class Confirmed(Message):
        pass

    class ToggleRequested(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def action_confirm(self) -> None:
        self.post_message(self.Confirmed())

    def action_toggle_option(self) -> None:
        if self.highlighted is not None:
            self.post_message(self.ToggleRequested(self.highlighted))


class QuestionScreen(ModalScreen[list[Answer] | None]):
    DEFAULT_CSS = """
    QuestionScreen { align: center middle; }
    QuestionScreen #dialog {
        width: 90%; max-width: 100; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    QuestionScreen #header { text-style: bold; color: $primary; }
    QuestionScreen #question { margin: 0 0 1 0; }
    QuestionScreen Choices { height: auto; max-height: 60vh; }
    QuestionScreen #other { margin: 1 0 0 0; }
    QuestionScreen #hint { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_all", "Dismiss", show=False),
    ]

    def __init__(
        self, questions: Sequence[Question], *, guard_seconds: float = GUARD_SECONDS
    ) -> None:
        super().__init__()
        if not questions:
            raise ValueError("no questions to ask")
        self.questions = list(questions)
        self.index = 0
        self.answers: list[Answer] = []
        self.toggled: set[int] = set()
        self.guard = KeyGuard(guard_seconds)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(id="header")
            yield Static(id="question")
            yield Choices(id="choices")
            yield Input(placeholder="Other… (your own answer, Enter)", id="other")
            yield Static(id="hint")

    def on_mount(self) -> None:
        self.guard.start(self)
        self._show_page()

    def on_key(self, event: events.Key) -> None:
        self.guard.catch(self, event)  # what was typed for the prompt goes back to it

    @property
    def question(self) -> Question:
        return self.questions[self.index]

    # ------------------------------------------------------------------ pages

    def _show_page(self) -> None:
        question = self.question
        title = Text()
        if len(self.questions) > 1:
            title.append(f"Question {self.index + 1} of {len(self.questions)}")
            if question.header:
                title.append(" · ")
        if question.header:
            title.append(visible(question.header))
        header = self.query_one("#header", Static)
        header.update(title)
        header.display = bool(title)
        self.query_one("#question", Static).update(Text(visible(question.question)))
        self.toggled = set()
        choices = self.query_one(Choices)
        choices.set_options(
            Option(self._prompt(i), id=str(i)) for i in range(len(question.options))
        )
        choices.display = bool(question.options)
        other = self.query_one("#other", Input)
        other.value = ""
        self.query_one("#hint", Static).update(self._hint())
        if question.options:
            choices.highlighted = 0
            choices.focus()
        else:
            other.focus()

    def _prompt(self, index: int) -> Text:
        option = self.question.options[index]
        text = Text()
        if self.question.multi_select:
            text.append(CHECKED if index in self.toggled else UNCHECKED)
        text.append(visible(option.label), style="bold")
        if option.description:
            text.append("\n")
            text.append("    " if self.question.multi_select else "  ")
            text.append(visible(option.description), style="dim")
        return text

    def _hint(self) -> str:
        if not self.question.options:
            return "Enter: answer · Esc: dismiss"
        if self.question.multi_select:
            return "Space: toggle · Enter: confirm · Tab: your own answer · Esc: dismiss"
        return "Enter: pick · Tab: your own answer · Esc: dismiss"

    # ------------------------------------------------------------------ answers

    @on(Choices.ToggleRequested)
    def _toggle_requested(self, event: Choices.ToggleRequested) -> None:
        event.stop()
        self.toggle(event.index)

    def toggle(self, index: int) -> None:
        if not self.guard.open or not self.question.multi_select:
            return
        self.toggled ^= {index}
        self.query_one(Choices).replace_option_prompt_at_index(index, self._prompt(index))

    @on(Choices.Confirmed)
    def _confirmed(self, event: Choices.Confirmed) -> None:
        event.stop()
        highlighted = self.query_one(Choices).highlighted
        if self.question.multi_select:
            picked = self.toggled or ({highlighted} if highlighted is not None else set())
            self._answer(picked, self._custom())
        elif highlighted is not None:
            self._answer({highlighted}, None)

    @on(OptionList.OptionSelected, "#choices")
    def _clicked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if self.question.multi_select:
            self.toggle(event.option_index)
        else:
            self._answer({event.option_index}, None)

    @on(Input.Submitted, "#other")
    def _typed(self, event: Input.Submitted) -> None:
        event.stop()
        custom = self._custom()
        if self.question.multi_select:
            if custom is not None or self.toggled:
                self._answer(self.toggled, custom)
        elif custom is not None:
            self._answer(set(), custom)

    def _custom(self) -> str | None:
        return self.query_one("#other", Input).value.strip() or None

    def _answer(self, picked: set[int], custom: str | None) -> None:
        if not self.guard.open:
            return
        labels = tuple(self.question.options[i].label for i in sorted(picked))
        self.answers.append(Answer(id=self.question.id, selected=labels, custom=custom))
        if len(self.answers) == len(self.questions):
            self.dismiss(self.answers)
        else:
            self.index += 1
            self._show_page()

    def action_dismiss_all(self) -> None:
        if self.guard.open:
            self.dismiss(None)
