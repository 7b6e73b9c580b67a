"""A test plugin that reports every batch of events the session store has written.

Loaded by ``dsh -p`` through ``[plugins] modules``, it wraps the store's
``persistence.append``: once an append returns, its events are in the file (the
kernel holds them, so they survive SIGKILL), and the probe writes
``dsh-probe: written <last seq>`` to stderr. A crash test can then demand exactly the
events the process reported as written, rather than guess from timing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from dsh.kernel import Context, Plugin
from dsh.services import SESSIONS
from dsh.session import SessionEvent

MARK = "dsh-probe: written "


def apply(ctx: Context, config: object) -> None:
    store = ctx.get(SESSIONS)
    persistence = store.persistence
    original = persistence.append

    async def append(session_id: Any, events: Sequence[SessionEvent], *, sync: bool = True) -> None:
        await original(session_id, events, sync=sync)
        if events:
            # One write(2) of one short line: it cannot interleave with other output.
            os.write(2, f"{MARK}{events[-1].seq}\n".encode())

    persistence.append = append

    def restore() -> None:
        persistence.append = original

    ctx.effect(lambda: restore)


plugin = Plugin(name="flush-probe", inject=(SESSIONS,), apply=apply)
