"""``dsh trust`` and ``dsh untrust``: the user's decisions about project folders.

``dsh trust [PATH]`` trusts the project holding PATH (the current directory by
default): its git root, else the folder itself. Its ``.dsh/settings.toml`` and
``.env`` then apply in full. ``dsh trust --list`` shows every decision;
``dsh untrust PATH`` records "don't trust", so only settings that narrow what dsh
does apply there and no dialog asks again. A folder that no longer exists is
simply forgotten.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from dsh.control_chars import visible
from dsh.paths import dsh_home

if TYPE_CHECKING:
    from dsh.trust import TrustStore


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    trust = commands.add_parser(
        "trust", help="trust a project folder: its own dsh configuration applies in full"
    )
    trust.add_argument("path", nargs="?", help="a folder in the project (default: here)")
    trust.add_argument("--list", action="store_true", help="every folder decided, and how")
    untrust = commands.add_parser(
        "untrust", help="stop trusting a project folder: its configuration may only narrow"
    )
    untrust.add_argument("path", help="a folder in the project")


def run_trust(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    from dsh.settings import SettingsError, load_settings
    from dsh.trust import TrustStore, project_root

    home = dsh_home()
    store = TrustStore(home)
    try:
        if args.command == "trust" and args.list:
            if args.path:
                err.write("dsh trust: --list takes no path\n")
                return 2
            return _list(store, out)
        target = Path(args.path or ".").expanduser().absolute()
        if not target.exists():
            if args.command == "untrust" and store.forget(target):
                out.write(f"Forgot {visible(str(target), one_line=True)} (it no longer exists).\n")
                return 0
            err.write(
                f"dsh {args.command}: {visible(str(target), one_line=True)}: no such folder\n"
            )
            return 1
        folder = target if target.is_dir() else target.parent
        root = project_root(folder)
        shown = visible(str(root), one_line=True)
        if args.command == "untrust":
            store.decide(root, False)
            out.write(
                f"Not trusted: {shown}. Its own configuration may only narrow what dsh does.\n"
            )
            return 0
        try:
            before = load_settings(home, folder, trust=False, check=False).ignored
        except SettingsError:
            before = ()  # a broken settings file: dsh says so when it starts there
        store.decide(root, True)
        out.write(f"Trusted {shown}: its own configuration applies in full.\n")
        for item in before:
            out.write(f"  now applied: {item.key} = {item.value}\n")
        return 0
    except SettingsError as error:  # the trust store's own errors among them
        err.write(f"dsh {args.command}: {error}\n")
        return 1


def _list(store: TrustStore, out: TextIO) -> int:
    decisions = store.decisions()
    if not decisions:
        out.write("No folder decided yet: every project's configuration may only narrow.\n")
        return 0
    for decision in sorted(decisions, key=lambda d: str(d.root)):
        state = "trusted  " if decision.trusted else "untrusted"
        when = f"  (since {decision.decided})" if decision.decided else ""
        out.write(f"{state}  {visible(str(decision.root), one_line=True)}{when}\n")
    return 0
