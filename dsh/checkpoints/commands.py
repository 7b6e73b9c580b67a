"""``/undo [--dry-run]``: put the files back to before the latest turn that changed
them, after showing what that touches and asking.

What a restore cannot cover is said every time: files outside the project, ignored
files, files left out for their size, and anything a turn did outside the files (a
network call, a database write). Where nobody can be asked (``dsh -p``) the command
line was the confirmation. The model is told what was undone, with a ``user/message``
notice of dsh's own, so its next request knows the files changed back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from dsh.checkpoints.restore import FileSummary, RestoreOutcome, RestorePlan
from dsh.checkpoints.service import CHECKPOINTS
from dsh.checkpoints.store import CheckpointError
from dsh.commands import Command, CommandContext, CommandError
from dsh.control_chars import visible
from dsh.llm import PluginSource, TextBlock, UserMessage

if TYPE_CHECKING:
    from dsh.checkpoints.service import Checkpoints, SessionOwner
    from dsh.session import SessionEvent

__all__ = ["describe_plan", "names", "restore_fork_files", "undo_command", "undone_note"]

NOTE_SOURCE = PluginSource(plugin="dsh", form="notice")
USAGE = "usage: /undo [--dry-run]"
SHOWN = 50
"""Files listed by name in a summary; the rest are counted."""
NOT_COVERED = (
    "Not covered: files outside the project and ignored ones (.gitignore), and what a "
    "turn did outside the files (a network call, a database write, a message sent): "
    "no checkpoint can undo those."
)


def _line(item: FileSummary) -> str:
    if item.action == "mode":
        lines = "permissions"
    elif item.binary:
        lines = "binary"
    else:
        lines = f"+{item.added_lines} -{item.removed_lines}"
    return f"  {item.action:<8} {visible(item.path, one_line=True)}  {lines}"


def names(paths: tuple[str, ...]) -> str:
    shown = ", ".join(visible(p, one_line=True) for p in paths[:SHOWN])
    more = len(paths) - SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def describe_plan(plan: RestorePlan) -> str:
    """The summary shown before a restore: each file, conflicts, what is not covered."""
    count = len(plan.summary)
    lines = [
        f"Restoring the files to before turn {plan.turn}: {count} file{'' if count == 1 else 's'}."
        if count
        else f"Nothing to restore to before turn {plan.turn}."
    ]
    lines.extend(_line(item) for item in plan.summary[:SHOWN])
    if count > SHOWN:
        lines.append(f"  and {count - SHOWN} more")
    if plan.conflicts:
        lines.append("Conflicts, changed by hand since and left alone: " + names(plan.conflicts))
    if plan.kept:
        lines.append("Changed by hand, not touched: " + names(plan.kept))
    if plan.left_out:
        lines.append(
            "Left out of the checkpoints (too large), not restored: " + names(plan.left_out)
        )
    lines.append(NOT_COVERED)
    return "\n".join(lines)


def undone_note(plan: RestorePlan, outcome: RestoreOutcome) -> UserMessage:
    """What the model is told after a restore."""
    if plan.purpose == "fork":
        what = (
            f"forked this session at turn {plan.turn - 1} and put the files back as that "
            "turn left them"
        )
    elif plan.purpose == "undo":
        what = (
            f"undid turn {plan.turn}'s changes to the files: the workspace is back as it "
            "was before that turn"
        )
    else:
        what = (
            f"rewound the files to before turn {plan.turn}: the workspace is back as it "
            "was before that turn"
        )
    parts = [f"[The user {what}, so files may differ from what you last saw."]
    if outcome.applied:
        parts.append(f"Restored: {names(outcome.applied)}.")
    if outcome.conflicts:
        parts.append(f"Left as they are (changed by hand since): {names(outcome.conflicts)}.")
    return UserMessage(content=(TextBlock(text=" ".join(parts) + "]"),), source=NOTE_SOURCE)


async def undo(context: CommandContext, args: str) -> None:
    words = args.split()
    if words not in ([], ["--dry-run"]):
        raise CommandError(USAGE)
    dry_run = bool(words)
    agent = context.agent
    checkpoints = context.root.get(CHECKPOINTS, None)
    if checkpoints is None:
        raise CommandError("checkpoints are not available in this dsh")
    if agent.status != "idle":
        raise CommandError("a turn is running: wait for its end (or stop it) before /undo")
    try:
        plan = await checkpoints.plan_undo(agent)
    except CheckpointError as error:
        raise CommandError(f"cannot undo: {error}") from None
    if plan is None:
        off = "" if checkpoints.table.enabled else " (checkpoints are off: [checkpoints] enabled)"
        raise CommandError(f"nothing to undo: no turn of this session changed files{off}")
    host = context.host
    host.show(describe_plan(plan))
    if dry_run:
        host.show("Dry run: nothing was restored.")
        return
    if plan.empty():
        host.show("Nothing was restored.")
        return
    picked = await host.choose("Restore these files?", ["Restore the files", "Cancel"], current=0)
    # Nobody to ask (dsh -p, a script, an editor): the command line was the
    # confirmation. A person who closed the list meant no.
    if picked == 1 or (picked is None and host.attended):
        host.show("Nothing was restored.")
        return
    try:
        outcome = await checkpoints.restore(agent, plan)
    except CheckpointError as error:
        raise CommandError(str(error)) from None
    count = len(outcome.applied)
    said = f"Restored {count} file{'' if count == 1 else 's'} to before turn {plan.turn}."
    if outcome.conflicts:
        said += " Left alone (changed by hand): " + names(outcome.conflicts) + "."
    host.show(said)
    agent.inject(undone_note(plan, outcome))


def undo_command() -> Command:
    return Command(
        "undo",
        "put the files back to before the last turn that changed them",
        undo,
        "[--dry-run]",
    )


async def restore_fork_files(
    checkpoints: Checkpoints,
    fork: SessionOwner,
    source: Sequence[SessionEvent],
    *,
    show: Callable[[str], None],
    confirm: Callable[[], Awaitable[bool]],
) -> str:
    """``--code`` of a fork (``/fork`` and ``dsh sessions fork``): the files put back as
    the fork's last turn left them, after ``show`` got the summary and ``confirm``
    said yes; the restore is logged in the fork, with the note for the model. Returns
    what was done, for the person; raises :class:`CheckpointError`."""
    plan = await checkpoints.plan_fork(fork, source)
    if plan is None:
        return "No checkpoint holds the files of that turn: they were left as they are."
    show(describe_plan(plan))
    if plan.empty():
        return "The files already are as that turn left them."
    if not await confirm():
        return "The files were left as they are."
    outcome = await checkpoints.restore(fork, plan)
    # The fork is idle: the note goes straight into its log.
    fork.session.append("user/message", undone_note(plan, outcome))
    said = f"Restored {len(outcome.applied)} file(s) as turn {plan.turn - 1} left them."
    if outcome.conflicts:
        said += " Left alone (changed by hand): " + names(outcome.conflicts) + "."
    return said
