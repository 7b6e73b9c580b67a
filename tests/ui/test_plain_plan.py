"""Plan mode in plain mode: the plan review as a text prompt, and the permission mode's
changes said as lines."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prompt_toolkit.input import PipeInput

from dsh.hooks import PLAN_REVIEW
from dsh.runtime import Runtime
from dsh.services import APPROVALS
from dsh.tools.plan_review import PlanDecision, PlanReview
from dsh.ui.plain_dialogs import PLAN_PROMPT, parse_plan_reply
from tests.ui.plain_support import TIMEOUT, Plain

PLAN = """# Rename the config loader

1. Rename `load()` to `read_settings()` in *settings.py*.
2. Update the [callers](https://example.com/callers).

Risk: plugins calling `load()` break.
"""


def review(plan: str = PLAN, *, agent_label: str | None = None) -> PlanReview:
    return PlanReview(id="r1", session_id="s1", call_id="c1", plan=plan, agent_label=agent_label)


async def reviewed(runtime: Runtime, plan: PlanReview) -> PlanDecision | None:
    """Asked as the approvals service asks: through the hook."""
    return await runtime.root.serial(PLAN_REVIEW, plan)


def test_plan_replies_are_a_number_a_name_or_a_note() -> None:
    assert parse_plan_reply("1") == PlanDecision(outcome="accept-edits")
    assert parse_plan_reply(" 2 ") == PlanDecision(outcome="default")
    assert parse_plan_reply("3") == PlanDecision(outcome="keep-planning")
    assert parse_plan_reply("Accept edits") == PlanDecision(outcome="accept-edits")
    assert parse_plan_reply("approve, ask as usual") == PlanDecision(outcome="default")
    assert parse_plan_reply("keep-planning.") == PlanDecision(outcome="keep-planning")
    # Anything else is the note, as typed: a number that starts a sentence approves
    # nothing.
    assert parse_plan_reply("2 files are missing from step 1") == PlanDecision(
        outcome="keep-planning", note="2 files are missing from step 1"
    )
    assert parse_plan_reply("  Also update the docs ") == PlanDecision(
        outcome="keep-planning", note="Also update the docs"
    )
    assert parse_plan_reply("4") == PlanDecision(outcome="keep-planning", note="4")
    # An Enter pressed too soon is asked again.
    assert parse_plan_reply("") is None
    assert parse_plan_reply("   ") is None


def test_the_prompt_offers_the_three_answers_in_order() -> None:
    assert PLAN_PROMPT == (
        "Plan: [1] approve, accept edits / [2] approve, ask as usual / [3] keep planning "
        "(or type a note to keep planning): "
    )


async def test_the_plan_is_printed_as_markdown_and_a_number_approves_it(
    runtime: Runtime, pipe: PipeInput, tmp_path: Path
) -> None:
    plain = Plain(runtime, pipe, tmp_path)
    await plain.wait_for("Ctrl+D to quit")
    deciding = asyncio.create_task(reviewed(runtime, review()))
    text = await plain.wait_for("Risk: plugins calling load() break.\n")
    assert "? The plan is ready:" in text
    shown = text[text.index("The plan is ready:") :]
    # Rendered: no Markdown marks left, the link's address shown beside its text, no
    # blanks padding the lines.
    assert "  Rename the config loader\n" in shown
    assert "Rename the config loader" in shown
    assert "# Rename" not in shown
    assert "*settings.py*" not in shown
    assert "settings.py" in shown
    assert "callers (https://example.com/callers)" in shown
    assert "Risk: plugins calling load() break." in shown
    plain.type("\r")  # too soon: asked again, nothing approved
    await plain.wait_for("Please answer 1, 2 or 3, or type a note.")
    assert not deciding.done()
    plain.type("1\r")
    decision = await asyncio.wait_for(deciding, TIMEOUT)
    assert decision == PlanDecision(outcome="accept-edits")
    assert await plain.quit() == 0


async def test_other_words_send_the_plan_back_with_them_as_the_note(
    runtime: Runtime, pipe: PipeInput, tmp_path: Path
) -> None:
    plain = Plain(runtime, pipe, tmp_path)
    await plain.wait_for("Ctrl+D to quit")
    deciding = asyncio.create_task(reviewed(runtime, review()))
    await plain.wait_for("Risk: plugins calling load() break.\n")
    plain.type("keep load() as an alias\r")
    decision = await asyncio.wait_for(deciding, TIMEOUT)
    assert decision == PlanDecision(outcome="keep-planning", note="keep load() as an alias")
    assert await plain.quit() == 0


async def test_the_models_bytes_in_a_plan_are_shown_as_pictures(
    runtime: Runtime, pipe: PipeInput, tmp_path: Path
) -> None:
    plain = Plain(runtime, pipe, tmp_path)
    await plain.wait_for("Ctrl+D to quit")
    hostile = review(
        "# Plan\x1b]2;pwned\x07\n\nStep one \x1b[2J done.\n", agent_label="explore\x1b[31m"
    )
    deciding = asyncio.create_task(reviewed(runtime, hostile))
    text = await plain.wait_for("done.\n")
    assert "subagent: explore␛[31m" in text
    assert "␛]2;pwned␇" in text
    assert "␛[2J" in text
    assert "\x1b]2;" not in text
    assert "\x1b[2J" not in text
    plain.type("3\r")
    decision = await asyncio.wait_for(deciding, TIMEOUT)
    assert decision == PlanDecision(outcome="keep-planning")
    assert await plain.quit() == 0


async def test_ctrl_c_cancels_the_review_and_the_end_of_input_leaves_it_unreviewed(
    runtime: Runtime, pipe: PipeInput, tmp_path: Path
) -> None:
    plain = Plain(runtime, pipe, tmp_path)
    await plain.wait_for("Ctrl+D to quit")
    deciding = asyncio.create_task(reviewed(runtime, review()))
    await plain.wait_for("Risk: plugins calling load() break.\n")
    plain.type("\x03")
    assert await asyncio.wait_for(deciding, TIMEOUT) == PlanDecision(outcome="cancelled")
    deciding = asyncio.create_task(reviewed(runtime, review()))
    await plain.wait_for("Risk: plugins calling load() break.\n", count=2)
    plain.type("\x04")  # Ctrl+D: nobody answers any more
    assert await asyncio.wait_for(deciding, TIMEOUT) == PlanDecision(outcome="unavailable")
    assert await plain.quit() == 0


async def test_each_change_of_permission_mode_is_said_in_a_line(
    runtime: Runtime, pipe: PipeInput, tmp_path: Path
) -> None:
    plain = Plain(runtime, pipe, tmp_path)
    await plain.wait_for("Ctrl+D to quit")
    # As an approved plan changes it: the approvals service, not a command.
    runtime.root.get(APPROVALS).mode = "accept-edits"
    await plain.wait_for("Permission mode is now accept-edits\n")
    plain.type("/permissions plan\r")
    await plain.wait_for("Permission mode is now plan\n")
    plain.type("/permissions plan\r")  # no change: nothing more said
    await plain.wait_for("Permission mode: plan", count=2)
    assert plain.text.count("Permission mode is now") == 2
    assert await plain.quit() == 0
