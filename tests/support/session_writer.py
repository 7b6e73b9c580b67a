"""A second process that writes sessions, for the one-writer tests.

``python -m tests.support.session_writer HOME BACKEND`` reads commands from stdin,
one a line, and answers each with one JSON line on stdout:

- ``open ID``: open the session to write it (``{"won": true}``) and append a turn at
  once, or say why not (``{"won": false, "error": ..., "busy": ...}``);
- ``close``: append one more turn, close the session (``{"closed": true}``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from dsh.session import SessionBusyError, SessionStore
from tests.session.turns import complete_turn


def say(value: object) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


async def main(home: Path, backend: str) -> None:
    store = SessionStore.at(home, backend)  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    session = None
    try:
        while line := (await loop.run_in_executor(None, sys.stdin.readline)).strip():
            command, _, argument = line.partition(" ")
            if command == "open":
                try:
                    session = await store.open(argument)
                except SessionBusyError as error:
                    say({"won": False, "busy": True, "error": str(error)})
                    continue
                complete_turn(session, f"from {os.getpid()}", "first", with_tool=False)
                await store.flush(session)
                say({"won": True, "pid": os.getpid()})
            elif command == "close" and session is not None:
                complete_turn(session, f"from {os.getpid()}", "second", with_tool=True)
                await store.close(session)
                session = None
                say({"closed": True})
    finally:
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
