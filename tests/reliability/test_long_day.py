"""Flat over a long day: one dsh process through 1,000 model requests (issue 34).

``dsh --plain`` reads a script of 20 sessions (``/new`` between them) of 5 turns of
10 requests (9 ``echo`` tool steps, then an answer), against the scripted server,
which keeps connections alive for one session and closes each after its response for
the next (see :mod:`tests.reliability.soak`). Every request must complete, and the
process must stay flat: its open file descriptors and sockets bounded, its resident
memory done growing once it is warm. The history a request carries is the same size
in every session, so growth would be the process holding on to what it should let
go. How fast it goes is bench/soak.py's business (10,000 requests, plotted): no
figure here is a duration.
"""

from __future__ import annotations

from pathlib import Path

from tests.reliability.soak import Plan, soak
from tests.support.waits import HANG_S

PLAN = Plan(sessions=20, turns=5, steps=10)
EVERY = 50
WARM = 300
"""Requests after which the process is warm: every module it uses is loaded, and its
allocator has the arenas a session needs."""
GROWTH_LIMIT_KIB = 16 * 1024
"""What resident memory may still grow from request 300 to 1,000: about three times
what it does (imports and allocator arenas settling); a leak of a connection, a
generator or a session a request (the 101st-request bug leaked several MB a turn)
passes it long before the end."""
SOCKET_LIMIT = 6
"""The event loop's own pair, the pooled connection, one closing: with room."""
FD_MARGIN = 20
"""Above the first reading: a turn's git runs open pipes for a moment."""


async def test_one_process_goes_through_a_thousand_requests_and_stays_flat(
    tmp_path: Path,
) -> None:
    run = await soak(tmp_path, PLAN, every=EVERY, limit_s=10 * HANG_S)

    assert run.code == 0, run.stderr[-3000:]
    # Every request completed: answered whole, none left half-read or retried.
    assert len(run.requests) == PLAN.requests, run.stderr[-3000:]
    assert all(r.status == 200 for r in run.requests)
    assert all(r.finished_at is not None for r in run.requests)
    assert all(r.disconnected_at is None for r in run.requests)
    assert run.stdout.count("Turn done after request") == PLAN.sessions * PLAN.turns
    assert "retry" not in run.stdout
    assert "completed" in run.stdout
    # Both kinds of server: connections reused through the sessions that keep them
    # alive, one a request through those that close them.
    connections = {r.connection for r in run.requests}
    closing = PLAN.requests // 2
    assert closing <= len(connections) < closing + 10 * PLAN.sessions

    readings = run.readings
    assert len(readings) >= PLAN.requests // EVERY - 1, "the process was not read"
    assert max(r.sockets for r in readings) <= SOCKET_LIMIT, readings
    assert max(r.fds for r in readings) <= readings[0].fds + FD_MARGIN, readings
    warm = next(r for r in readings if r.requests >= WARM)
    grown = max(r.rss_kib for r in readings) - warm.rss_kib
    assert grown <= GROWTH_LIMIT_KIB, [(r.requests, r.rss_kib) for r in readings]
