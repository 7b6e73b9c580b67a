"""What an escalation, or a command while the sandbox cannot start, needs of the person
(dsh/policy/escalation.py), and the hint a sandboxed failure gets (plugins/bash)."""

from __future__ import annotations

from pathlib import Path

from dsh.policy.escalation import sandbox_need
from dsh.policy.permissions import describe_grant
from dsh.sandbox import SandboxStatus, Widening
from dsh.tools import Action, Escalation, Rule
from dsh_plugins.bash.sandbox_hint import sandbox_hint

ACTIVE = SandboxStatus("workspace-write", active=True, backend="bubblewrap")
BROKEN = SandboxStatus("workspace-write", active=False, reason="bwrap: No permissions")
OFF = SandboxStatus("off", active=False)


def command(text: str, widening: Widening | None = None) -> Action:
    escalation = Escalation(widening, "because") if widening is not None else None
    return Action(risk="exec", summary=text, command=text, sandboxed=True, escalation=escalation)


def test_a_command_while_the_sandbox_cannot_start_is_asked_and_never_granted() -> None:
    need = sandbox_need(command("ls"), BROKEN, [Rule("sandbox", "ls unsandboxed")])
    assert need is not None
    assert need.question == (
        "the sandbox cannot start: bwrap: No permissions; this command would run unsandboxed"
    )
    assert need.widening == Widening(unsandboxed=True)
    assert need.grant == ()


def test_nothing_is_asked_of_a_plain_command_or_with_the_sandbox_off() -> None:
    assert sandbox_need(command("ls"), ACTIVE, []) is None
    assert sandbox_need(command("curl x", Widening(network=True)), OFF, []) is None
    assert sandbox_need(Action(risk="exec", summary="mcp"), BROKEN, []) is None


def test_an_escalation_offers_a_grant_per_program_and_a_grant_covers_only_its_own(
    tmp_path: Path,
) -> None:
    network = Widening(network=True)
    need = sandbox_need(command("cd x && npm install", network), ACTIVE, [])
    assert need is not None
    assert need.question is not None
    assert "use the network" in need.question
    assert "because" in need.question
    assert [str(rule) for rule in need.grant] == ["sandbox(npm network)"]
    granted = list(need.grant)
    covered = sandbox_need(command("npm ci", network), ACTIVE, granted)
    assert covered is not None
    assert covered.question is None
    assert covered.widening == network
    for other in ("python3 -m pip install x", "npm ci; curl x", "npm $(echo ci)"):
        still = sandbox_need(command(other, network), ACTIVE, granted)
        assert still is not None
        assert still.question is not None, other
    # Network granted is not a folder granted, nor no sandbox at all.
    for wider in (Widening(writable=(tmp_path,)), Widening(unsandboxed=True)):
        asked = sandbox_need(command("npm ci", wider), ACTIVE, granted)
        assert asked is not None
        assert asked.question is not None


def test_a_folder_grant_covers_what_is_under_it(tmp_path: Path) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()
    granted = [Rule("sandbox", f"make write {tmp_path}")]
    under = sandbox_need(command("make", Widening(writable=(inner,))), ACTIVE, granted)
    assert under is not None
    assert under.question is None
    above = sandbox_need(command("make", Widening(writable=(tmp_path.parent,))), ACTIVE, granted)
    assert above is not None
    assert above.question is not None


def test_a_command_that_cannot_be_read_offers_no_grant() -> None:
    need = sandbox_need(command("$(which curl) x", Widening(network=True)), ACTIVE, [])
    assert need is not None
    assert need.question is not None
    assert need.grant == ()


def test_the_grant_is_described_in_words() -> None:
    rules = [Rule("sandbox", "curl network"), Rule("sandbox", "npm write /srv/out")]
    assert describe_grant(rules, commands=True) == (
        "`curl` with the network; `npm` writing /srv/out and what is under it"
    )


def test_the_hint_names_what_the_sandbox_refused() -> None:
    refused = sandbox_hint(
        "bash: /srv/out/f: Read-only file system\n[exit code: 1]", "workspace-write", Widening()
    )
    assert refused is not None
    assert "a write was refused (/srv/out/f)" in refused
    assert '"write"' in refused
    offline = sandbox_hint("curl: (6) Could not resolve host: pypi.org", "read-only", Widening())
    assert offline is not None
    assert '"network": true' in offline
    assert sandbox_hint("curl: (7) Failed to connect", "workspace-write", Widening()) is None
    assert sandbox_hint("all good", "workspace-write", Widening()) is None
    # What was already widened is not offered again.
    assert sandbox_hint("Network is unreachable", "read-only", Widening(network=True)) is None
    assert sandbox_hint("Read-only file system", "read-only", Widening(unsandboxed=True)) is None
