"""The pieces of the editor's terminals that need no editor: the environment sent, and
the exit status read."""

from __future__ import annotations

from acp.schema import TerminalExitStatus

from dsh.ui.acp.terminals import _exit, editor_environment


def test_the_environment_is_sent_whole_and_what_it_withholds_empty() -> None:
    ours = {"PATH": "/bin", "HOME": "/h", "SOME_TOKEN": "t0k3n"}
    env = {"PATH": "/bin", "HOME": "/h", "PAGER": "cat"}
    sent = {v.name: v.value for v in editor_environment(env, ours)}
    assert sent == {"PATH": "/bin", "HOME": "/h", "PAGER": "cat", "SOME_TOKEN": ""}


def test_exit_status_as_the_local_run_reports_it() -> None:
    assert _exit(None) == (None, None)
    assert _exit(TerminalExitStatus(exit_code=3)) == (3, None)
    assert _exit(TerminalExitStatus(signal="SIGTERM")) == (None, "SIGTERM")
    assert _exit(TerminalExitStatus(exit_code=137, signal="9")) == (None, "SIGKILL")
    assert _exit(TerminalExitStatus(signal="99")) == (None, "signal 99")
    assert _exit(TerminalExitStatus(signal="")) == (None, None)
