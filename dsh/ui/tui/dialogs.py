"""The dialogs the app waits on: a screen pushed over the transcript, and the value it
is dismissed with. The approvals and questions services call the app's
``ask_approval``, ``ask_questions`` and ``ask_plan``, which land here; so do the session
picker and the first-run setup."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rich.text import Text
from textual.app import App
from textual.screen import Screen

if TYPE_CHECKING:
    from dsh.session import Catalog
    from dsh.settings import Settings
    from dsh.tools.approval import ApprovalDecision, ApprovalRequest
    from dsh.tools.plan_review import PlanDecision, PlanReview
    from dsh.tools.questions import Answer, Question
    from dsh.ui.opening import BusyChoice
    from dsh.ui.rewinding import Preview, RewindChoice, RewindPick, TurnRow

T = TypeVar("T")

PICKER_LIMIT = 200
"""Sessions the picker lists (most recent first); its search reaches them all."""


async def wait_screen(app: App[Any], screen: Screen[Any], default: T) -> Any | T:
    """Push ``screen`` and wait for what it is dismissed with (``default`` for None).
    Cancelled (the turn that asked ended), the screen is taken away."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def done(result: Any) -> None:
        if not future.done():
            future.set_result(result)

    await app.push_screen(screen, callback=done)
    try:
        result = await future
    finally:
        # Not dismissed: taken away. (The wait's cancel cancels the future too, so
        # a cancelled future is one the screen never answered.)
        answered = future.done() and not future.cancelled()
        if not answered and screen is app.screen:
            with contextlib.suppress(Exception):
                app.pop_screen()
    return default if result is None else result


async def ask_approval(
    app: App[Any], request: ApprovalRequest, stop: Callable[[], bool] | None = None
) -> ApprovalDecision:
    """The person's decision on ``request``; a dialog taken away denies. ``stop``: what
    Esc does, stop the running turn (True when one was stopped)."""
    from dsh.tools.approval import ApprovalDecision
    from dsh.ui.tui.screens.approval import ApprovalScreen

    decision: ApprovalDecision = await wait_screen(
        app, ApprovalScreen(request, stop=stop), ApprovalDecision(outcome="deny")
    )
    return decision


async def ask_plan(app: App[Any], review: PlanReview) -> PlanDecision:
    """The person's decision on the plan ``review`` holds. Taken away (the turn was
    cancelled), the review's own wait answers ``cancelled``; this never does."""
    from dsh.tools.plan_review import PlanDecision
    from dsh.ui.tui.screens.plan import PlanScreen

    decision: PlanDecision = await wait_screen(
        app, PlanScreen(review), PlanDecision(outcome="cancelled", note="the dialog closed")
    )
    return decision


async def ask_questions(app: App[Any], questions: Iterable[Question]) -> list[Answer] | None:
    """The person's answers, or None when they dismissed the questions."""
    from dsh.ui.tui.screens.question import QuestionScreen

    answers: list[Answer] | None = await wait_screen(app, QuestionScreen(list(questions)), None)
    return answers


async def pick_session(
    app: App[Any],
    catalog: Catalog | None,
    indexed: Callable[[], Any],
    cwd: str,
    show: Callable[..., None],
) -> str | None:
    """The id of the session the person picks from the catalog (``cwd``'s first), or
    None; ``indexed`` is awaited first, so the latest sessions are listed."""
    from dsh.ui.tui.screens.sessions import SessionPicker, catalog_search

    if catalog is None:
        show("No session catalog to pick from; give /resume an id.", level="error")
        return None
    await indexed()
    entries = await catalog.list(limit=PICKER_LIMIT)
    if not entries:
        show("No sessions yet.", level="info")
        return None
    picked: str | None = await wait_screen(
        app, SessionPicker(entries, cwd, catalog_search(catalog)), None
    )
    return picked


async def choose(
    app: App[Any],
    title: str,
    items: Sequence[str | Text],
    *,
    current: int | None = None,
    hint: str | None = None,
    preview: Callable[[int], None] | None = None,
) -> int | None:
    """The index of the item the person picks, or None (Esc)."""
    from dsh.ui.tui.screens.picker import Picker

    screen = Picker(title, items, current=current, hint=hint, preview=preview)
    picked: int | None = await wait_screen(app, screen, None)
    return picked


async def choose_for_busy(app: App[Any], message: str) -> BusyChoice | None:
    """What to do with a session another dsh writes (``message`` says which and who):
    a :data:`~dsh.ui.opening.BUSY_CHOICES` choice, or None to quit."""
    from dsh.ui.tui.screens.busy import BusyScreen

    choice: BusyChoice | None = await wait_screen(app, BusyScreen(message), None)
    return choice


async def ask_rewind(
    app: App[Any],
    turns: Sequence[TurnRow],
    preview: Preview,
    *,
    turn: TurnRow | None = None,
    choice: RewindChoice | None = None,
) -> RewindPick | None:
    """The turn to rewind to and what to restore, or None (Esc)."""
    from dsh.ui.tui.screens.rewind import RewindScreen

    screen = RewindScreen(turns, preview, turn=turn, choice=choice)
    picked: RewindPick | None = await wait_screen(app, screen, None)
    return picked


async def set_up(
    app: App[Any], home: Path, cwd: Path, settings: Settings, *, plugin_forms: bool
) -> bool | None:
    """First run with no key for the provider: the setup screen (see
    :meth:`dsh.ui.user_interface.Dialogs.set_up` for the answer)."""
    from dsh.credentials import CredentialStore
    from dsh.setup import configured_forms, needs_setup

    credentials = CredentialStore(home, cwd, project_env=settings.trusted)
    forms = configured_forms(settings) if plugin_forms else []
    if not needs_setup(settings, credentials, forms):
        return None
    from dsh.ui.tui.screens.setup import SetupScreen

    return await wait_screen(app, SetupScreen(home, credentials, forms), None) is not None
