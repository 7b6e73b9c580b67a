"""The plan dialog: the model presents its plan in plan mode, the person decides.

Shows the whole plan, rendered as Markdown and scrollable (its text made safe to
show: it is the model's), and the three answers of
:data:`~dsh.tools.plan_review.CHOICES` in their order, one key each: ``1`` approve and
carry it out in accept-edits mode, ``2`` approve and carry it out asking as usual,
``3`` keep planning, which opens a note for the model (Enter sends it back, with the
note or without one; Esc goes back to the choices). Esc on the dialog keeps planning
without a note: nothing runs and nothing is lost. The buttons do the same for the
mouse.

Keys typed for the prompt as the dialog opens do not answer it, and a key pressed
once it is there does (the rule is :mod:`~dsh.ui.tui.screens.guard`'s).

Public API: ``PlanScreen(review, *, guard_seconds=QUIET_SECONDS)``, a
``ModalScreen[PlanDecision]``; ``ANSWER_KEYS``; ``plan_renderable(plan)``.
"""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from rich.markdown import Markdown
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Static
from textual.widgets.button import ButtonVariant

from dsh.control_chars import visible
from dsh.tools.plan_review import CHOICES, PlanDecision, PlanOutcome, PlanReview
from dsh.ui.tui.screens.guard import QUIET_SECONDS, KeyGuard
from dsh.ui.tui.screens.reason import WRITING, ReasonBox

KEYS: dict[PlanOutcome, str] = {outcome: str(n) for n, (outcome, _, _) in enumerate(CHOICES, 1)}
"""The key that gives each answer: its place in :data:`CHOICES`."""
VARIANTS: dict[PlanOutcome, ButtonVariant] = {
    "accept-edits": "success",
    "default": "primary",
    "keep-planning": "default",
}
ANSWER_KEYS = frozenset(
    {
        *KEYS.values(),
        "escape",
        "enter",
        "tab",
        "shift+tab",
        "up",
        "down",
        "pageup",
        "pagedown",
        "home",
        "end",
        "left",
        "right",
    }
)
"""The keys that may answer (or move in) the dialog; any other is typing for the prompt."""
HINT = "1/2/3 answer · Esc keeps planning without a note · ↑↓ PgUp PgDn scroll the plan"
CODE_THEME = "ansi_dark"
"""As the transcript's answers: the terminal's own colours, readable in every theme."""


class PlanScreen(ModalScreen[PlanDecision]):
    DEFAULT_CSS = """
    PlanScreen { align: center middle; }
    PlanScreen #dialog {
        width: 90%; max-width: 120; height: auto; max-height: 95%;
        border: thick $accent; background: $surface; padding: 0 1;
    }
    PlanScreen #title { text-style: bold; }
    PlanScreen #agent { color: $accent; }
    PlanScreen #plan {
        height: auto; max-height: 60vh; margin: 1 0 0 0;
        border: round $panel-lighten-2; background: $background; padding: 0 1;
    }
    PlanScreen #plan:focus { border: round $accent; }
    PlanScreen #buttons { height: auto; margin: 1 0 0 0; }
    PlanScreen #buttons Button { margin: 0 1 0 0; min-width: 10; }
    PlanScreen #meanings { color: $text-muted; }
    PlanScreen.writing #buttons { display: none; }
    PlanScreen.writing #meanings { display: none; }
    PlanScreen #hint { color: $text-muted; }
    PlanScreen.writing #hint { display: none; }
    """
    AUTO_FOCUS = "#plan"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            KEYS["accept-edits"], "decide('accept-edits')", "Approve, accept edits", show=False
        ),
        Binding(KEYS["default"], "decide('default')", "Approve, ask as usual", show=False),
        Binding(KEYS["keep-planning"], "note", "Keep planning", show=False),
        Binding("escape", "escape", "Keep planning", show=False),
    ]

    def __init__(self, review: PlanReview, *, guard_seconds: float = QUIET_SECONDS) -> None:
        super().__init__()
        self.review = review
        self.plan = visible(review.plan)
        """What the dialog shows of the plan: the model's text made safe to show."""
        self.guard = KeyGuard(guard_seconds, ANSWER_KEYS)

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            if self.review.agent_label:
                # A subagent's plan: the person answers for it, not for the main agent.
                asker = visible(self.review.agent_label, one_line=True)
                yield Static(Text.assemble(("subagent: ", "bold"), asker), id="agent")
            yield Static("The plan is ready. Carry it out?", id="title")
            with VerticalScroll(id="plan"):
                yield Static(plan_renderable(self.plan), id="plan-body")
            with Horizontal(id="buttons"):
                for outcome, label, _ in CHOICES:
                    yield Button(
                        Content(f"{KEYS[outcome]} {label}"),
                        id=f"choice-{outcome}",
                        variant=VARIANTS[outcome],
                    )
            meanings = Text()
            for outcome, _, meaning in CHOICES:
                if meanings:
                    meanings.append("\n")
                meanings.append(f"{KEYS[outcome]} ", style="bold")
                meanings.append(meaning)
            yield Static(meanings, id="meanings")
            yield ReasonBox(
                placeholder="What should change? (said to the model; may be left empty)",
                hint="Enter: keep planning with this note · Esc: back",
                input_id="note-input",
            )
            yield Static(HINT, id="hint")

    def on_mount(self) -> None:
        self.guard.start(self)

    def on_key(self, event: events.Key) -> None:
        self.guard.catch(self, event)  # what was typed for the prompt goes back to it

    # ------------------------------------------------------------------ answers

    @property
    def in_note(self) -> bool:
        return self.has_class(WRITING)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # In the note a digit is part of it, not an answer.
        return action not in ("decide", "note") or (self.guard.open and not self.in_note)

    def action_decide(self, outcome: PlanOutcome) -> None:
        self.decide(outcome)

    def decide(self, outcome: PlanOutcome, note: str | None = None) -> None:
        if self.guard.open:
            self.dismiss(PlanDecision(outcome=outcome, note=note))

    def action_note(self) -> None:
        if self.guard.open:
            self.query_one(ReasonBox).open()

    def action_escape(self) -> None:
        if self.in_note:
            self.query_one(ReasonBox).close()
            self.query_one("#plan").focus()
        elif self.guard.open:  # an Esc typed for the prompt (or its menu) answers nothing
            self.decide("keep-planning")

    def on_reason_box_given(self, message: ReasonBox.Given) -> None:
        message.stop()
        self.decide("keep-planning", message.text)

    @on(Button.Pressed)
    def _button(self, event: Button.Pressed) -> None:
        event.stop()
        for outcome, _, _ in CHOICES:
            if event.button.id == f"choice-{outcome}":
                if outcome == "keep-planning":
                    self.action_note()
                else:
                    self.decide(outcome)


def plan_renderable(plan: str) -> RenderableType:
    """The plan as Markdown (the caller has made its text safe to show)."""
    return Markdown(plan, code_theme=CODE_THEME)
