"""The arguments of ``dsh sessions``, kept apart from the command so ``--help`` stays light."""

from __future__ import annotations

import argparse


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sessions = commands.add_parser("sessions", help="list, search, show and export past sessions")
    sub = sessions.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = sub.add_parser("list", help="sessions of this directory, newest first")
    listing.add_argument("--all", action="store_true", help="sessions of every directory")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--json", action="store_true")

    show = sub.add_parser("show", help="a session's transcript")
    show.add_argument("id", help="session id or a unique prefix of one")

    search = sub.add_parser("search", help="find sessions by what was said in them")
    search.add_argument("text", nargs="+")
    search.add_argument("--here", action="store_true", help="only this directory's sessions")
    search.add_argument("--limit", type=int, default=20)

    export = sub.add_parser(
        "export", help="write a session out as JSONL, Markdown, or a replay file"
    )
    export.add_argument("id")
    export.add_argument(
        "--format",
        choices=["jsonl", "markdown", "replay"],
        default="jsonl",
        help="replay: one redacted file for `dsh replay` and tests (see docs/replay.md)",
    )
    export.add_argument("-o", "--output", help="file to write (default: standard output)")

    fork = sub.add_parser(
        "fork", help="a new session holding a session's conversation up to a turn"
    )
    fork.add_argument("id", help="session id or a unique prefix of one")
    fork.add_argument(
        "--at",
        type=int,
        metavar="TURN",
        help="through the end of this turn (default: its last finished turn)",
    )
    fork.add_argument(
        "--code",
        action="store_true",
        help="also put the project's files back as the agent left them at that turn's "
        "end (what was changed by hand since is left alone)",
    )

    importing = sub.add_parser("import", help="store a session exported as JSONL")
    importing.add_argument("file")

    remove = sub.add_parser("rm", help="delete a session")
    remove.add_argument("id")
    remove.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")

    sub.add_parser("reindex", help="rebuild the session index from the stored sessions")
