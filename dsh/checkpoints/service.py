"""The ``checkpoints`` service: snapshots of the project before a turn's effects and at
its end, and restoring one (``/undo``, ``/rewind``, a fork at a turn).

The tool pipeline awaits :meth:`Checkpoints.before_effect` after a call with effects
is approved and before it runs: every such call (an edit, a write, a shell command, a
terminal's input, an MCP tool that does not declare itself read-only) is preceded by
a snapshot of the project, once per step, so what commands change is covered as well
as what the edit tools change. The turn's end takes one more, which lists the turn's
changes. Each is a ``checkpoint/taken`` event; the snapshots live in the project's
private store (:mod:`dsh.checkpoints.store`).

Taking one never fails a call: a snapshot that cannot be taken is an event with its
``error``, and the call runs anyway.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from dsh.checkpoints.restore import (
    HISTORY_TYPES,
    Purpose,
    RestoreOutcome,
    RestorePlan,
    TurnCheckpoints,
    apply_restore,
    plan_restore,
    read_history,
)
from dsh.checkpoints.store import MB, CheckpointError, CheckpointStore, Snapshot
from dsh.kernel import ServiceKey
from dsh.session.checkpoint_events import (
    MAX_CHANGES,
    CheckpointTaken,
    PathChange,
    RestoreDone,
    RestoreStarted,
)
from dsh.settings_tables import CheckpointsTable
from dsh.trust import project_root

if TYPE_CHECKING:
    from collections.abc import Sequence

    from dsh.agent_handle import AgentHandle
    from dsh.kernel import Context
    from dsh.llm import SessionId
    from dsh.session import Session, SessionEvent

__all__ = ["Checkpoints", "SessionOwner"]

_log = logging.getLogger("dsh.checkpoints")

Phase = Literal["before-step", "turn-end", "before-restore"]


class SessionOwner(Protocol):
    """What the service needs of whoever writes a session: an agent (an
    :class:`~dsh.agent_handle.AgentHandle` is one), or ``dsh sessions fork --code``,
    which restores files into a fork it has open without running an agent."""

    @property
    def id(self) -> SessionId: ...
    @property
    def session(self) -> Session: ...
    @property
    def cwd(self) -> Path: ...
    @property
    def ctx(self) -> Context: ...
    @property
    def parent(self) -> AgentHandle | None:
        """The live agent that delegated to this one, whose turn its effects are part of."""
        ...

    async def flush(self, *, sync: bool = True) -> bool: ...


@dataclass
class _SessionState:
    """What the service keeps of one session between its calls."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """One snapshot at a time: they share the session's index."""
    steps: dict[tuple[int, int], asyncio.Task[CheckpointTaken | None]] = field(default_factory=dict)
    first: dict[int, CheckpointTaken] = field(default_factory=dict)
    """Each turn's first checkpoint, as this process knows it."""
    last: CheckpointTaken | None = None
    said_off: bool = False


def off_reason(root: Path) -> str | None:
    """Why checkpoints are off for a project at ``root``, or None."""
    if root == Path("/"):
        return "checkpoints are off: the project root is /"
    try:
        home = Path.home().resolve()
    except (RuntimeError, OSError):
        return None
    if root == home:
        return "checkpoints are off: the project root is your home folder"
    return None


class Checkpoints:
    """The ``checkpoints`` service (:data:`dsh.services.CHECKPOINTS`)."""

    def __init__(self, table: CheckpointsTable, home: Path) -> None:
        self.table = table
        self.home = home
        self._stores: dict[Path, CheckpointStore] = {}
        self._sessions: dict[str, _SessionState] = {}
        self._tasks: set[asyncio.Task[CheckpointTaken | None]] = set()

    async def aclose(self) -> None:
        """Stop the snapshots still running (their events are not written)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # ------------------------------------------------------------------ taking

    async def before_effect(self, agent: SessionOwner, turn: int, step: int) -> None:
        """The snapshot before a call with effects: once per (session, turn, step);
        the calls of one step share it. Never raises."""
        if not self.table.enabled:
            return
        parent = agent.parent
        if parent is not None and parent.session.open_turn is not None:
            # A subagent's effects are its parent's turn's too: /undo in the parent
            # must cover them, and the parent's call that made it has none of its own.
            await self.before_effect(
                parent, parent.session.open_turn, parent.session.open_step or 1
            )
        state = self._state(agent)
        key = (turn, step)
        task = state.steps.get(key)
        if task is None:
            task = asyncio.ensure_future(self._take(agent, "before-step", turn, step))
            state.steps[key] = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        # The snapshot is the service's: a call stopped while it waits leaves it running.
        await asyncio.shield(task)

    async def turn_ended(self, agent: SessionOwner, turn: int) -> None:
        """The turn-end snapshot, with the turn's changes, after a turn that took a
        checkpoint. Never raises."""
        state = self._sessions.get(agent.id)
        if state is None or turn not in state.first:
            return
        pending = [task for (number, _), task in state.steps.items() if number == turn]
        await asyncio.gather(*pending, return_exceptions=True)
        for key in [key for key in state.steps if key[0] <= turn]:
            del state.steps[key]
        task = asyncio.ensure_future(self._take(agent, "turn-end", turn, None))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        await asyncio.shield(task)

    def _state(self, agent: SessionOwner) -> _SessionState:
        state = self._sessions.get(agent.id)
        if state is None:
            state = self._sessions[agent.id] = _SessionState()
            history = read_history(agent.session.scan(*HISTORY_TYPES))
            state.first = {t.turn: t.first for t in history.turns}
            state.last = next(
                (c for c in reversed(list(history.checkpoints.values())) if c.tree is not None),
                None,
            )
        return state

    async def _store(self, root: Path) -> CheckpointStore:
        store = self._stores.get(root)
        if store is None:
            store = self._stores[root] = await CheckpointStore.open(self.home, root)
        return store

    async def _take(
        self, agent: SessionOwner, phase: Phase, turn: int | None, step: int | None
    ) -> CheckpointTaken | None:
        """Take a snapshot and log it; None when checkpoints are off here (said once)."""
        state = self._state(agent)
        root = await asyncio.to_thread(project_root, agent.cwd)
        checkpoint_id = uuid.uuid4().hex
        reason = off_reason(root)
        if reason is not None:
            if state.said_off:
                return None
            state.said_off = True
            return self._log(
                agent,
                CheckpointTaken(
                    checkpoint_id=checkpoint_id, phase=phase, turn=turn, step=step,
                    root=str(root), error=reason,
                ),
            )  # fmt: skip
        async with state.lock:
            try:
                store = await self._store(root)
                snapshot = await store.snapshot(
                    agent.id,
                    max_file_bytes=int(self.table.max_file_mb * MB),
                    max_checkpoint_bytes=int(self.table.max_checkpoint_mb * MB),
                    exclude=(self.home,),
                )
                changes: tuple[PathChange, ...] = ()
                total = 0
                first = state.first.get(turn) if turn is not None else None
                if phase == "turn-end" and first is not None and first.tree is not None:
                    found = await _changes(store, first, snapshot)
                    changes, total = tuple(found[:MAX_CHANGES]), len(found)
            except CheckpointError as error:
                _log.warning("session %s: no checkpoint: %s", agent.id, error)
                return self._log(
                    agent,
                    CheckpointTaken(
                        checkpoint_id=checkpoint_id, phase=phase, turn=turn, step=step,
                        root=str(root), error=str(error),
                    ),
                )  # fmt: skip
            last = state.last
            same = (
                last is not None
                and last.tree == snapshot.tree
                and last.modes == snapshot.modes
                and last.root == str(root)
            )
            taken = CheckpointTaken(
                checkpoint_id=checkpoint_id,
                phase=phase,
                turn=turn,
                step=step,
                root=str(root),
                tree=snapshot.tree,
                modes=snapshot.modes,
                left_out=snapshot.left_out,
                same_as=(last.same_as or last.checkpoint_id) if same and last else None,
                changes=changes,
                changes_total=total,
            )
            state.last = taken
            if phase == "before-step" and turn is not None:
                state.first.setdefault(turn, taken)
            return self._log(agent, taken)

    @staticmethod
    def _log(agent: SessionOwner, taken: CheckpointTaken) -> CheckpointTaken:
        agent.session.append("checkpoint/taken", taken)
        return taken

    # ------------------------------------------------------------------ reading

    def history(self, session: Session) -> TurnCheckpoints:
        """Per turn, its first checkpoint, its end and its changes: from the log."""
        return read_history(session.scan(*HISTORY_TYPES))

    # ------------------------------------------------------------------ restoring

    async def plan_undo(self, agent: SessionOwner) -> RestorePlan | None:
        """Putting the files back to before the latest turn with effects that is not
        undone yet; None when there is none."""
        history = self.history(agent.session)
        turn = history.undoable()
        if turn is None:
            return None
        return await self._plan(agent, history, "undo", turn.turn, turn.first)

    async def plan_rewind(
        self, agent: SessionOwner, turn: int, *, purpose: Purpose = "rewind"
    ) -> RestorePlan | None:
        """Putting the files back to how they were before ``turn``; None when no turn
        from ``turn`` on changed anything."""
        history = self.history(agent.session)
        found = history.before(turn)
        if found is None:
            return None
        return await self._plan(agent, history, purpose, turn, found.first)

    async def plan_fork(
        self, fork: SessionOwner, source: Sequence[SessionEvent]
    ) -> RestorePlan | None:
        """Putting the files back to how the agent left them at the end of the turn
        ``fork`` (a fork at a turn of the session whose events are ``source``) ends
        with; None when its log holds no
        checkpoint. The restore is logged in the fork; what the files are expected to
        hold now is the source's latest state, so what was changed by hand since
        is a conflict, as for ``/undo``."""
        target = self.history(fork.session).expected
        if target is None:
            return None
        expected = read_history(source).expected
        if expected is not None and expected.root != target.root:
            expected = None  # another project's files: the fork's own state stands
        return await self._plan(
            fork,
            self.history(fork.session),
            "fork",
            fork.session.last_turn + 1,
            target,
            expected=expected,
        )

    async def _plan(
        self,
        agent: SessionOwner,
        history: TurnCheckpoints,
        purpose: Purpose,
        turn: int,
        target: CheckpointTaken,
        *,
        expected: CheckpointTaken | None = None,
    ) -> RestorePlan:
        if target.tree is None:
            raise CheckpointError(f"turn {turn}'s checkpoint was not taken: {target.error}")
        expected = expected or history.expected or target
        current = await self._take(agent, "before-restore", None, None)
        if current is None or current.tree is None:
            why = current.error if current is not None else off_reason(Path(target.root))
            raise CheckpointError(f"the files as they are now could not be read: {why}")
        store = await self._store(Path(target.root))
        left_out = [
            item.path for checkpoint in (target, expected, current) for item in checkpoint.left_out
        ]
        return await plan_restore(
            store,
            purpose=purpose,
            turn=turn,
            target=target,
            expected=expected,
            current=current,
            left_out=left_out,
        )

    async def restore(
        self, agent: SessionOwner, plan: RestorePlan, *, conversation: bool = False
    ) -> RestoreOutcome:
        """Apply ``plan``: ``checkpoint/restoring`` logged and synced first, then file
        by file, then ``checkpoint/restored``. Raises :class:`CheckpointError` when the
        log cannot be written (nothing touched) or a file cannot be (the restore is
        logged as failed, with what was done)."""
        history = self.history(agent.session)
        target = history.checkpoints.get(plan.target)
        if target is None or target.tree is None:
            raise CheckpointError(f"no checkpoint {plan.target} in this session")
        started = RestoreStarted(
            restore_id=uuid.uuid4().hex,
            purpose=plan.purpose,
            turn=plan.turn,
            target=plan.target,
            writes=plan.writes,
            conflicts=plan.conflicts,
            conversation=conversation,
        )
        agent.session.append("checkpoint/restoring", started)
        if not await agent.flush(sync=True):
            raise CheckpointError("the session log cannot be written, so nothing was restored")
        return await self._apply(agent, started, target, resumed=False)

    async def finish_interrupted(self, agent: SessionOwner) -> RestoreOutcome | None:
        """Finish a restore whose process was stopped before its end (on resume)."""
        history = self.history(agent.session)
        started = history.pending
        if started is None:
            return None
        target = history.checkpoints.get(started.target)
        if target is None or target.tree is None:
            agent.session.append(
                "checkpoint/restored",
                RestoreDone(
                    restore_id=started.restore_id,
                    resumed=True,
                    error=f"no checkpoint {started.target} in this session",
                ),
            )
            return None
        try:
            return await self._apply(agent, started, target, resumed=True)
        except CheckpointError as error:
            _log.warning("session %s: the restore was not finished: %s", agent.id, error)
            return None

    async def _apply(
        self,
        agent: SessionOwner,
        started: RestoreStarted,
        target: CheckpointTaken,
        *,
        resumed: bool,
    ) -> RestoreOutcome:
        assert target.tree is not None
        try:
            store = await self._store(Path(target.root))
            done = await apply_restore(store, started, target.tree)
        except (CheckpointError, OSError) as error:
            agent.session.append(
                "checkpoint/restored",
                RestoreDone(restore_id=started.restore_id, resumed=resumed, error=str(error)),
            )
            await agent.flush(sync=False)
            raise CheckpointError(f"the restore stopped: {error}") from None
        conflicts = tuple(dict.fromkeys((*started.conflicts, *done.conflicts)))
        agent.session.append(
            "checkpoint/restored",
            RestoreDone(
                restore_id=started.restore_id,
                applied=done.applied,
                conflicts=conflicts,
                resumed=resumed,
            ),
        )
        await agent.flush(sync=False)
        # The files are the target's now: the next step's snapshot compares with it.
        state = self._state(agent)
        state.last = target
        return RestoreOutcome(started.restore_id, done.applied, conflicts, resumed)


async def _changes(
    store: CheckpointStore, first: CheckpointTaken, end: Snapshot
) -> list[PathChange]:
    """What changed from ``first`` to ``end``, path by path."""
    assert first.tree is not None
    found: list[PathChange] = []
    seen: set[str] = set()
    for change in await store.diff(first.tree, end.tree):
        seen.add(change.path)
        if change.old is None:
            found.append(PathChange(path=change.path, change="added"))
        elif change.new is None:
            found.append(PathChange(path=change.path, change="deleted"))
        else:
            found.append(PathChange(path=change.path, change="modified"))
    for path in sorted(set(first.modes) | set(end.modes)):
        if path not in seen and first.modes.get(path) != end.modes.get(path):
            found.append(PathChange(path=path, change="mode"))
    found.sort(key=lambda item: item.path)
    return found


CHECKPOINTS: ServiceKey[Checkpoints] = ServiceKey("checkpoints")
"""Snapshots of the project's files before a turn's effects (``before_effect``), and
restoring them (``plan_undo``, ``plan_rewind``, ``restore``)."""
