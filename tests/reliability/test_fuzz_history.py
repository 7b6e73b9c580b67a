"""Fuzzing ``derive_messages`` over random valid logs: the projection is always a
history a chat-completions provider accepts, whatever the log went through (tool
calls, cancels, interrupted and empty answers, resumes, compaction, a crash closed by
repair), and it is the same however it was derived."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dsh.session import Session, check_log
from dsh.session.repair import closing_events
from tests.reliability.logs import provider_problems, valid_logs
from tests.reliability.profiles import fuzz


@fuzz(200)
@given(valid_logs())
def test_the_history_of_any_valid_log_is_provider_valid(session: Session) -> None:
    assert check_log(session.events) == []
    history = session.derive_messages()
    assert provider_problems(history) == []
    # Derived once from the stored events (a resume), it is the same history.
    again = Session(session.header, list(session.events)).derive_messages()
    assert again == history


@fuzz(100)
@given(valid_logs(crash=False), st.data())
def test_every_prefix_closed_by_repair_is_provider_valid(
    session: Session, data: st.DataObject
) -> None:
    # The process can die after any event: what the next one loads must still be sound.
    events = list(session.events)
    cut = data.draw(st.integers(1, len(events)))
    kept = events[:cut]
    repaired = Session(session.header, kept + closing_events(kept))
    assert check_log(repaired.events) == []
    assert provider_problems(repaired.derive_messages()) == []
