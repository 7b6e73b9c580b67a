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
from typing import Literal, Protocol

from dsh.control_chars import visible

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
