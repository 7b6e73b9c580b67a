"""``dsh config``: read and change settings from the command line.

``path`` names the documents; ``list`` shows every key in force and which layer set
it; ``get KEY`` prints one value; ``set KEY VALUE`` and ``unset KEY`` change the user
document (``--project``: the project's), keeping its comments and layout. A value is
checked before it is written: core tables against their models, a plugin's table
against the plugin's own configuration model. Credentials are refused: settings name
them (``api_key_env``), the credential store keeps them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, TextIO

from dsh.paths import PROJECT_DIR, USER_FILE, dsh_home
from dsh.settings import (
    CORE_TABLES,
    Settings,
    SettingsError,
    TableProblem,
    load_settings,
    parse_value,
    project_document,
    table_default,
    validate_table,
    write_private,
)

KEY = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
SECRET_KEY = re.compile(r"(api_?key|token|secret|password)$", re.IGNORECASE)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    config = commands.add_parser("config", help="show and change settings")
    sub = config.add_subparsers(dest="action", metavar="ACTION", required=True)
    sub.add_parser("path", help="where the settings documents are")
    listing = sub.add_parser("list", help="every key in force, and where it was set")
    listing.add_argument("--json", action="store_true")
    get = sub.add_parser("get", help="one value")
    get.add_argument("key", help="a dotted key, such as agent.model")
    setting = sub.add_parser("set", help="set a key in the user (or project) document")
    setting.add_argument("key")
    setting.add_argument("value", help='a TOML value (8, true, ["a"]) or plain text')
    setting.add_argument("--project", action="store_true", help="in .dsh/settings.toml here")
    unset = sub.add_parser("unset", help="remove a key from the user (or project) document")
    unset.add_argument("key")
    unset.add_argument("--project", action="store_true")


def run_config(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    home, cwd = dsh_home(), Path.cwd()
    try:
        match args.action:
            case "path":
                return _path(home, cwd, out)
            case "list":
                return _list(load_settings(home, cwd), out, as_json=args.json)
            case "get":
                return _get(load_settings(home, cwd), _key(args.key), out, err)
            case "set":
                code = _set(home, cwd, _key(args.key), args.value, args.project, out)
                if args.project:
                    _untrusted_note(load_settings(home, cwd, check=False), args.key, err)
                return code
            case "unset":
                return _unset(home, cwd, _key(args.key), args.project, out, err)
    except SettingsError as error:
        err.write(f"dsh config: {error}\n")
        return 1
    return 2


def _untrusted_note(settings: Settings, key: str, err: TextIO) -> None:
    for item in settings.ignored:
        if item.key != key and not item.key.startswith(f"{key}."):
            continue
        if item.trust_applies:
            err.write(
                f"note: {key} does not apply while {settings.root} is not trusted "
                f"({item.reason}); `dsh trust` applies it\n"
            )
        else:
            err.write(
                f"note: {key} does not apply ({item.reason}): a project's settings, "
                "trusted or not, may only narrow it\n"
            )
        return


def _key(text: str) -> list[str]:
    if not KEY.match(text):
        raise SettingsError(f"{text!r} is not a dotted key such as agent.model")
    return text.split(".")


def _path(home: Path, cwd: Path, out: TextIO) -> int:
    user = home / USER_FILE
    project = project_document(cwd)
    out.write(f"user:    {user}{'' if user.is_file() else ' (not created yet)'}\n")
    if project is not None:
        out.write(f"project: {project}\n")
    else:
        out.write(f"project: {cwd / PROJECT_DIR / USER_FILE} (not created yet)\n")
    return 0


def _flatten(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _list(settings: Settings, out: TextIO, *, as_json: bool) -> int:
    origins: dict[str, str] = {}
    for document in settings.documents:
        for key in _flatten(document.values):
            origins[key] = str(document.path)
    flat = _flatten(settings.merged)
    if as_json:
        rows: list[dict[str, Any]] = [
            {"key": k, "value": v, "origin": origins.get(k)} for k, v in sorted(flat.items())
        ]
        # Keys of an untrusted project that are not in force: their value as shown
        # (escaped), and why.
        rows += [
            {
                "key": item.key,
                "value": item.value,
                "origin": str(settings.project),
                "applied": False,
                "reason": item.reason,
            }
            for item in settings.ignored
        ]
        out.write(json.dumps(rows, indent=2) + "\n")
        return 0
    if not flat:
        out.write("(no settings: every key has its default)\n")
    for key, value in sorted(flat.items()):
        out.write(f"{key} = {_toml(value)}    # {origins.get(key, '?')}\n")
    if settings.ignored:
        out.write(f"# not applied: {settings.root} is not trusted (`dsh trust` applies them)\n")
        for item in settings.ignored:
            out.write(f"# {item.line()}\n")
    return 0


def _toml(value: Any) -> str:
    import tomlkit

    return str(tomlkit.item(value).as_string())


def _default(key: list[str]) -> tuple[bool, Any]:
    """The built-in default of a core key, if it has one."""
    if key[0] not in CORE_TABLES or len(key) != 2:
        return False, None
    return table_default(key[0], key[1])


def _get(settings: Settings, key: list[str], out: TextIO, err: TextIO) -> int:
    node: Any = settings.merged
    for part in key:
        if not isinstance(node, dict) or part not in node:
            known, default = _default(key)
            if known and default is not None:
                out.write(f"{_toml(default)}\n")
                err.write("(the default: no settings document sets it)\n")
                return 0
            err.write(f"dsh config: {'.'.join(key)} is not set\n")
            return 1
        node = node[part]
    out.write(f"{_toml(node)}\n")
    return 0


def _document_path(home: Path, cwd: Path, project: bool) -> Path:
    if not project:
        return home / USER_FILE
    return project_document(cwd) or cwd / PROJECT_DIR / USER_FILE


def _check(key: list[str], value: Any) -> None:
    """Refuse a value its table's model would refuse at startup."""
    if SECRET_KEY.search(key[-1]):
        raise SettingsError(
            f"{'.'.join(key)} looks like a credential; settings never hold one. Name an "
            'environment variable instead (api_key_env = "MY_KEY") or let dsh\'s setup '
            "store the key in its credential file"
        )
    if key[0] in CORE_TABLES:
        if len(key) != 2:
            raise SettingsError(f"{key[0]} takes plain keys, such as {key[0]}.{key[-1]}")
        try:
            validate_table(key[0], {key[1]: value})
        except TableProblem as problem:
            raise SettingsError(f"{'.'.join(key)}: {problem.msg}") from None
        return
    from pydantic import ValidationError

    if key[0] == "plugins" and len(key) >= 3:
        from dsh.kernel import discover

        found = {c.name: c.plugin for c in discover() if c.plugin is not None}
        plugin = found.get(key[1])
        if plugin is None:
            raise SettingsError(
                f"no plugin named {key[1]!r}; known: {', '.join(sorted(found)) or 'none'}"
            )
        model = plugin.config
        if model is None:
            raise SettingsError(f"plugin {key[1]} takes no settings")
        table: dict[str, Any] = {}
        node = table
        for part in key[2:-1]:
            node = node.setdefault(part, {})
        node[key[-1]] = value
        try:
            model.model_validate(table)
        except ValidationError as error:
            raise SettingsError(f"{'.'.join(key)}: {error.errors()[0]['msg']}") from None


def _set(home: Path, cwd: Path, key: list[str], text: str, project: bool, out: TextIO) -> int:
    import tomlkit

    value = parse_value(text)
    _check(key, value)
    path = _document_path(home, cwd, project)
    document = _read(path)
    node: Any = document
    for part in key[:-1]:
        if part not in node:
            node[part] = tomlkit.table()
        node = node[part]
        if not isinstance(node, dict):
            raise SettingsError(f"{path}: {part} is not a table")
    node[key[-1]] = value
    write_private(path, tomlkit.dumps(document))
    out.write(f"{'.'.join(key)} = {_toml(value)}    # {path}\n")
    return 0


def _unset(home: Path, cwd: Path, key: list[str], project: bool, out: TextIO, err: TextIO) -> int:
    import tomlkit

    path = _document_path(home, cwd, project)
    document = _read(path)
    node: Any = document
    for part in key[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict) or key[-1] not in node:
        err.write(f"dsh config: {'.'.join(key)} is not set in {path}\n")
        return 1
    del node[key[-1]]
    write_private(path, tomlkit.dumps(document))
    out.write(f"removed {'.'.join(key)} from {path}\n")
    return 0


def _read(path: Path) -> Any:
    import tomlkit

    if not path.is_file():
        return tomlkit.document()
    try:
        return tomlkit.parse(path.read_text(encoding="utf-8"))
    except Exception as error:  # tomlkit's parse errors share no public base class
        raise SettingsError(f"{path}: not valid TOML: {error}") from None
