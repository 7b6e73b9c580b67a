"""The [hooks] table: what it configures, and a line for each part that cannot be used."""

from __future__ import annotations

from plugins.user_hooks.config import read_hooks


def test_the_table_reads_as_other_agents_write_it() -> None:
    table = {
        "PreToolUse": [
            {"matcher": "bash|edit", "hooks": [{"type": "command", "command": "./check.sh"}]},
            {"hooks": [{"type": "command", "command": "./all.sh", "timeout": 5}]},
        ],
        "Stop": [{"hooks": [{"type": "command", "command": ""}]}],
        "Whenever": [],
        "PostToolUse": {"matcher": "x"},
    }
    hooks, problems = read_hooks(table, "settings.toml")
    assert [(h.event, h.matcher, h.command, h.timeout) for h in hooks] == [
        ("PreToolUse", "bash|edit", "./check.sh", 60.0),
        ("PreToolUse", "", "./all.sh", 5.0),
    ]
    assert hooks[0].matches("bash")
    assert hooks[0].matches("edit")
    assert not hooks[0].matches("bash_job")  # the whole name
    assert hooks[1].matches("anything")
    assert len(problems) == 3
    assert any("hooks.Whenever is not a hook event" in p for p in problems)
    assert any("hooks.Stop[0]" in p for p in problems)
    assert any("hooks.PostToolUse must be a list" in p for p in problems)
