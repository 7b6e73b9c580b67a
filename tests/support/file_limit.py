"""A process whose files cannot grow past a size, as on a full disk, without root.

``python -m tests.support.file_limit BYTES PROGRAM ARGS...`` sets ``RLIMIT_FSIZE``'s
soft limit to BYTES and becomes PROGRAM: from then on a write that would make any
file longer than BYTES fails with ``EFBIG`` ("File too large"), the way a full disk
fails it with ``ENOSPC`` (Python ignores the ``SIGXFSZ`` that comes with it). Pipes
and terminals are not files: output still flows. The hard limit is left as it is, so
:func:`lift` can give the running process room again, as freeing the disk would.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Sequence

MODULE = "tests.support.file_limit"


def wrapper(limit: int) -> tuple[str, ...]:
    """What to put before a command to run it with files capped at ``limit`` bytes."""
    return (sys.executable, "-m", MODULE, str(limit))


def lift(pid: int) -> None:
    """Let process ``pid`` write files of any size from now on."""
    _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))


def main(argv: Sequence[str]) -> None:
    limit, program = int(argv[0]), list(argv[1:])
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    os.execv(program[0], program)


if __name__ == "__main__":
    main(sys.argv[1:])
