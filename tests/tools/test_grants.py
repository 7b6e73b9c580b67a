"""Signed session grants: the installation key, sign and verify, and the approvals
service restoring only the grants this installation signed.

The end-to-end attacks through the real binary are in tests/security/test_session_grants.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import sys
from pathlib import Path

import pytest

from dsh.kernel import Context
from dsh.llm import new_session_id
from dsh.paths import INSTALLATION_KEY_FILE
from dsh.policy.grants import (
    KEY_BYTES,
    InstallationKey,
    KeyRefused,
    grant_fields,
    sign,
    verify,
)
from dsh.policy.permissions import Rule
from dsh.session import Session, SessionEvent
from dsh.session.header import SessionHeader
from dsh.session.payloads import ApprovalResolved, GrantsIgnored
from dsh.tools import Action
from dsh.tools.approval import ApprovalDecision, ApprovalRequest, ApprovalService
from dsh.ui.entries import NoticeEntry, TranscriptFold
from tests.tools.test_pipeline import SHOUT  # the same approval-needing tool

KEY = bytes(range(KEY_BYTES))
FIELDS = grant_fields("s1", "r1", "bash", "allow-session", "bash(touch:*)")


# ---------------------------------------------------------------------- sign and verify


def test_a_signature_verifies_with_its_key_and_fields_only() -> None:
    mac = sign(KEY, FIELDS)
    assert verify(KEY, FIELDS, mac)
    assert not verify(bytes(KEY_BYTES), FIELDS, mac)  # another installation's key
    for index in range(1, len(FIELDS)):
        changed = list(FIELDS)
        changed[index] += "x"
        assert not verify(KEY, changed, mac), f"field {index} is not covered"


def test_fields_cannot_be_shifted_into_each_other() -> None:
    one = grant_fields("s1", "r1", "bash", "allow-session", "ab")
    other = grant_fields("s1", "r1", "bas", "allow-session", "hab")
    assert sign(KEY, one) != sign(KEY, other)
    joined = grant_fields('s1","r1', "bash", "allow-session", "x", "y")
    assert sign(KEY, joined) != sign(KEY, grant_fields("s1", "r1", "bash", "allow-session", "x"))


@pytest.mark.parametrize("mac", [None, "", "0" * 64, "é" * 64, "\udcff", 12, ["a"]])
def test_anything_else_a_log_may_hold_does_not_verify(mac: object) -> None:
    assert not verify(KEY, FIELDS, mac)


# ---------------------------------------------------------------------- the key file


def test_the_key_is_made_private_on_first_need_and_then_kept(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert InstallationKey(home).get(create=False) is None
    assert not home.exists()  # looking made nothing
    key = InstallationKey(home).get(create=True)
    assert key is not None
    assert len(key) == KEY_BYTES
    path = home / INSTALLATION_KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert InstallationKey(home).get(create=False) == key  # another process reads it
    assert InstallationKey(home).get(create=True) == key
    assert [p.name for p in home.iterdir()] == [INSTALLATION_KEY_FILE]  # no temporary left
    assert key.hex() not in repr(InstallationKey(home))


def test_the_home_default_is_dsh_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "elsewhere"))
    assert InstallationKey().path == tmp_path / "elsewhere" / INSTALLATION_KEY_FILE


def test_processes_starting_at_once_agree_on_one_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    program = (
        "import hashlib, sys\n"
        "from pathlib import Path\n"
        "from dsh.policy.grants import InstallationKey\n"
        "key = InstallationKey(Path(sys.argv[1])).get(create=True)\n"
        "print(hashlib.sha256(key).hexdigest())\n"
    )

    async def race() -> list[str]:
        children = [
            await asyncio.create_subprocess_exec(
                sys.executable, "-c", program, str(home), stdout=asyncio.subprocess.PIPE
            )
            for _ in range(8)
        ]
        outs = await asyncio.gather(*(child.communicate() for child in children))
        assert [child.returncode for child in children] == [0] * len(children)
        return [out.decode().strip() for out, _ in outs]

    digests = asyncio.run(race())
    key = InstallationKey(home).get(create=False)
    assert key is not None
    assert set(digests) == {hashlib.sha256(key).hexdigest()}


def made_key(tmp_path: Path) -> tuple[Path, bytes]:
    home = tmp_path / "home"
    key = InstallationKey(home).get(create=True)
    assert key is not None
    return home / INSTALLATION_KEY_FILE, key


def refusal(path: Path) -> str:
    with pytest.raises(KeyRefused) as refused:
        InstallationKey(path.parent).get(create=True)
    return str(refused.value)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o660, 0o644])
def test_a_key_others_can_read_or_write_is_refused(tmp_path: Path, mode: int) -> None:
    path, key = made_key(tmp_path)
    path.chmod(mode)
    said = refusal(path)
    assert str(path) in said
    assert f"{mode:04o}" in said
    assert key.hex() not in said
    assert path.read_text().strip() == key.hex()  # left as it was, not replaced


def test_a_key_another_user_owns_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, key = made_key(tmp_path)
    if os.geteuid() == 0:
        os.chown(path, 54321, -1)
    else:  # only root can give a file away: be someone else instead
        me = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: me + 1)
    said = refusal(path)
    assert "owned by another user" in said
    assert key.hex() not in said


def test_a_key_that_is_a_link_or_not_a_key_is_refused(tmp_path: Path) -> None:
    path, _ = made_key(tmp_path)
    real = tmp_path / "real.key"
    path.rename(real)
    path.symlink_to(real)
    assert "symbolic link" in refusal(path)
    path.unlink()
    path.write_text("not a key\n")
    path.chmod(0o600)
    assert "does not hold a dsh installation key" in refusal(path)
    path.write_text("ab" * (KEY_BYTES - 1) + "\n")
    assert "does not hold a dsh installation key" in refusal(path)


# ---------------------------------------------------------------------- the approvals service


ACTION = Action(risk="exec", summary="shout hi", command="shout hi")


def new_session(tmp_path: Path) -> Session:
    return Session(SessionHeader(id=new_session_id(), created_at=1, cwd=str(tmp_path)))


def reopened(session: Session, edit: dict[str, object] | None = None) -> Session:
    """The session as another process reads it back, its grant optionally edited."""
    events: list[SessionEvent] = []
    for event in session.events:
        data = event.data
        if edit is not None and isinstance(data, ApprovalResolved):
            data = data.model_copy(update=edit)
        events.append(
            SessionEvent(event.type, event.seq, event.time, data, surface_op=event.surface_op)
        )
    return Session(session.header, events)


async def granted_session(tmp_path: Path) -> Session:
    service = ApprovalService(Context(), home=tmp_path / "home")

    async def allow_for_session(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision(outcome="allow_session")

    service.add_approver(allow_for_session)
    session = new_session(tmp_path)
    gate = await service.check(SHOUT, ACTION, session=session, call_id="c1", cwd=tmp_path)
    assert gate.allowed
    return session


async def test_a_grant_made_here_is_signed_and_restored(tmp_path: Path) -> None:
    session = await granted_session(tmp_path)
    [resolved] = [e.data for e in session.events if isinstance(e.data, ApprovalResolved)]
    assert resolved.outcome == "allow-session"
    assert resolved.mac is not None
    key = (tmp_path / "home" / INSTALLATION_KEY_FILE).read_text().strip()
    assert key not in str(session.events)  # the key is never logged

    again = reopened(session)
    service = ApprovalService(Context(), home=tmp_path / "home")  # a later process, no approver
    assert service.restore(again) == [Rule("shout", "shout:*")]
    assert not [e for e in again.events if isinstance(e.data, GrantsIgnored)]
    gate = await service.check(SHOUT, ACTION, session=again, call_id="c2", cwd=tmp_path)
    assert gate.allowed


@pytest.mark.parametrize(
    "edit",
    [
        {"mac": None},
        {"mac": "0" * 64},
        {"pattern": "shout"},  # widened from shout(shout:*)
        {"request_id": "another-request"},
    ],
)
async def test_an_edited_grant_grants_nothing_and_says_so(
    tmp_path: Path, edit: dict[str, object]
) -> None:
    session = await granted_session(tmp_path)
    edited = reopened(session, edit)
    service = ApprovalService(Context(), home=tmp_path / "home")
    assert service.restore(edited) == []
    [ignored] = [e for e in edited.events if isinstance(e.data, GrantsIgnored)]
    assert (ignored.data.count, ignored.data.problem) == (1, None)
    gate = await service.check(SHOUT, ACTION, session=edited, call_id="c2", cwd=tmp_path)
    assert not gate.allowed  # headless: asked, and nobody is there

    fold = TranscriptFold()
    notices = [
        entry
        for event in edited.events
        for entry in fold.apply(event)
        if isinstance(entry, NoticeEntry)
    ]
    assert [(n.level, n.text) for n in notices] == [
        (
            "warning",
            "1 session grant in this log was not made on this installation and is ignored; "
            "dsh will ask again",
        )
    ]


async def test_a_grant_copied_into_another_session_grants_nothing(tmp_path: Path) -> None:
    session = await granted_session(tmp_path)
    other = Session(
        SessionHeader(id=new_session_id(), created_at=1, cwd=str(tmp_path)),
        reopened(session).events[: len(session.events)],
    )
    service = ApprovalService(Context(), home=tmp_path / "home")
    assert service.restore(other) == []


async def test_another_installations_grant_grants_nothing(tmp_path: Path) -> None:
    session = await granted_session(tmp_path)
    elsewhere = ApprovalService(Context(), home=tmp_path / "other-home")
    assert elsewhere.restore(reopened(session)) == []  # no key there at all
    InstallationKey(tmp_path / "other-home").get(create=True)
    assert ApprovalService(Context(), home=tmp_path / "other-home").restore(reopened(session)) == []


async def test_a_refused_key_restores_nothing_and_says_why(tmp_path: Path) -> None:
    session = await granted_session(tmp_path)
    path = tmp_path / "home" / INSTALLATION_KEY_FILE
    path.chmod(0o644)
    again = reopened(session)
    assert ApprovalService(Context(), home=tmp_path / "home").restore(again) == []
    [ignored] = [e.data for e in again.events if isinstance(e.data, GrantsIgnored)]
    assert ignored.count == 1
    assert ignored.problem is not None
    assert str(path) in ignored.problem
    assert path.read_text().strip() not in ignored.problem


async def test_a_log_without_grants_never_touches_the_key(tmp_path: Path) -> None:
    service = ApprovalService(Context(), home=tmp_path / "home")
    session = new_session(tmp_path)
    assert service.restore(session) == []
    gate = await service.check(SHOUT, ACTION, session=session, call_id="c1", cwd=tmp_path)
    assert not gate.allowed
    assert not (tmp_path / "home").exists()


# ---------------------------------------------------------------------- rejected for the session


async def test_a_rejection_for_the_session_holds_after_a_resume(tmp_path: Path) -> None:
    service = ApprovalService(Context(), home=tmp_path / "home")
    asked: list[ApprovalRequest] = []

    async def reject_for_session(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision(outcome="deny_session")

    service.add_approver(reject_for_session)
    session = new_session(tmp_path)
    gate = await service.check(SHOUT, ACTION, session=session, call_id="c1", cwd=tmp_path)
    assert not gate.allowed
    gate = await service.check(SHOUT, ACTION, session=session, call_id="c2", cwd=tmp_path)
    assert not gate.allowed
    assert gate.message is not None
    assert "for the rest of the session" in gate.message
    assert len(asked) == 1  # not asked again
    rejected = [e.data for e in session.events if isinstance(e.data, ApprovalResolved)]
    assert [(r.outcome, r.pattern) for r in rejected] == [
        ("deny", asked[0].grant),
        ("deny", None),
    ]
    assert not (tmp_path / "home").exists()  # nothing signed: a denial only narrows

    # A later process, whose person would allow anything: never asked about it.
    later = ApprovalService(Context(), home=tmp_path / "home")
    allowed: list[ApprovalRequest] = []

    async def allow(request: ApprovalRequest) -> ApprovalDecision:
        allowed.append(request)
        return ApprovalDecision(outcome="allow_once")

    later.add_approver(allow)
    again = reopened(session)
    later.restore(again)
    gate = await later.check(SHOUT, ACTION, session=again, call_id="c3", cwd=tmp_path)
    assert not gate.allowed
    assert allowed == []
    # Another command asks for another grant: asked as usual.
    other = Action(risk="exec", summary="shout bye", command="other bye")
    gate = await later.check(SHOUT, other, session=again, call_id="c4", cwd=tmp_path)
    assert gate.allowed
    assert len(allowed) == 1


async def test_a_plain_rejection_is_not_remembered(tmp_path: Path) -> None:
    service = ApprovalService(Context(), home=tmp_path / "home")
    asked: list[ApprovalRequest] = []

    async def reject(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision(outcome="deny")

    service.add_approver(reject)
    session = new_session(tmp_path)
    for call in ("c1", "c2"):
        gate = await service.check(SHOUT, ACTION, session=session, call_id=call, cwd=tmp_path)
        assert not gate.allowed
    assert len(asked) == 2


async def test_a_parents_rejection_holds_for_its_subagent(tmp_path: Path) -> None:
    service = ApprovalService(Context(), home=tmp_path / "home")
    asked: list[ApprovalRequest] = []

    async def reject_for_session(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision(outcome="deny_session")

    service.add_approver(reject_for_session)
    parent = new_session(tmp_path)
    gate = await service.check(SHOUT, ACTION, session=parent, call_id="c1", cwd=tmp_path)
    assert not gate.allowed
    child = Session(
        SessionHeader(
            id=new_session_id(),
            created_at=2,
            cwd=str(tmp_path),
            parent_session=parent.id,
            origin="subagent",
        )
    )
    gate = await service.check(SHOUT, ACTION, session=child, call_id="c2", cwd=tmp_path)
    assert not gate.allowed
    assert len(asked) == 1  # the child's call was not asked about
