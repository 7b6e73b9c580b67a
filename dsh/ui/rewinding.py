"""``/rewind``: go back to before a turn, in the code, the conversation or both.

What every front end shows is built here from small views (:class:`TurnRow`, a turn
to pick; :class:`CodePreview`, what restoring the code would do), so the TUI's
picker screen, plain mode's numbered lists, ``dsh -p`` and ``dsh acp`` say the same.
A front end that has a richer way to ask than :meth:`~dsh.commands.CommandHost.choose`
(the TUI's :class:`~dsh.ui.tui.screens.rewind.RewindScreen`) provides a
:class:`RewindAsker`; the others get :class:`ChoosingAsker`, two numbered lists.

Nobody to ask (``dsh -p``, a script, an editor): the command line is the
confirmation. ``/rewind N`` restores code and conversation unless ``--code`` or
``--conversation`` says which; ``/rewind`` alone names no turn, and is refused with
the turns to choose from.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from dsh.control_chars import visible

if TYPE_CHECKING:
    from dsh.checkpoints import RestorePlan
    from dsh.commands import CommandContext, CommandView
    from dsh.llm import UserMessage

RewindChoice = Literal["both", "conversation", "code"]
"""What a rewind restores: code and conversation, the conversation only, the code only."""

CHOICES: tuple[tuple[RewindChoice | None, str], ...] = (
    ("both", "Restore code and conversation"),
    ("conversation", "Restore conversation only"),
    ("code", "Restore code only"),
    (None, "Cancel"),
)
"""The choices offered once a turn is picked, in order (None: cancel)."""

FLAGS: dict[str, RewindChoice] = {
    "--both": "both",
    "--code": "code",
    "--conversation": "conversation",
}

NOT_COVERED = (
    "No checkpoint can undo what happened outside the project's files: files outside "
    "the project, files its .gitignore ignores, network calls, database writes, or "
    "anything else a command changed elsewhere."
)
"""Said in every dialog that restores code, before it does."""

FILES_SHOWN = 3
"""Files named on a turn's row; the rest are counted."""
PREVIEW_FILES = 12
"""Files listed in a preview; the rest are counted."""


@dataclass(frozen=True)
class TurnRow:
    """A turn the person may rewind to (the state just before it)."""

    turn: int
    prompt: str
    """The turn's prompt as typed (all of it: the front end shows its first line)."""
    time: int
    """When it started, epoch milliseconds."""
    files: tuple[str, ...] = ()
    """Files the turn changed, as its turn-end checkpoint says (at most a few hundred)."""
    files_total: int = 0
    """How many files it changed in all (``files`` may hold fewer)."""

    @property
    def first_line(self) -> str:
        """The prompt's first line with text, made safe to show."""
        for line in self.prompt.splitlines():
            if line.strip():
                return visible(line.strip(), one_line=True)
        return "(no text)"


@dataclass(frozen=True)
class FileRow:
    """One file a code restore would touch, for the diff summary."""

    path: str
    action: Literal["restore", "remove", "recreate", "mode"]
    added: int = 0
    """Lines the restore adds back (0 for a binary file or a mode change)."""
    removed: int = 0


@dataclass(frozen=True)
class CodePreview:
    """What restoring the code to before a turn would do, shown before it is done."""

    files: tuple[FileRow, ...] = ()
    conflicts: tuple[str, ...] = ()
    """Changed by hand since the agent's last known state: left alone."""
    left_out: tuple[str, ...] = ()
    """Files the checkpoints did not cover (too large): not restored."""
    unavailable: str | None = None
    """Why the code cannot be restored at all (no checkpoint before that turn,
    checkpoints off), or None."""

    @property
    def restorable(self) -> bool:
        return self.unavailable is None


@dataclass(frozen=True)
class RewindPick:
    """What the person chose: the turn, and what to restore."""

    turn: int
    choice: RewindChoice


@dataclass(frozen=True)
class RewindResult:
    """What a rewind did, for the person and for ``dsh -p``'s JSON."""

    turn: int
    choice: RewindChoice
    restored: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    prompt: str | None = None
    """The rewound turn's prompt (the conversation was rewound), back for editing."""
    notes: tuple[str, ...] = field(default_factory=tuple)


Preview = Callable[[TurnRow], Awaitable[CodePreview]]
"""Works out what restoring the code to before a turn would do."""


class RewindAsker(Protocol):
    """How a front end asks which turn to rewind to and what to restore."""

    async def ask(
        self,
        turns: Sequence[TurnRow],
        preview: Preview,
        *,
        turn: TurnRow | None = None,
        choice: RewindChoice | None = None,
    ) -> RewindPick | None:
        """The person's pick, or None (they cancelled). ``turn`` and ``choice``: what
        the command line already said (only the rest is asked). The code's preview is
        shown before any choice that restores code. Raises
        :class:`~dsh.commands.CommandError` when nobody can be asked and the command
        line does not say enough."""
        ...

    def put_back(self, prompt: str) -> None:
        """The rewound turn's prompt, back for the person to edit and send again."""
        ...

    def said(self, text: str) -> None:
        """What the rewind did, for the person: shown once the transcript on screen
        shows the rewound conversation."""
        ...


class ChoosingAsker:
    """A :class:`RewindAsker` of numbered lists (``choose``) and lines (``show``):
    plain mode's, and the one where nobody can be asked (``attended`` False)."""

    def __init__(
        self,
        choose: Callable[[str, Sequence[str]], Awaitable[int | None]],
        show: Callable[[str], None],
        *,
        attended: Callable[[], bool],
    ) -> None:
        self.choose = choose
        self.show = show
        self.attended = attended

    async def ask(
        self,
        turns: Sequence[TurnRow],
        preview: Preview,
        *,
        turn: TurnRow | None = None,
        choice: RewindChoice | None = None,
    ) -> RewindPick | None:
        from dsh.commands import CommandError

        if not self.attended():
            # The command line is the confirmation: it must name the turn.
            if turn is None:
                raise CommandError(f"name the turn to rewind to: /rewind N ({turn_list(turns)})")
            return RewindPick(turn.turn, choice or "both")
        if turn is None:
            now_ms = int(time.time() * 1000)
            items = [turn_label(row, now_ms) for row in reversed(turns)]
            picked = await self.choose("Rewind to before which turn?", items)
            if picked is None:
                return None
            turn = list(reversed(turns))[picked]
        code = await preview(turn)
        self.show("\n".join(preview_lines(turn, code)))
        if choice is not None:
            return RewindPick(turn.turn, choice)
        offered = [
            (c, label) for c, label in CHOICES if c in (None, "conversation") or code.restorable
        ]
        picked = await self.choose("Restore what?", [label for _, label in offered])
        if picked is None or offered[picked][0] is None:
            return None
        chosen = offered[picked][0]
        assert chosen is not None
        return RewindPick(turn.turn, chosen)

    def put_back(self, prompt: str) -> None:
        self.show(f"The prompt of that turn, to send again or change:\n{prompt}")

    def said(self, text: str) -> None:
        self.show(text)


def parse_arguments(args: str) -> tuple[int | None, RewindChoice | None]:
    """``[TURN] [--code|--conversation|--both]`` as (turn, choice). Raises
    :class:`~dsh.commands.CommandError` on anything else."""
    from dsh.commands import CommandError

    turn: int | None = None
    choice: RewindChoice | None = None
    for word in args.split():
        if word in FLAGS:
            if choice is not None and FLAGS[word] != choice:
                raise CommandError("give one of --code, --conversation, --both")
            choice = FLAGS[word]
        elif word.isdigit() and turn is None and int(word) > 0:
            turn = int(word)
        else:
            raise CommandError(
                f"/rewind takes a turn number and one of --code, --conversation, --both; "
                f"not {visible(word, one_line=True)!r}"
            )
    return turn, choice


def clock(time_ms: int, now_ms: int) -> str:
    """When a turn started: the time of day today, else the date too."""
    then = time.localtime(time_ms / 1000)
    today = time.localtime(now_ms / 1000)
    if then[:3] == today[:3]:
        return time.strftime("%H:%M", then)
    if then.tm_year == today.tm_year:
        return time.strftime("%b %d %H:%M", then)
    return time.strftime("%Y-%m-%d %H:%M", then)


def files_touched(row: TurnRow, shown: int = FILES_SHOWN) -> str:
    """``a.py, b.py +3 more``, or ``no files changed``."""
    total = max(row.files_total, len(row.files))
    if total == 0:
        return "no files changed"
    named = ", ".join(visible(path, one_line=True) for path in row.files[:shown])
    more = total - min(shown, len(row.files))
    return f"{named} +{more} more" if more > 0 else named


def turn_label(row: TurnRow, now_ms: int) -> str:
    """One line for a list of turns: number, time, prompt, files."""
    return f"turn {row.turn} · {clock(row.time, now_ms)} · {row.first_line} · {files_touched(row)}"


def turn_list(turns: Sequence[TurnRow]) -> str:
    """The turns one may name, briefly: ``turns 1-4`` or ``no turns yet``."""
    if not turns:
        return "no turns yet"
    numbers = [row.turn for row in turns]
    if len(numbers) == 1:
        return f"turn {numbers[0]}"
    return f"turns {numbers[0]}-{numbers[-1]}"


ACTION_WORDS = {
    "restore": "restore",
    "remove": "remove",
    "recreate": "recreate",
    "mode": "mode of",
}


def file_line(row: FileRow) -> str:
    counts = f" (+{row.added} -{row.removed})" if row.added or row.removed else ""
    return f"{ACTION_WORDS[row.action]} {visible(row.path, one_line=True)}{counts}"


def preview_lines(turn: TurnRow, code: CodePreview, limit: int = PREVIEW_FILES) -> list[str]:
    """What rewinding to before ``turn`` would do, as lines: the files the code's
    restore would touch, the conflicts it leaves alone, what it cannot cover."""
    lines = [f"Rewind to before turn {turn.turn}: {turn.first_line}"]
    if not code.restorable:
        lines.append(f"Code: cannot be restored: {code.unavailable}")
    elif not code.files:
        lines.append("Code: no file would change.")
    else:
        count = len(code.files)
        lines.append(f"Code: {count} file{'' if count == 1 else 's'} would change:")
        lines.extend(f"  {file_line(row)}" for row in code.files[:limit])
        if count > limit:
            lines.append(f"  … and {count - limit} more")
    if code.conflicts:
        lines.append("Changed by hand since, left alone (conflicts):")
        lines.extend(f"  {visible(path, one_line=True)}" for path in code.conflicts[:limit])
        if len(code.conflicts) > limit:
            lines.append(f"  … and {len(code.conflicts) - limit} more")
    if code.left_out:
        shown = ", ".join(visible(path, one_line=True) for path in code.left_out[:limit])
        lines.append(f"Not in the checkpoints (too large), not restored: {shown}")
    lines.append(NOT_COVERED)
    return lines


# ---------------------------------------------------------------------- the command


def register_rewind(commands: CommandView, asker: Callable[[], RewindAsker]) -> None:
    """``/rewind`` in ``commands`` (a front end's view of the commands service);
    ``asker`` gives the front end's way of asking, when the command runs."""
    from dsh.commands import Command

    async def rewind(context: CommandContext, args: str) -> None:
        await run_rewind(context, args, asker())

    commands.register(
        "rewind",
        Command(
            "rewind",
            "go back to before a turn: its code, its conversation or both",
            rewind,
            "[turn] [--code|--conversation|--both]",
        ),
    )


async def run_rewind(context: CommandContext, args: str, asker: RewindAsker) -> RewindResult | None:
    """``/rewind [TURN] [--code|--conversation|--both]``: the turn picked (or named),
    what to restore chosen after the code's summary is shown, then done: the code
    first (a restore that is itself recorded and resumable), then the conversation
    (``history/rewound`` naming that restore), so a rewind stopped halfway leaves the
    conversation as it was. Returns what it did, or None when the person cancelled.
    Raises :class:`~dsh.commands.CommandError` with what went wrong; nothing is
    changed then."""
    from dsh.agent_handle import RewindError
    from dsh.checkpoints import CheckpointError
    from dsh.checkpoints.commands import undone_note
    from dsh.checkpoints.service import CHECKPOINTS
    from dsh.commands import CommandError
    from dsh.session.turns import TurnNotFoundError, find_turn, turns

    agent = context.agent
    number, choice = parse_arguments(args)
    if agent.status != "idle":
        raise CommandError("a turn is running: stop it (Esc) or let it end, then rewind")
    infos = turns(agent.session)
    shown = [info for info in infos if not info.shadowed and info.end_seq is not None]
    if not shown:
        raise CommandError("nothing to rewind: this session has no finished turn yet")
    checkpoints = agent.ctx.get(CHECKPOINTS, None)
    history = checkpoints.history(agent.session) if checkpoints is not None else None
    rows: list[TurnRow] = []
    for info in shown:
        taken = history.turn(info.turn) if history is not None else None
        rows.append(
            TurnRow(
                turn=info.turn,
                prompt=info.prompt,
                time=info.time,
                files=tuple(change.path for change in taken.changes) if taken else (),
                files_total=taken.changes_total if taken is not None else 0,
            )
        )
    given: TurnRow | None = None
    if number is not None:
        try:
            found = find_turn(infos, number, visible=True)
        except TurnNotFoundError as error:
            raise CommandError(str(error)) from None
        given = next((row for row in rows if row.turn == found.turn), None)
        if given is None:
            raise CommandError(f"turn {number} has not ended yet")

    plans: dict[int, RestorePlan | None] = {}
    unavailable: dict[int, str] = {}

    async def preview(row: TurnRow) -> CodePreview:
        if checkpoints is None:
            return CodePreview(unavailable="checkpoints are off ([checkpoints] enabled = false)")
        try:
            plan = plans[row.turn] = await checkpoints.plan_rewind(agent, row.turn)
        except CheckpointError as error:
            unavailable[row.turn] = str(error)
            return CodePreview(unavailable=str(error))
        unavailable.pop(row.turn, None)
        return code_preview(plan)

    pick = await asker.ask(rows, preview, turn=given, choice=choice)
    if pick is None:
        context.host.show("Nothing was rewound.")
        return None
    restored: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    restore_id: str | None = None
    undone: UserMessage | None = None
    notes: list[str] = []
    if pick.choice in ("both", "code"):
        if pick.turn not in plans and pick.turn not in unavailable:
            await preview(next(row for row in rows if row.turn == pick.turn))
        if pick.turn in unavailable or checkpoints is None:
            why = unavailable.get(pick.turn, "checkpoints are off")
            raise CommandError(f"the code cannot be restored: {why}; nothing was rewound")
        plan = plans.get(pick.turn)
        if plan is not None:
            conflicts = plan.conflicts
        if plan is not None and not plan.empty():
            try:
                outcome = await checkpoints.restore(agent, plan, conversation=pick.choice == "both")
            except CheckpointError as error:
                raise CommandError(f"the code was not restored: {error}") from None
            restored, conflicts, restore_id = outcome.applied, outcome.conflicts, outcome.restore_id
            undone = undone_note(plan, outcome)
        elif pick.choice == "code":
            notes.append("No file needed restoring.")
    prompt: str | None = None
    if pick.choice in ("both", "conversation"):
        try:
            prompt = agent.rewind(pick.turn, restore_id=restore_id).text()
        except RewindError as error:
            done = " (the code was restored)" if restore_id is not None else ""
            raise CommandError(f"the conversation was not rewound{done}: {error}") from None
    elif undone is not None:
        # The conversation stays: the model must know its files went back, as after /undo.
        agent.inject(undone)
    result = RewindResult(pick.turn, pick.choice, restored, conflicts, prompt, tuple(notes))
    asker.said("\n".join(result_lines(result)))
    if prompt:
        asker.put_back(prompt)
    return result


def code_preview(plan: RestorePlan | None) -> CodePreview:
    """The views of a restore plan (None: no turn from there changed a file)."""
    if plan is None:
        return CodePreview()
    return CodePreview(
        files=tuple(
            FileRow(row.path, row.action, row.added_lines, row.removed_lines)
            for row in plan.summary
        ),
        conflicts=plan.conflicts,
        left_out=plan.left_out,
    )


def result_lines(result: RewindResult) -> list[str]:
    """What a rewind did, for the person."""
    what = {
        "both": "code and conversation",
        "conversation": "conversation",
        "code": "code",
    }[result.choice]
    lines = [f"Rewound the {what} to before turn {result.turn}."]
    if result.restored:
        count = len(result.restored)
        lines.append(f"Restored {count} file{'' if count == 1 else 's'}:")
        lines.extend(f"  {visible(path, one_line=True)}" for path in result.restored)
    elif result.choice != "conversation":
        lines.append("No file was changed.")
    if result.conflicts:
        lines.append("Changed by hand since, left alone (conflicts):")
        lines.extend(f"  {visible(path, one_line=True)}" for path in result.conflicts)
    lines.extend(result.notes)
    return lines
