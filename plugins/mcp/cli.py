"""``dsh mcp list|get|add|remove|login|logout``: the servers from the command line.

``list`` and ``get`` start a runtime for the folder (the servers with it, as
``dsh -p`` would) and report how each start ended. ``add`` and ``remove`` edit the
``[mcp.servers.NAME]`` table of the user's settings (``--scope project``: the
folder's ``.dsh/settings.toml``), keeping the rest of the file as it was. ``login``
starts the runtime too, then starts the one server again with a person at the
browser (:mod:`dsh_plugins.mcp.login`); ``logout`` deletes its stored tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dsh.control_chars import visible
from dsh.kernel import CliCommand, CliHost
from dsh.paths import dsh_home
from dsh_plugins.mcp.config import TABLE, ServerConfig
from dsh_plugins.mcp.service import MCP, McpService, status_lines

SETTINGS_FILE = "settings.toml"


class _CommandAfterDashes(argparse.ArgumentParser):
    """Everything after the first ``--`` is the server's command (``args.command``).

    argparse alone cannot read ``NAME --scope project -- ./server -y``: it takes NAME
    and an empty command together, then finds ``-- ./server`` unrecognized, or, with a
    REMAINDER command, swallows every option after NAME into it."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        words = list(sys.argv[1:] if args is None else args)
        tail: list[str] = []
        if "--" in words:
            at = words.index("--")
            words, tail = words[:at], words[at + 1 :]
        parsed, extras = super().parse_known_args(words, namespace)
        if tail and self.get_default("command") is None:
            self.error(f"unrecognized arguments: -- {' '.join(tail)}")
        if self.get_default("command") is not None:
            parsed.command = tail
        return parsed, extras


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, parser_class=_CommandAfterDashes)
    listing = actions.add_parser("list", help="every server's state, tools and last error")
    listing.add_argument("--json", action="store_true", help="print JSON")
    get = actions.add_parser("get", help="one server: where it is, its state and tools")
    get.add_argument("name")
    add = actions.add_parser(
        "add",
        usage="dsh mcp add NAME [options] -- COMMAND [ARGS...]\n"
        "       dsh mcp add NAME --url URL [options]",
        help="add a server: NAME -- COMMAND [ARGS...], or NAME --url URL",
        description="dsh mcp add github -- npx -y @modelcontextprotocol/server-github\n"
        "dsh mcp add tracker --url https://mcp.example.com/mcp --header 'Authorization: "
        "Bearer ${TOKEN}'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add.add_argument("name")
    add.add_argument("--url", help="a Streamable HTTP (or, with --transport sse, SSE) endpoint")
    add.add_argument("--transport", choices=["stdio", "http", "sse"])
    add.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="write ${VAR} for secrets"
    )
    add.add_argument(
        "--header", action="append", default=[], metavar="NAME: VALUE", help="an HTTP header"
    )
    add.add_argument("--scope", choices=["user", "project"], default="user")
    add.set_defaults(command=[])  # what follows ``--``: see _CommandAfterDashes
    remove = actions.add_parser("remove", help="remove a server from the settings")
    remove.add_argument("name")
    remove.add_argument("--scope", choices=["user", "project"], default="user")
    login = actions.add_parser(
        "login", help="log in to a remote server that asks for it (OAuth, in your browser)"
    )
    login.add_argument("name")
    logout = actions.add_parser("logout", help="forget the login of a server (its tokens)")
    logout.add_argument("name")


def run(args: argparse.Namespace, host: CliHost) -> int:
    try:
        match args.action:
            case "list" | "get":
                return asyncio.run(_report(args, host))
            case "add":
                return _add(args)
            case "remove":
                return _remove(args)
            case "login":
                return asyncio.run(_login(args, host))
            case "logout":
                return _logout(args)
    except _Refused as refused:
        print(f"dsh mcp: {refused}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"dsh mcp: {args.action} cancelled", file=sys.stderr)
        return 130
    return 2


class _Refused(Exception):
    pass


async def _report(args: argparse.Namespace, host: CliHost) -> int:
    async with host.runtime() as root:
        service: McpService | None = root.get(MCP, None)
        if service is None:
            raise _Refused("the mcp plugin is not loaded (see `dsh plugins`)")
        await service.settled()
        if args.action == "get":
            found = service.connections.get(args.name)
            if found is None:
                raise _Refused(f"no server named {args.name!r} (`dsh mcp list` shows them)")
            status = found.status()
            print(f"{status.name}: {status.state}")
            print(f"  {visible(status.where, one_line=True)} ({found.config.transport})")
            if status.reason:
                print(f"  {visible(status.reason, one_line=True)}")
            for tool in status.tools:
                print(f"  tool {tool}")
            for name in sorted(found.prompts):
                print(f"  prompt /{name}")
            for line in status.stderr.splitlines()[-5:] if status.state == "failed" else []:
                print(f"  stderr: {visible(line, one_line=True)}")
            return 0 if status.state == "ready" else 1
        if args.json:
            print(
                json.dumps(
                    {
                        "problems": service.problems,
                        "servers": [
                            {
                                "name": s.name,
                                "where": s.where,
                                "state": s.state,
                                "reason": s.reason,
                                "tools": s.tools,
                            }
                            for s in service.statuses()
                        ],
                    },
                    indent=2,
                )
            )
        else:
            print("\n".join(status_lines(service)))
        return 0


async def _login(args: argparse.Namespace, host: CliHost) -> int:
    from dsh_plugins.mcp.auth import FileTokenStorage
    from dsh_plugins.mcp.login import Login

    name = args.name
    async with host.runtime() as root:
        service: McpService | None = root.get(MCP, None)
        if service is None:
            raise _Refused("the mcp plugin is not loaded (see `dsh plugins`)")
        await service.started()
        found = service.connections.get(name)
        if found is None:
            raise _Refused(f"no server named {name!r} (`dsh mcp list` shows them)")
        config = found.config
        if config.transport == "stdio" or config.url is None:
            raise _Refused(
                f"{name} is a stdio server: dsh runs it here and it takes its keys from its "
                "`env`; only remote (http, sse) servers log in"
            )
        if any(key.lower() == "authorization" for key in config.headers):
            raise _Refused(
                f"{name} sends an Authorization header of its own (`headers`); remove it "
                "to log in with OAuth instead"
            )
        await found.settled.wait()  # its normal start: no browser, just how it went
        if found.state == "ready":
            print(
                f"{name} is ready: already logged in, or it asks for no login "
                f"(`dsh mcp logout {name}` forgets a login)."
            )
            return 0
        # Registered again at each login: the old registration names another port
        # for its redirect, and the server may have dropped it (then its login page
        # would fail and never come back).
        await FileTokenStorage(name, config.url).forget_client()
        login = Login(name)
        await login.start()
        try:
            connection = service.login(name, login)
            assert connection is not None
            await connection.settled.wait()
        finally:
            await login.aclose()
        status = connection.status()
        if status.state != "ready":
            reason = visible(status.reason or status.state, one_line=True)
            raise _Refused(f"login to {name} failed: {reason}")
        count = len(status.tools)
        print(f"logged in to {name} ({count} tool{'s' if count != 1 else ''})")
        return 0


def _logout(args: argparse.Namespace) -> int:
    from dsh_plugins.mcp.auth import forget

    if not forget(args.name):
        raise _Refused(f"no stored login for {args.name!r}")
    print(f"logged out of {args.name}: its tokens are deleted (the server is not told)")
    return 0


def _settings_path(scope: str) -> Path:
    if scope == "project":
        return Path.cwd() / ".dsh" / SETTINGS_FILE
    return dsh_home() / SETTINGS_FILE


def _pairs(items: list[str], separator: str, what: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition(separator)
        if not sep or not key.strip():
            raise _Refused(f"{what} {item!r}: write it KEY{separator}VALUE")
        pairs[key.strip()] = value.strip() if separator == ":" else value
    return pairs


def _add(args: argparse.Namespace) -> int:
    import tomlkit

    command = list(args.command)
    entry: dict[str, Any] = {}
    if args.url and command:
        raise _Refused("give a command (after --) or --url, not both")
    if command:
        entry["command"], entry["args"] = command[0], command[1:]
    elif args.url:
        entry["url"] = args.url
    else:
        raise _Refused("give the server's command after --, or --url URL")
    if args.transport:
        entry["type"] = args.transport
    if args.env:
        entry["env"] = _pairs(args.env, "=", "--env")
    if args.header:
        entry["headers"] = _pairs(args.header, ":", "--header")
    try:
        ServerConfig.model_validate(entry)
    except ValidationError as error:
        raise _Refused(str(error.errors()[0]["msg"])) from None
    path = _settings_path(args.scope)
    document = _read(path)
    servers = _servers(document, create=True)
    if args.name in servers:
        raise _Refused(f"{path} already has a server named {args.name!r}")
    table = tomlkit.table()
    for key, value in entry.items():
        if isinstance(value, dict):
            inline = tomlkit.inline_table()
            inline.update(value)
            table[key] = inline
        else:
            table[key] = value
    servers[args.name] = table
    _write(path, document)
    print(f"Added the MCP server {args.name} to {path}.")
    if args.scope == "project":
        print("A project's servers start only in a trusted folder (`dsh trust`).")
    return 0


def _remove(args: argparse.Namespace) -> int:
    path = _settings_path(args.scope)
    document = _read(path)
    servers = _servers(document, create=False)
    if servers is None or args.name not in servers:
        raise _Refused(f"{path} has no server named {args.name!r}")
    del servers[args.name]
    _write(path, document)
    print(f"Removed the MCP server {args.name} from {path}.")
    return 0


def _read(path: Path) -> Any:
    import tomlkit

    try:
        return tomlkit.parse(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return tomlkit.document()
    except (OSError, ValueError) as error:
        raise _Refused(f"{path}: cannot be read ({error})") from None


def _servers(document: Any, *, create: bool) -> Any:
    import tomlkit

    mcp = document.get(TABLE)
    if mcp is None:
        if not create:
            return None
        mcp = tomlkit.table(is_super_table=True)
        document[TABLE] = mcp
    servers = mcp.get("servers")
    if servers is None:
        if not create:
            return None
        servers = tomlkit.table(is_super_table=True)
        mcp["servers"] = servers
    return servers


def _write(path: Path, document: Any) -> None:
    """The whole file replaced at once, with the mode it had (0600 when new)."""
    import tomlkit

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(tomlkit.dumps(document))
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


COMMAND = CliCommand(
    name="mcp",
    help="MCP servers: list, get, add, remove, login, logout",
    configure=configure,
    run=run,
)
