"""The ``prompt/mentions`` hook: what plugins offer for an ``@`` is shown among the
files, and an offer that would put whitespace or terminal controls into the prompt,
or a plugin that fails or hangs, changes nothing but its own choices."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dsh.agent import AgentHandle, MentionChoice
from dsh.hooks import PROMPT_MENTIONS
from dsh.kernel import Candidate, Context, Plugin
from dsh.runtime import Runtime
from dsh.testing import FakeLLM
from dsh.ui.tui.completion import Choice, with_mentions
from dsh.ui.tui.prompt_input import CompletionMenu
from tests.ui.tui_support import tui, type_text, until

HOSTILE = [
    MentionChoice("@evil:\x1b]52;c;cm0gLXJmIH4=\x07", "evil:clipboard"),
    MentionChoice("@evil:a\nrm -rf ~", "evil:newline"),
    MentionChoice("@evil:two words", "evil:space"),
    MentionChoice("evil:no-at", "evil:no-at"),
]


def test_only_one_visible_at_token_is_usable() -> None:
    assert MentionChoice("@tracker:issue/12", "x").usable()
    assert not any(choice.usable() for choice in HOSTILE)


def test_plugin_choices_lead_when_they_match_the_query() -> None:
    files = [Choice("@src/tracker.py", "src/tracker.py")]
    server = Choice("@tracker:", "tracker:", more=True)
    other = Choice("@notes:", "notes:", more=True)
    assert with_mentions(files, [other, server], "tra") == [server, *files, other]
    resource = Choice("@tracker:issue/12", "tracker:issue/12")
    assert with_mentions(files, [resource], "tracker:12") == [resource, *files]


def offering(name: str, *choices: MentionChoice, fail: bool = False, hang: bool = False) -> Plugin:
    async def offer(agent: AgentHandle, query: str) -> list[MentionChoice]:
        if fail:
            raise RuntimeError("the plugin broke")
        if hang:
            await asyncio.sleep(3600)
        return list(choices)

    def apply(ctx: Context, config: object) -> None:
        ctx.on(PROMPT_MENTIONS, offer)

    return Plugin(name=name, apply=apply)


def labels_for(menu: CompletionMenu) -> list[str]:
    return [str(menu.get_option_at_index(i).prompt) for i in range(menu.option_count)]


async def test_hostile_offers_never_reach_the_prompt(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    good = MentionChoice("@evil:fine", "evil:fine", "\x1b[31mred\x1b[0m meta")
    await runtime.plugins.load([Candidate("offers", "tests", offering("offers", *HOSTILE, good))])
    (tmp_path / "evil.txt").write_text("x\n")
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        menu = app.query_one(CompletionMenu)
        await type_text(app, pilot, "@ev")
        await until(pilot, lambda: menu.option_count >= 2, what="the offers")
        labels = labels_for(menu)
        assert labels[0].startswith("evil:fine")
        assert "\x1b" not in labels[0]  # the meta's colours show as pictures
        assert not any(part in "".join(labels) for part in ("clipboard", "newline", "no-at"))
        await pilot.press("tab")
        assert app.prompt_area.text == "@evil:fine "


async def test_a_failing_or_hanging_plugin_leaves_the_files(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    await runtime.plugins.load(
        [
            Candidate("broken", "tests", offering("broken", fail=True)),
            Candidate("stuck", "tests", offering("stuck", hang=True)),
        ]
    )
    (tmp_path / "notes.md").write_text("x\n")
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        menu = app.query_one(CompletionMenu)
        await type_text(app, pilot, "@not")
        await until(pilot, lambda: menu.display, what="the files")
        assert labels_for(menu) == ["notes.md"]
        await pilot.press("tab")
        assert app.prompt_area.text == "@notes.md "


async def test_a_plugin_that_offers_later_is_asked_again(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Typed before a server was ready, ``@tr`` offers nothing; typed again once it
    is, the server's choice is there (nothing stale was kept)."""
    ready: list[MentionChoice] = []

    async def offer(agent: AgentHandle, query: str) -> list[MentionChoice]:
        return list(ready)

    def apply(ctx: Context, config: object) -> None:
        ctx.on(PROMPT_MENTIONS, offer)

    await runtime.plugins.load([Candidate("late", "tests", Plugin(name="late", apply=apply))])
    async with tui(runtime, tmp_path, tmp_path / "home") as (app, pilot):
        menu = app.query_one(CompletionMenu)
        await type_text(app, pilot, "@tr")
        await pilot.pause()
        await pilot.pause()
        assert not menu.display
        await type_text(app, pilot, "")
        ready.append(MentionChoice("@tracker:", "tracker:", more=True))
        await type_text(app, pilot, "@tr")
        await until(pilot, lambda: menu.display, what="the late offer")
        assert labels_for(menu) == ["tracker:"]
