"""``dsh acp``: dsh as the agent of an editor, over the Agent Client Protocol.

The editor (Zed, a JetBrains IDE, any ACP client) starts ``dsh acp`` and speaks
newline-delimited JSON-RPC on its stdin and stdout. It is a front end beside the TUI,
plain mode and ``dsh -p``: each editor session goes through a
:class:`~dsh.ui.session_controller.SessionController` (:mod:`dsh.ui.acp.session`),
the session's events become ``session/update`` notifications
(:mod:`dsh.ui.acp.updates`), approvals become permission requests
(:mod:`dsh.ui.acp.permissions`), and :mod:`dsh.ui.acp.server` answers the methods.

Nothing but the protocol reaches stdout: the protocol gets its own copies of the
standard streams, and stdout and stdin are pointed elsewhere (stderr, /dev/null) for
anything else the process or its children write or read. The log goes to
``$DSH_HOME/logs/acp-DATE.log``. The SDK is imported here only, so ``dsh`` and
``dsh -p`` never load it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from pathlib import Path

from dsh.permission_modes import PermissionMode
from dsh.sandbox.policy import Policy

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def run(
    *,
    home: Path | None = None,
    permission_mode: PermissionMode | None = None,
    sandbox: Policy | None = None,
) -> int:
    from dsh.paths import dsh_home

    log_file = start_log(home or dsh_home())
    protocol_in, protocol_out = claim_stdio()
    from dsh.ui.acp.server import DshAgent, serve

    logging.getLogger("dsh.acp").info("dsh acp started (pid %d)", os.getpid())
    agent = DshAgent(home, permission_mode, sandbox)
    try:
        asyncio.run(serve(agent, protocol_in, protocol_out))
    except KeyboardInterrupt:
        return 130
    except Exception:
        logging.getLogger("dsh.acp").exception("dsh acp failed")
        print(f"dsh acp: failed; see {log_file}", file=sys.stderr)
        return 1
    return 0


def start_log(home: Path) -> Path:
    """Log to ``HOME/logs/acp-DATE.log`` (and nowhere else: stderr is the editor's)."""
    from dsh.paths import private_dir

    # What a session does (paths, commands, errors quoting a tool) is the user's alone.
    folder = private_dir(home / "logs")
    path = folder / f"acp-{time.strftime('%Y-%m-%d')}.log"
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    handler = LogFile(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    # Their INFO lines are every request's URL, which some providers put a key in.
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return path


class LogFile(logging.FileHandler):
    """The log file, which may fail to take a line (a full disk): said once on stderr,
    in one line, rather than a traceback for every line it could not write. It goes on
    trying, and says so again if it failed again after a line went in."""

    failing = False
    _failed_now = False

    def emit(self, record: logging.LogRecord) -> None:
        self._failed_now = False
        super().emit(record)  # a failure comes back through handleError
        if not self._failed_now:
            self.failing = False  # a line went in: the next failure is news again

    def handleError(self, record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        self._failed_now = True
        if self.failing:
            return
        self.failing = True
        with contextlib.suppress(Exception):
            sys.stderr.write(f"dsh acp: the log {self.baseFilename} cannot be written: {error}\n")
            sys.stderr.flush()


def claim_stdio() -> tuple[int, int]:
    """The protocol's own copies of stdin and stdout; fd 1 then goes to stderr and fd 0
    reads /dev/null, so a stray print or a child process cannot corrupt the stream
    nor swallow the editor's messages."""
    sys.stdout.flush()
    protocol_in = os.dup(0)
    protocol_out = os.dup(1)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return protocol_in, protocol_out
