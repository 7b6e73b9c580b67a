"""What each session has seen of each file, so the model never overwrites what it has
not read, or what changed after it read it.

Per session, a real path maps to the version the model last saw, or to "absent" when
it looked and found nothing. Reads record; writes and edits check, then record the
version they produced. Memory only: after a resume the model reads again.

A file read through a stand-in for the disk (an editor's buffers, see
:mod:`dsh_plugins.fs.workspace`) has no disk version: its version is its text's digest,
and the text itself is kept, so a change can be planned and shown for approval from
what the model saw, without asking the editor before the call is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from dsh.tools import ToolError
from dsh.tools.files import Target
from dsh_plugins.fs.files import TargetLocks

Seen = Literal["unseen", "absent"] | str
"""``"unseen"``, ``"absent"``, or the version the model last saw (never one of those words:
versions are colon-separated numbers, or ``text:`` and a digest)."""


@dataclass
class Observations:
    _sessions: dict[str, dict[str, str | None]] = field(default_factory=dict)
    _texts: dict[str, dict[str, str]] = field(default_factory=dict)

    def record(
        self, session: str, target: Target, version: str | None, text: str | None = None
    ) -> None:
        """The model has seen ``target`` at ``version`` (None: it does not exist); ``text``
        when it was read through a stand-in for the disk."""
        self._sessions.setdefault(session, {})[target.key] = version
        texts = self._texts.setdefault(session, {})
        if text is None:
            texts.pop(target.key, None)
        else:
            texts[target.key] = text

    def text(self, session: str, target: Target) -> str | None:
        """The text the model last saw of ``target`` through a stand-in for the disk."""
        return self._texts.get(session, {}).get(target.key)

    def seen(self, session: str, target: Target) -> Seen:
        files = self._sessions.get(session, {})
        if target.key not in files:
            return "unseen"
        version = files[target.key]
        return "absent" if version is None else version

    def forget(self, session: str) -> None:
        self._sessions.pop(session, None)
        self._texts.pop(session, None)

    def check_write(self, session: str, target: Target, current: str | None) -> None:
        """May ``write`` replace what is at ``target`` now (``current`` is its version,
        None when there is no file)?"""
        seen = self.seen(session, target)
        if seen in ("unseen", "absent"):
            if current is not None:
                raise ToolError(
                    f"{target.display} already exists and you have not read it in this "
                    "session. Read it first (any part will do), then write again; or "
                    "choose a new path.",
                    "FS_NOT_OBSERVED",
                )
            return
        if current != seen:
            raise _stale(target, current)

    def check_edit(self, session: str, target: Target, current: str | None) -> None:
        """May an edit change what is at ``target`` now?"""
        seen = self.seen(session, target)
        if seen != "unseen" and seen != "absent" and current != seen:
            raise _stale(target, current)
        # A missing file is reported as missing whatever the model saw, since reading
        # it first (what FS_NOT_OBSERVED asks for) could only say the same.
        if current is None:
            raise ToolError(
                f"{target.display} does not exist; use write to create it.", "FS_NOT_FOUND"
            )
        if seen == "unseen":
            raise ToolError(
                f"you have not read {target.display} in this session. Read it first, "
                "then retry the edit.",
                "FS_NOT_OBSERVED",
            )
        if seen == "absent":
            raise _stale(target, current)


def _stale(target: Target, current: str | None) -> ToolError:
    what = "was deleted" if current is None else "has changed"
    return ToolError(
        f"{target.display} {what} since you last read it (changed outside this session "
        "or by another call). Read it again, then retry with its current content.",
        "FS_STALE_VERSION",
    )


@dataclass
class FsState:
    """What the tools of one plugin instance share."""

    observations: Observations = field(default_factory=Observations)
    locks: TargetLocks = field(default_factory=TargetLocks)
