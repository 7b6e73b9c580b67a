"""The approval dialog: may this tool call run?

Shows what the approvals service asks about (the subagent that asks, if one does; tool,
risk, summary, why it asks) and
the details: a command highlighted as shell code, a unified diff coloured with the
theme's ``$diff-added``/``$diff-removed``, scrollable when long. One key per answer:
``y`` allow once, ``a`` allow for this session (only when the service offers a
rule), ``n`` deny this call (the turn goes on, the model told it was denied), ``f``
deny with feedback (an input on the same dialog; Enter sends it, Esc goes back), Esc
stop the turn (as Esc does at the prompt: ``stop`` is called; a dialog given none
denies). The buttons do the same for the mouse.

Keys typed for the prompt as the dialog opens do not answer it, and a key pressed
once it is there does (the rule is :mod:`~dsh.ui.tui.screens.guard`'s).

Public API: ``ApprovalScreen(request, *, guard_seconds=QUIET_SECONDS, stop=None)``, a
``ModalScreen[ApprovalDecision]`` (``allow_session`` comes with ``rule=None``: the
service grants the rule it offered); ``details_renderable(request, *, added, removed,
dark)`` (a diff, shell code or text), ``diff_renderable(diff, *, added, removed)``,
``is_diff(details)``, ``rich_colour(value, fallback)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from rich.console import RenderableType
from rich.syntax import Syntax
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.color import Color, ColorParseError
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.theme import Theme
from textual.widgets import Button, Static

from dsh.control_chars import visible
from dsh.tools.approval import ApprovalDecision, ApprovalOutcome, ApprovalRequest
from dsh.ui.render import diff_text, visible_request
from dsh.ui.tui.screens.guard import QUIET_SECONDS, KeyGuard
from dsh.ui.tui.screens.reason import WRITING, ReasonBox

DIFF_MARKERS = ("@@", "+++ ", "--- ", "diff --git ")
ANSWER_KEYS = frozenset(
    {
        "y",
        "a",
        "n",
        "f",
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
STOP_HINT = Text("Esc stops the turn · n denies this call and lets the turn go on", style="dim")
RISK_LABELS = {
    "read": "reads",
    "write": "writes files",
    "exec": "runs a command",
    "network": "uses the network",
    "external": "reaches outside the project",
}


class ApprovalScreen(ModalScreen[ApprovalDecision]):
    DEFAULT_CSS = """
    ApprovalScreen { align: center middle; }
    ApprovalScreen #dialog {
        width: 90%; max-width: 120; height: auto; max-height: 90%;
        border: thick $warning; background: $surface; padding: 0 1;
    }
    ApprovalScreen #title { text-style: bold; }
    ApprovalScreen #reason { color: $text-muted; }
    ApprovalScreen #agent { color: $accent; }
    ApprovalScreen #details {
        height: auto; max-height: 60vh; margin: 1 0 0 0;
        border: round $panel-lighten-2; background: $background;
    }
    ApprovalScreen.writing #buttons { display: none; }
    ApprovalScreen #buttons { height: auto; margin: 1 0 0 0; }
    ApprovalScreen #buttons Button { margin: 0 1 0 0; min-width: 10; }
    ApprovalScreen #grant { margin: 1 0 0 0; }
    ApprovalScreen #stop-hint { color: $text-muted; }
    """
    AUTO_FOCUS = "#details"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "decide('allow_once')", "Allow once", show=False),
        Binding("a", "decide('allow_session')", "Allow for this session", show=False),
        Binding("n", "decide('deny')", "Deny", show=False),
        Binding("f", "feedback", "Deny with feedback", show=False),
        Binding("escape", "escape", "Stop the turn", show=False),
    ]

    def __init__(
        self,
        request: ApprovalRequest,
        *,
        guard_seconds: float = QUIET_SECONDS,
        stop: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__()
        self.stop = stop
        """Esc: stop the turn (False when none runs: then Esc denies)."""
        self.request = request
        self.shown = visible_request(request)
        """What the dialog shows: the request with its texts made safe to show."""
        self.guard = KeyGuard(guard_seconds, ANSWER_KEYS)

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        request, stop = self.shown, self.stop
        with Vertical(id="dialog"):
            if request.agent_label:
                # A subagent's call: the person answers for it, not for the main agent.
                asker = visible(request.agent_label, one_line=True)
                yield Static(Text.assemble(("subagent: ", "bold"), asker), id="agent")
            title = Text.assemble(
                ("? ", "bold"),
                (request.tool_name, "bold"),
                f" {RISK_LABELS.get(request.risk, request.risk)}: ",
                (request.summary, ""),
            )
            yield Static(title, id="title")
            if request.reason:
                yield Static(Text(request.reason), id="reason")
            if request.details:
                with VerticalScroll(id="details"):
                    yield Static(self._details(), id="details-body")
            yield ReasonBox(
                placeholder="Why not? (said to the model)",
                hint="Enter: deny with this reason · Esc: back",
                input_id="feedback-input",
            )
            if request.grant is not None:
                covers = request.grant_covers or request.grant
                grant = Text.assemble(("[a] allows for this session: ", "dim"), covers)
                yield Static(grant, id="grant")
            if stop is not None:
                yield Static(STOP_HINT, id="stop-hint")
            with Horizontal(id="buttons"):
                # Short labels: all four fit a 100-column terminal.
                yield Button(Content("Allow once [y]"), id="allow-once", variant="success")
                if request.grant is not None:
                    label = Content("This session [a]")
                    yield Button(label, id="allow-session", variant="primary")
                yield Button(Content("Deny [n]"), id="deny", variant="error")
                yield Button(Content("Tell why [f]"), id="feedback")

    def on_mount(self) -> None:
        self.guard.start(self)
        self.app.theme_changed_signal.subscribe(self, self._recolour)

    def on_key(self, event: events.Key) -> None:
        self.guard.catch(self, event)  # what was typed for the prompt goes back to it

    def _recolour(self, theme: Theme) -> None:
        if self.request.details:
            self.query_one("#details-body", Static).update(self._details())

    def _details(self) -> RenderableType:
        variables = self.app.theme_variables or self.app.get_css_variables()
        # An app without dsh's themes has no $diff-added: the palette's own colours.
        added = variables.get("diff-added") or variables.get("success")
        removed = variables.get("diff-removed") or variables.get("error")
        return details_renderable(
            self.shown,
            added=rich_colour(added, "green"),
            removed=rich_colour(removed, "red"),
            dark=self.app.current_theme.dark,
        )

    # ------------------------------------------------------------------ answers

    @property
    def in_feedback(self) -> bool:
        return self.has_class(WRITING)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("decide", "feedback"):
            if self.in_feedback or not self.guard.open:
                return False
            if parameters == ("allow_session",) and self.request.grant is None:
                return False
        return True

    def action_decide(self, outcome: ApprovalOutcome) -> None:
        self.decide(outcome)

    def decide(self, outcome: ApprovalOutcome, feedback: str | None = None) -> None:
        if not self.guard.open:
            return
        if outcome == "allow_session" and self.request.grant is None:
            return
        # rule=None: the service grants the rule it offered (request.grant).
        self.dismiss(ApprovalDecision(outcome=outcome, feedback=feedback))

    def action_feedback(self) -> None:
        if self.guard.open:
            self.query_one(ReasonBox).open()

    def action_escape(self) -> None:
        if self.in_feedback:
            self.query_one(ReasonBox).close()
            self._focus_default()
        elif not self.guard.open:
            return  # an Esc typed for the prompt (or for its menu) stops nothing
        elif self.stop is not None and self.stop():
            # The turn's cancel takes the dialog away and answers the call "cancelled".
            self.query_one("#stop-hint", Static).update("stopping the turn…")
        else:
            self.decide("deny")

    def _focus_default(self) -> None:
        details = self.query("#details")
        if details:
            details.first().focus()
        else:
            self.set_focus(None)

    def on_reason_box_given(self, message: ReasonBox.Given) -> None:
        message.stop()
        self.decide("deny", message.text)

    @on(Button.Pressed)
    def _button(self, event: Button.Pressed) -> None:
        event.stop()
        match event.button.id:
            case "allow-once":
                self.decide("allow_once")
            case "allow-session":
                self.decide("allow_session")
            case "deny":
                self.decide("deny")
            case "feedback":
                self.action_feedback()


def is_diff(details: str) -> bool:
    return any(line.startswith(DIFF_MARKERS) for line in details.splitlines())


def details_renderable(
    request: ApprovalRequest, *, added: str = "green", removed: str = "red", dark: bool = True
) -> RenderableType:
    """A diff coloured as one, a command as shell code, anything else as text; its
    control characters made visible."""
    details = visible(request.details or "").rstrip("\n")
    if is_diff(details):
        return diff_renderable(details, added=added, removed=removed)
    if request.risk == "exec":
        return Syntax(
            details,
            "bash",
            theme="ansi_dark" if dark else "ansi_light",
            word_wrap=True,
            background_color="default",
        )
    return Text(details)


def diff_renderable(diff: str, *, added: str, removed: str) -> Text:
    return diff_text(diff.splitlines(), added=added, removed=removed, hunk="bold")


def rich_colour(value: Any, fallback: str) -> str:
    """A stylesheet colour (``"#rrggbb"``, ``"#rrggbbaa"``, ``"#rrggbb 60%"``) as a
    colour rich understands."""
    if not isinstance(value, str):
        return fallback
    text = value.strip()
    colour, _, alpha = text.rpartition(" ")
    if colour and alpha.endswith("%"):
        text = colour
    try:
        return Color.parse(text).rich_color.name
    except (ColorParseError, ValueError):
        return fallback
