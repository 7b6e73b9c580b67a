"""The core names no bundled plugin: no tool, event type, settings table or call purpose
of theirs appears in dsh/ (issue 20, "plugins own their vocabulary").

The names come from the bundled plugins themselves: the tools they register, the
event types they register (and those only they write), the tables of those that take
settings, and the purposes of the model calls they make. Then dsh/'s source is read:

- a distinctive name (one holding ``/``, ``-`` or ``_``: ``todo_write``,
  ``llm-deepseek``, ``session/title``) may appear nowhere, comments and docstrings
  included;
- a plain word (``read``, ``terminal``) may not be a string in the code unless the
  core has the word for its own reasons (:data:`CORE_WORDS`), nor be named as a table
  (``plugins.lsp``, ``DSH_PLUGINS__LSP``);
- a tool's name may never be compared with a bundled tool's name (``tool.name ==
  "read"``), nor a bundled tool be named (``ToolCallSpec(name="read")``): what a
  tool may do is what it declares (:class:`dsh.tools.Action`).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import typing
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from dsh.permission_modes import PermissionMode
from dsh.policy.permissions import Kind
from dsh.tools.definition import Risk, ToolKind

ROOT = Path(__file__).resolve().parent.parent

CORE_WORDS: dict[str, str] = {
    **{word: "a kind of tool (ToolKind)" for word in typing.get_args(ToolKind)},
    **{word: "a risk an action declares (Risk)" for word in typing.get_args(Risk)},
    **{word: "a permission mode (PermissionMode)" for word in typing.get_args(PermissionMode)},
    **{
        word: "a kind of permission rule, the user's vocabulary (bash(...), edit(...))"
        for word in typing.get_args(Kind)
        if word != "tool"
    },
    "grep": "a program the command analysis knows, as it knows ls and find",
    "title": "a session's title, a JSON Schema keyword, a widget's id",
    "task": "an asyncio task (the kernel says a failure came from one)",
    "terminal": "the Agent Client Protocol's tool call content embedding an editor's terminal",
}
"""Plain words the core has for its own reasons that a bundled plugin also uses as a
name: as strings in dsh/ they are not the plugin's."""

# Run in a process of its own: the event types the plugins register are what the
# registry holds after they load and did not hold before any of them was imported.
_COLLECT = """
import asyncio, json, sys, tempfile
from pathlib import Path

from dsh.kernel import NoConfig, PluginStatus, discover_bundled
from dsh.runtime import start_runtime
from dsh.services import TOOLS
from dsh.session.events import registered_event_types

core = set(registered_event_types())


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder) / "home"
        home.mkdir()
        runtime = await start_runtime(
            home=home, cwd=Path(folder), candidates=discover_bundled(), plugin_configs={}
        )
        try:
            records = runtime.plugins.records
            json.dump(
                {
                    "failed": [r.name for r in records if r.status is not PluginStatus.LOADED],
                    "tools": sorted(runtime.root.get(TOOLS).visible()),
                    "events": sorted(set(registered_event_types()) - core),
                    "tables": sorted(
                        r.name for r in records if r.plugin and r.plugin.config is not NoConfig
                    ),
                },
                sys.stdout,
            )
        finally:
            await runtime.aclose()


asyncio.run(main())
"""


@dataclass(frozen=True)
class Names:
    tools: frozenset[str]
    events: frozenset[str]
    tables: frozenset[str]
    purposes: frozenset[str]

    @property
    def all(self) -> frozenset[str]:
        return self.tools | self.events | self.tables | self.purposes


@cache
def bundled_names() -> Names:
    run = subprocess.run(
        [sys.executable, "-c", _COLLECT], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    loaded = json.loads(run.stdout)
    assert loaded["failed"] == [], f"bundled plugins that did not load: {loaded['failed']}"
    plugin_sources = python_sources("plugins")
    written = appended_event_types(plugin_sources) - appended_event_types(python_sources("dsh"))
    return Names(
        tools=frozenset(loaded["tools"]),
        events=frozenset(loaded["events"]) | written,
        tables=frozenset(loaded["tables"]),
        purposes=call_purposes(plugin_sources),
    )


def python_sources(folder: str) -> dict[Path, str]:
    return {path: path.read_text() for path in sorted((ROOT / folder).rglob("*.py"))}


def appended_event_types(sources: dict[Path, str]) -> frozenset[str]:
    """Event types a source writes: ``session.append("todo/write", ...)``. Those only
    plugins write are theirs, registered by the core or not."""
    found: set[str] = set()
    for source in sources.values():
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "append"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and re.fullmatch(r"[a-z][\w-]*/[\w-]+", node.args[0].value)
            ):
                found.add(node.args[0].value)
    return frozenset(found)


def call_purposes(sources: dict[Path, str]) -> frozenset[str]:
    """The purposes the plugins' model calls give: ``GenerateOptions(purpose="...")``,
    or a constant they declare as ``Purpose("...")``."""
    found: set[str] = set()
    for source in sources.values():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.keyword) and node.arg == "purpose":
                value: ast.expr | None = node.value
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name | ast.Attribute)
                and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr)
                == "Purpose"
                and node.args
            ):
                value = node.args[0]
            else:
                continue
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.add(value.value)
    return frozenset(found)


# ---------------------------------------------------------------------- the check


@dataclass
class Finding:
    where: str
    name: str
    how: str

    def __str__(self) -> str:
        return f"{self.where}: {self.how} {self.name!r}"


@dataclass
class Checker:
    names: Names
    allowed_words: dict[str, str] = field(default_factory=lambda: dict(CORE_WORDS))

    def check(self, path: Path, source: str) -> list[Finding]:
        found: list[Finding] = []
        lines = source.splitlines()
        for name in sorted(self.names.all):
            if _distinctive(name):
                pattern = re.compile(rf"(?<![\w/-]){re.escape(name)}(?![\w/-])")
                found += [
                    Finding(f"{path}:{number}", name, "names")
                    for number, line in enumerate(lines, 1)
                    if pattern.search(line)
                ]
        for name in sorted(self.names.tables):
            variable = "PLUGINS__" + name.upper().replace("-", "_")
            pattern = re.compile(
                rf"plugins\.{re.escape(name)}(?![\w-])|{re.escape(variable)}(?:__|(?!\w))"
                rf"|[\"']plugins[\"'],\s*[\"']{re.escape(name)}[\"']"
            )
            found += [
                Finding(f"{path}:{number}", name, "names the table")
                for number, line in enumerate(lines, 1)
                if pattern.search(line)
            ]
        tree = ast.parse(source)
        prose = {
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in prose
                and node.value in self.names.all
                and not _distinctive(node.value)  # those are found above
                and node.value not in self.allowed_words
            ):
                found.append(Finding(f"{path}:{node.lineno}", node.value, "has the string"))
            if isinstance(node, ast.Compare):
                found += self._compared(path, node)
            if (
                isinstance(node, ast.keyword)
                and node.arg in ("name", "tool_name")
                and isinstance(node.value, ast.Constant)
                and node.value.value in self.names.tools
            ):
                found.append(Finding(f"{path}:{node.lineno}", node.value.value, "names the tool"))
        return found

    def _compared(self, path: Path, node: ast.Compare) -> list[Finding]:
        """``tool.name == "read"``, ``call.name in ("edit", "write")``."""
        sides = [node.left, *node.comparators]
        if not any(isinstance(s, ast.Attribute) and s.attr in ("name", "tool_name") for s in sides):
            return []
        values: list[ast.expr] = []
        for side in sides:
            values += side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
        return [
            Finding(f"{path}:{node.lineno}", value.value, "decides by the tool name")
            for value in values
            if isinstance(value, ast.Constant) and value.value in self.names.tools
        ]


def _distinctive(name: str) -> bool:
    return any(mark in name for mark in "/-_")


# ---------------------------------------------------------------------- tests


def test_the_bundled_plugins_have_names_to_look_for() -> None:
    names = bundled_names()
    assert {"read", "edit", "bash", "terminal_send", "todo_write"} <= names.tools
    assert {"llm-deepseek", "llm-openai-compat", "lsp", "title"} <= names.tables
    assert "todo/write" in names.events
    assert "session-title" in names.purposes


def test_dsh_names_no_bundled_plugins_tool_event_table_or_purpose() -> None:
    names = bundled_names()
    checker = Checker(names)
    sources = python_sources("dsh")
    assert len(sources) > 100
    findings = [
        f for path, source in sources.items() for f in checker.check(path.relative_to(ROOT), source)
    ]
    assert [str(f) for f in findings] == []


def test_the_check_sees_what_it_is_for() -> None:
    """The check passes vacuously if it sees nothing: prove it sees each form."""
    names = Names(
        tools=frozenset({"read", "todo_write", "terminal_send"}),
        events=frozenset({"todo/write", "session/title"}),
        tables=frozenset({"llm-deepseek", "lsp"}),
        purposes=frozenset({"session-title", "compaction"}),
    )
    checker = Checker(names)

    def found(source: str) -> list[tuple[str, str]]:
        return [(f.how, f.name) for f in checker.check(Path("x.py"), source)]

    assert found('if tool.name == "read":\n    pass\n') == [("decides by the tool name", "read")]
    assert found('ok = call.name in ("todo_write", "edit")\n') == [
        ("names", "todo_write"),
        ("decides by the tool name", "todo_write"),
    ]
    assert found("# a terminal_send(python3) rule\n") == [("names", "terminal_send")]
    assert found('"""Writes [plugins.llm-deepseek]."""\n') == [
        ("names", "llm-deepseek"),
        ("names the table", "llm-deepseek"),
    ]
    assert found('x = settings.section("plugins", "lsp")\n') == [
        ("names the table", "lsp"),
        ("has the string", "lsp"),
    ]
    assert found('env = "DSH_PLUGINS__LSP__COMMAND"\n') == [("names the table", "lsp")]
    assert found('kind = "compaction"\n') == [("has the string", "compaction")]
    assert found('spec = ToolCallSpec(name="read")\n') == [("names the tool", "read")]
    assert found('session.append("session/title", x)\n') == [("names", "session/title")]
    # What is not a plugin's name: core words, prose, longer names, other tables.
    assert found('risk = "read"\nk = "todo_writes"\n"""read the file"""\n') == []
    assert found('t = "session/title-llm-request"\nservice = "session-titles"\n') == []
    assert found("from dsh.plugins_x import lsp_client\nplugins.lspx = 1\n") == []


def test_events_only_plugins_write_count_as_theirs() -> None:
    plugin = {Path("p.py"): 'session.append("todo/write", x)\nsession.append("user/message", m)\n'}
    core = {Path("c.py"): 'session.append("user/message", m)\nitems.append("a/b")\n'}
    assert appended_event_types(plugin) - appended_event_types(core) == {"todo/write"}
    declared = 'PURPOSE = Purpose("summary")\nGenerateOptions(purpose="session-title")\n'
    assert call_purposes({Path("p.py"): declared}) == {"summary", "session-title"}
