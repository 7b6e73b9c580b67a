"""Calling the person back: when an approval, a plan or a question waits for them, or a long
turn ends, while the terminal is not focused, dsh rings the terminal's bell or asks
it for a desktop notification (``[tui] notify``).

Focus is what the terminal says: Textual turns on focus reporting (DEC mode 1004)
and keeps ``App.app_focus`` from the FocusIn/FocusOut reports, setting it again on a
key press or a click. A terminal that never reports focus counts as focused, so it is
never notified: nothing rings at a person who may be looking.

A notification quotes what the model asked for (the command of an approval, the
question), and a terminal obeys whatever follows an ESC or a BEL that ends the
sequence early: a command holding ``ESC ] 52 ; c ; …`` would write the clipboard. So
every text goes through :func:`~dsh.control_chars.visible` as one line (ESC shows as
``␛``, BEL as ``␇``) and is cut to :data:`MESSAGE_LIMIT` characters.

The bytes go through the Textual driver, the way the app writes every frame, so a
notification never lands inside one.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Literal

from dsh.control_chars import visible

if TYPE_CHECKING:
    from textual.app import App

    from dsh.session import SessionEvent
    from dsh.tools.approval import ApprovalRequest
    from dsh.tools.plan_review import PlanReview
    from dsh.tools.questions import Question

Channel = Literal["bell", "osc9", "osc777"]
CHANNELS: tuple[Channel, ...] = ("bell", "osc9", "osc777")
LONG_TURN_S = 30.0
"""A turn that took at least this long says so when it ends."""
MESSAGE_LIMIT = 160
"""Characters of a notification's text; desktop notifications show about that much."""
TITLE = "dsh"

# Terminals whose own documentation or source shows OSC 9 as a desktop notification:
# iTerm2 (its escape-code reference), WezTerm (`notification_handling`), kitty (OSC 9
# as well as its own OSC 99) and Ghostty (`desktop-notifications`).
_OSC9_PROGRAMS = frozenset({"iTerm.app", "WezTerm", "ghostty"})
_OSC9_TERMS = frozenset({"xterm-kitty", "xterm-ghostty"})


def choose_channel(setting: str, env: Mapping[str, str]) -> Channel | None:
    """What ``[tui] notify`` means in the terminal ``env`` describes: None for ``off``.

    ``auto`` is conservative: an OSC sequence only where the terminal is known to turn
    it into a notification, else the bell, which every terminal does something with
    (a sound, a flash, an urgent window, a badge on its tab)."""
    if setting == "off":
        return None
    for channel in CHANNELS:
        if setting == channel:
            return channel
    term, program = env.get("TERM", ""), env.get("TERM_PROGRAM", "")
    # Under tmux (or screen) the terminal outside is unknown (TERM_PROGRAM says tmux,
    # and what leaked in from the outer shell may be stale), and tmux drops an OSC it
    # does not know unless it is wrapped for passthrough *and* allow-passthrough is on
    # (off by default since tmux 3.3): the sequence would vanish. The bell reaches the
    # terminal outside either way: tmux flags the window and rings the client.
    if env.get("TMUX") or env.get("STY") or term.startswith(("screen", "tmux")):
        return "bell"
    if (
        program in _OSC9_PROGRAMS
        or term in _OSC9_TERMS
        or env.get("KITTY_WINDOW_ID")
        or env.get("LC_TERMINAL") == "iTerm2"  # iTerm2 sends it over ssh
    ):
        return "osc9"
    if term.startswith("foot"):  # foot documents OSC 777 ; notify
        return "osc777"
    # VTE (GNOME Terminal, Tilix; VTE_VERSION) shows OSC 777 only with a patch some
    # distributions carry (Fedora's); upstream ignores it, so it gets the bell, as do
    # Windows Terminal (its OSC 9 is ConEmu's progress and directory commands, not a
    # notification), Apple's Terminal, Alacritty, xterm and the rest.
    return "bell"


def message(text: str) -> str:
    """``text`` safe inside an escape sequence: one line, no control character (each
    shown as a picture), blanks collapsed, at most :data:`MESSAGE_LIMIT` characters."""
    line = visible(" ".join(text.split()), one_line=True)
    if len(line) > MESSAGE_LIMIT:
        line = line[: MESSAGE_LIMIT - 1].rstrip() + "…"
    return line


def sequence(channel: Channel, text: str, *, tmux: bool = False) -> str:
    """The bytes that notify through ``channel`` with ``text`` (made safe here too);
    ``tmux`` wraps an OSC for tmux's passthrough."""
    if channel == "bell":
        return "\x07"
    if channel == "osc9":
        # Always "dsh: …": an OSC 9 payload starting with digits and ";" is a ConEmu
        # command (9;4 progress) in the terminals that copied ConEmu's.
        osc = f"\x1b]9;{message(f'{TITLE}: {text}')}\x07"
    else:
        osc = f"\x1b]777;notify;{TITLE};{message(text)}\x07"
    if tmux:
        # DCS tmux; … ST, every ESC inside doubled: tmux hands it to the terminal
        # outside when `allow-passthrough` is on, and drops it otherwise.
        osc = "\x1bPtmux;" + osc.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return osc


def duration(seconds: float) -> str:
    whole = round(seconds)
    if whole < 120:
        return f"{whole} s"
    minutes = whole // 60
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


class Attention:
    """Owned by the app: told when a dialog waits and about each session event, it
    notifies through the channel ``setting`` chooses, only while the terminal is not
    focused, once per waiting dialog."""

    def __init__(
        self,
        app: App[Any],
        setting: str = "auto",
        *,
        env: Mapping[str, str] | None = None,
        long_turn: float = LONG_TURN_S,
    ) -> None:
        environment = os.environ if env is None else env
        self.app = app
        self.channel = choose_channel(setting, environment)
        self.tmux = bool(environment.get("TMUX"))
        self.long_turn = long_turn
        """Seconds a turn must take for its end to notify."""
        self._waiting: dict[Hashable, int] = {}
        """Each dialog waiting, by key: how many times it is entered."""
        self._notified: set[Hashable] = set()
        self._started: dict[int, int] = {}
        """Turn number → when its ``turn/start`` was logged (epoch ms)."""

    def notify(self, text: str) -> bool:
        """Notify with ``text`` unless the terminal is focused or notifying is off;
        whether it did."""
        # Textual 8 has no public way to write to the terminal (App.bell rings only,
        # and not under a headless driver); its own clipboard and bell use _driver.
        driver = self.app._driver
        if self.channel is None or self.app.app_focus or driver is None:
            return False
        try:
            driver.write(sequence(self.channel, text, tmux=self.tmux))
        except Exception:  # a driver already out of application mode (the app ending)
            return False
        return True

    @contextmanager
    def waiting(self, key: Hashable, text: str) -> Iterator[None]:
        """Around a dialog that waits for the person: notified once for ``key``, however
        often this is entered for it while it waits."""
        entered = self._waiting.get(key, 0)
        self._waiting[key] = entered + 1
        if key not in self._notified and self.notify(text):
            self._notified.add(key)
        try:
            yield
        finally:
            if entered:
                self._waiting[key] = entered
            else:  # it waits no more: a later dialog with this key is a new one
                del self._waiting[key]
                self._notified.discard(key)

    def approval(self, request: ApprovalRequest) -> AbstractContextManager[None]:
        """:meth:`waiting` for an approval dialog."""
        what = f"{request.tool_name}: {request.summary}" if request.summary else request.tool_name
        if request.agent_label:
            what = f"subagent {request.agent_label}, {what}"
        return self.waiting(("approval", request.id), f"approval needed — {what}")

    def plan(self, review: PlanReview) -> AbstractContextManager[None]:
        """:meth:`waiting` for the plan dialog."""
        what = f"subagent {review.agent_label}'s plan" if review.agent_label else "a plan"
        return self.waiting(("plan", review.id), f"{what} waits for your approval")

    def question(self, questions: Sequence[Question]) -> AbstractContextManager[None]:
        """:meth:`waiting` for a question dialog."""
        first = questions[0].question if questions else ""
        text = f"a question is waiting — {first}" if first else "a question is waiting"
        return self.waiting(("question", id(questions)), text)

    def on_event(self, event: SessionEvent) -> None:
        """A session event: a turn that took :attr:`long_turn` seconds or more says so
        when it ends. Times are the log's own, so a resumed session's old turns,
        never seen starting, say nothing."""
        data = event.data
        turn = getattr(data, "turn", None)
        if not isinstance(turn, int):
            return
        if event.type == "turn/start":
            self._started[turn] = event.time
        elif event.type == "turn/end":
            started = self._started.pop(turn, None)
            if started is None:
                return
            seconds = (event.time - started) / 1000
            if seconds < self.long_turn:
                return
            kind = getattr(getattr(data, "reason", None), "kind", "")
            said = "turn finished" if kind == "completed" else f"turn ended: {kind}"
            self.notify(f"{said} ({duration(seconds)})")
