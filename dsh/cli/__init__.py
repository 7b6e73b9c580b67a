"""Command-line parsing and dispatch. Each command imports what it needs when it runs,
so that ``dsh --version`` and ``dsh --help`` stay instant."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from dsh import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsh",
        description="An interactive terminal coding agent with durable sessions.",
    )
    parser.add_argument("--version", action="version", version=f"dsh {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    plugins = commands.add_parser(
        "plugins", help="list the plugins found, where from, and which failed to load"
    )
    plugins.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _add_sessions(commands)
    return parser


def _add_sessions(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # The sessions parser lives beside its command; importing it costs nothing heavy.
    from dsh.cli.sessions_parser import add_parser

    add_parser(commands)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    match args.command:
        case "plugins":
            from dsh.cli.plugins import run_plugins

            return run_plugins(as_json=args.json)
        case "sessions":
            from dsh.cli.sessions import run_sessions

            return run_sessions(args)
        case _:
            parser.print_help()
            return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
