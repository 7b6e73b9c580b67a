"""Rebuilding every model request from a session log alone.

Before each request the loop logs ``request/header``; the request is then exactly the
latest full header (call config, system prompt, tools) plus the history derived from
the log at that point. Tests compare these rebuilt requests with what the scripted
server received, so a request that depended on anything outside the log fails.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dsh.llm import GenerateOptions, SessionId
from dsh.session import Session, SessionEvent, SessionHeader

Body = Callable[[GenerateOptions], dict[str, Any]]


def rebuild_requests(events: Sequence[SessionEvent]) -> list[GenerateOptions]:
    """One :class:`GenerateOptions` per ``request/header`` event, in log order."""
    requests = []
    header = SessionHeader(id=SessionId("rebuild"), created_at=0)
    for index, event in enumerate(events):
        if event.type != "request/header":
            continue
        view = Session(header, events[: index + 1])
        epoch = view.request_header()
        if epoch is None:
            raise AssertionError(f"request/header at seq {event.seq} cites no full header")
        config = epoch.config
        requests.append(
            GenerateOptions(
                provider=config.provider,
                model=config.model,
                messages=tuple(view.derive_messages()),
                reasoning_effort=config.reasoning_effort,
                system=epoch.system,
                tools=epoch.tools,
                temperature=config.temperature,
                max_tokens=config.max_tokens,
                stop=config.stop,
            )
        )
    return requests


def check_requests(events: Sequence[SessionEvent], received: Sequence[Any], body: Body) -> None:
    """Raise AssertionError unless every received request body is the body rebuilt for
    its ``request/header``, in order. A transport retry sends the same body again, so
    repeats of the current request are accepted."""
    expected = [body(options) for options in rebuild_requests(events)]
    position = -1
    for number, sent in enumerate(received):
        if position + 1 < len(expected) and sent == expected[position + 1]:
            position += 1
        elif position < 0 or sent != expected[position]:
            raise AssertionError(
                f"request {number} matches no request rebuilt from the log "
                f"(rebuilt {len(expected)}, matched {position + 1} so far)"
            )
    if position + 1 != len(expected):
        raise AssertionError(f"the log has {len(expected)} requests; {position + 1} were received")
