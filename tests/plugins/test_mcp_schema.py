"""Tool names and argument schemas as the model sees them, and the configuration
formats (``[mcp.servers]``, ``.mcp.json``, ``${VAR}``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh.credentials import Secret
from dsh_plugins.mcp.config import (
    ConfigError,
    MissingVariable,
    expand,
    read_project_file,
    read_table,
)
from dsh_plugins.mcp.schema import MAX_NAME, normalise, tool_name, tool_names


def test_names_are_safe_short_and_stable() -> None:
    assert tool_name("github", "create_issue") == "mcp__github__create_issue"
    assert tool_name("my server", "a.b/c") == "mcp__my_server__a_b_c"
    long = tool_name("server", "x" * 100)
    assert len(long) == MAX_NAME
    assert long == tool_name("server", "x" * 100)  # the same every start
    assert long != tool_name("server", "x" * 99 + "y")


def test_names_that_clean_alike_stay_apart_in_sorted_order() -> None:
    names = tool_names("s", ["b", "a.b", "a_b"])
    assert list(names) == ["a.b", "a_b", "b"]
    assert len(set(names.values())) == 3
    assert names["a_b"] == "mcp__s__a_b"


def test_schemas_keep_what_function_calling_accepts() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Args",
        "type": "object",
        "properties": {
            "when": {"$ref": "#/$defs/Date", "description": "the day"},
            "tags": {"type": ["array", "null"], "items": {"type": "string", "x-vendor": 1}},
            "count": {"type": "integer", "minimum": 0, "examples": [1]},
        },
        "required": ["when", "gone"],
        "$defs": {"Date": {"type": "string", "format": "date", "title": "Date"}},
        "x-extra": True,
    }
    assert normalise(schema) == {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date", "description": "the day"},
            "tags": {"anyOf": [{"type": "array"}, {"type": "null"}], "items": {"type": "string"}},
            "count": {"type": "integer", "minimum": 0},
        },
        "required": ["when"],
    }


def test_a_schema_that_is_no_object_becomes_an_empty_one() -> None:
    assert normalise(None) == {"type": "object", "properties": {}}
    assert normalise({"type": "string"}) == {"type": "object", "properties": {}}
    looping = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}},
    }
    assert normalise(looping)["type"] == "object"  # a $ref loop ends


def test_the_settings_table() -> None:
    servers = read_table(
        {
            "servers": {
                "local": {"command": "srv", "args": ["--x"], "tool_timeout": 5},
                "remote": {"url": "https://example.com/mcp", "headers": {"A": "b"}},
                "old": {"type": "sse", "url": "https://example.com/sse"},
            }
        },
        "settings.toml",
    )
    assert servers["local"].transport == "stdio"
    assert servers["remote"].transport == "http"
    assert servers["old"].transport == "sse"
    with pytest.raises(ConfigError, match=r"settings.toml: mcp.servers.bad"):
        read_table({"servers": {"bad": {"command": "x", "colour": "red"}}}, "settings.toml")


def test_the_mcp_json_format(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "fs": {"command": "npx", "args": ["-y", "srv"], "env": {"K": "${K}"}},
                    "web": {"type": "streamable-http", "url": "https://x/mcp", "headers": {}},
                    "off": {"command": "x", "disabled": True, "autoApprove": []},
                }
            }
        )
    )
    servers = read_project_file(path)
    assert servers["fs"].args == ["-y", "srv"]
    assert servers["web"].transport == "http"
    assert servers["off"].enabled is False
    assert read_project_file(tmp_path / "none.json") == {}
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not an mcpServers document"):
        read_project_file(path)


def test_variables_expand_from_the_lookup() -> None:
    found = {"TOKEN": Secret("abc123")}
    values = expand(
        {"Authorization": "Bearer ${TOKEN}", "X": "${UNSET:-fallback}", "Y": "plain"},
        found.get,
    )
    assert {k: v.reveal() for k, v in values.items()} == {
        "Authorization": "Bearer abc123",
        "X": "fallback",
        "Y": "plain",
    }
    assert "abc123" not in repr(values)
    with pytest.raises(MissingVariable, match=r"\$\{NOPE\} is not set"):
        expand({"A": "${NOPE}"}, found.get)


def test_prompt_arguments_by_position_and_by_name() -> None:
    from mcp import types

    from dsh.commands import CommandError
    from dsh_plugins.mcp.prompts import arguments_of, command_name

    prompt = types.Prompt(
        name="Review",
        arguments=[
            types.PromptArgument(name="path", required=True),
            types.PromptArgument(name="focus"),
        ],
    )
    assert arguments_of(prompt, "app.py error handling") == {
        "path": "app.py",
        "focus": "error handling",
    }
    assert arguments_of(prompt, 'focus=tests "my file.py"') == {
        "focus": "tests",
        "path": "my file.py",
    }
    with pytest.raises(CommandError, match="needs path"):
        arguments_of(prompt, "")
    assert command_name("Docs", "Review") == "mcp__docs__review"
