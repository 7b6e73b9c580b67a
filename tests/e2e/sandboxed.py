"""An installation for sandbox tests whose folders lie outside ``/tmp``.

Inside the sandbox ``/tmp`` is a private folder of dsh's own, so a home or a project
under pytest's ``tmp_path`` (in ``/tmp``) is not where a sandboxed command looks for
it: a write to ``~/.bashrc`` there would land in the private folder and prove nothing
about the read-only home. A user's home and projects lie elsewhere, under the host's
``/`` the sandbox binds read-only; ``/var/tmp`` stands in for that place here.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from dsh.testing import FakeLLM
from tests.e2e.harness import Dsh

OUTSIDE_TMP = Path("/var/tmp")


@asynccontextmanager
async def installation_outside_tmp(server: FakeLLM) -> AsyncIterator[Dsh]:
    """A :class:`Dsh` rooted in a fresh folder under ``/var/tmp``, with a ``HOME`` of
    its own there; removed, with any child still running, afterwards."""
    root = Path(tempfile.mkdtemp(prefix="dsh-sandbox-test-", dir=OUTSIDE_TMP))
    installation = Dsh(root, server)
    installation.home_of_its_own()
    try:
        yield installation
    finally:
        await installation.kill_leftovers()
        await asyncio.to_thread(shutil.rmtree, root, True)
