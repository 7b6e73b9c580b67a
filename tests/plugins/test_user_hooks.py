"""The [hooks] table: what it configures, and a line for each part that cannot be used."""

from __future__ import annotations

from dsh_plugins.user_hooks.config import read_hooks


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
    assert hooks[0].matches(("bash", "Bash"))
    assert hooks[0].matches(("edit", "Edit"))
    assert not hooks[0].matches(("bash_job",))  # the whole name
    assert hooks[1].matches(("anything",))
    assert len(problems) == 3
    assert any("hooks.Whenever is not a hook event" in p for p in problems)
    assert any("hooks.Stop[0]" in p for p in problems)
    assert any("hooks.PostToolUse must be a list" in p for p in problems)


def test_a_matcher_names_a_tool_by_dshs_name_or_claude_codes() -> None:
    """Claude Code's documented matchers (``Bash``, ``Edit|Write``, ``mcp__memory__.*``,
    ``Task`` for what it now calls ``Agent``) find the same tools in dsh."""
    table = {
        "PreToolUse": [
            {"matcher": matcher, "hooks": [{"type": "command", "command": "true"}]}
            for matcher in ("Bash", "Edit|Write", "mcp__memory__.*", "Task", "bash")
        ]
    }
    bash, edits, memory, task, own = read_hooks(table, "settings.json")[0]
    assert bash.matches(("bash", "Bash"))
    assert not bash.matches(("bash_job",))
    assert edits.matches(("write", "Write"))
    assert edits.matches(("edit", "Edit"))
    assert not edits.matches(("multi_edit", "MultiEdit"))
    assert memory.matches(("mcp__memory__create_entities",))
    assert task.matches(("task", "Agent", "Task"))
    assert own.matches(("bash", "Bash"))
