"""The smaller surprises of issue 36, item 7, each under Pilot with the real app, a
real runtime and the scripted model: what a command shows right after another changed
things, and what the TUI keeps across runs."""

from __future__ import annotations

from pathlib import Path

from dsh.runtime import Runtime
from dsh.testing import FakeLLM, Reply
from dsh.ui.entries import NoticeEntry
from tests.ui.tui_support import finish_a_turn, screen_text, tui, type_text, until


def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def notices(app: object) -> list[str]:
    fold = app.fold  # type: ignore[attr-defined]
    return [entry.text for entry in fold.entries if isinstance(entry, NoticeEntry)]


async def test_status_right_after_a_model_switch_names_the_new_model(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="hi"))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await finish_a_turn(app, pilot, "hello")  # the log now names deepseek-flash
        await type_text(app, pilot, "/model deepseek-v4-pro")
        await pilot.press("enter")
        await until(pilot, lambda: app.agent.options.model == "deepseek-v4-pro", what="switch")
        before = len(screen_text(app))
        await type_text(app, pilot, "/status")
        await pilot.press("enter")
        await until(pilot, lambda: "idle" in screen_text(app)[before:], what="/status")
        said = screen_text(app)[before:]
        assert "deepseek-v4-pro" in said
        assert "deepseek-flash" not in said
        assert len(fake_llm.chat_requests) == 1  # no request made it so


async def test_compact_says_its_result_once(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.add(Reply(text="First answer."))
    fake_llm.add(Reply(text="Second answer."))
    fake_llm.add(Reply(text="The summary of it all."))
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await finish_a_turn(app, pilot, "first question")
        await finish_a_turn(app, pilot, "second question")
        await type_text(app, pilot, "/compact")
        await pilot.press("enter")
        await until(
            pilot,
            lambda: any("Compacted" in text for text in notices(app)),
            what="the compaction",
        )
        await until(pilot, lambda: app.agent.status == "idle", what="idle")
        await pilot.pause(0.3)  # a second line, if one were coming, is shown by now
        said = [text for text in notices(app) if "Compacted" in text]
        assert len(said) == 1, said
        assert screen_text(app).count("Compacted") == 1
        assert "summary" in said[0]
        # What the notice does not say, the command adds: once.
        assert screen_text(app).count("The context holds about") == 1
        assert len(fake_llm.chat_requests) == 3


async def test_a_command_file_written_while_dsh_runs_is_offered_before_any_prompt(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    from dsh.ui.tui.prompt_input import CompletionMenu

    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        folder = home(tmp_path) / "commands"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "freshly.md").write_text("---\ndescription: Written just now\n---\nSay hi.\n")
        menu = app.query_one(CompletionMenu)

        def offered() -> list[str]:
            if not menu.display:
                return []
            return [str(menu.get_option_at_index(i).prompt) for i in range(menu.option_count)]

        async def typed_and_offered() -> bool:
            await type_text(app, pilot, "")
            await pilot.press("/", "f", "r")
            await pilot.pause(0.1)
            return any(label.startswith("/freshly") for label in offered())

        for _ in range(100):  # a hang guard: the folders are looked at every second
            if await typed_and_offered():
                break
        assert any("Written just now" in label for label in offered())
        await type_text(app, pilot, "")

        # /commands lists one written a moment ago too, with no prompt sent.
        (folder / "newest.md").write_text("Say bye.\n")
        await type_text(app, pilot, "/commands")
        await pilot.press("enter")
        await until(pilot, lambda: "/newest" in screen_text(app), what="/commands")
        assert "/freshly" in screen_text(app)
        assert fake_llm.chat_requests == []


async def test_the_theme_chosen_is_kept_in_the_users_settings(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    from dsh.settings import load_settings
    from dsh.ui.tui.screens.picker import Picker

    user_file = home(tmp_path) / "settings.toml"
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text('# mine\n[agent]\nmodel = "deepseek-flash"  # the cheap one\n')
    user_file.chmod(0o600)
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "/theme dsh-light")
        await pilot.press("enter")
        await until(pilot, lambda: "Saved as [tui] theme" in screen_text(app), what="saved")
        assert app.theme == "dsh-light"
        assert load_settings(home(tmp_path), tmp_path).tui.theme == "dsh-light"
        text = user_file.read_text()
        assert '# mine\n[agent]\nmodel = "deepseek-flash"  # the cheap one\n' in text

        # The picker: Esc keeps nothing, Enter keeps the one highlighted.
        names = sorted(app.available_themes)
        moved = names[(names.index("dsh-light") + 1) % len(names)]
        await type_text(app, pilot, "/theme")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, Picker), what="the theme picker")
        await pilot.press("down", "escape")
        await until(pilot, lambda: not isinstance(app.screen, Picker))
        assert load_settings(home(tmp_path), tmp_path).tui.theme == "dsh-light"
        await type_text(app, pilot, "/theme")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, Picker), what="the theme picker")
        await pilot.press("down", "enter")
        await until(pilot, lambda: screen_text(app).count("Saved as [tui] theme") == 2)
        assert load_settings(home(tmp_path), tmp_path).tui.theme == moved


async def test_a_theme_that_cannot_be_saved_applies_for_the_run_and_says_why(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    user_file = home(tmp_path) / "settings.toml"
    user_file.parent.mkdir(parents=True, exist_ok=True)
    broken = "[agent\nmodel = 1\n"
    user_file.write_text(broken)
    async with tui(runtime, tmp_path, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "/theme dsh-light")
        await pilot.press("enter")
        await until(pilot, lambda: "for this run only" in screen_text(app), what="the warning")
        assert app.theme == "dsh-light"
        assert "not valid TOML" in screen_text(app)
        assert user_file.read_text() == broken  # nothing of it lost


def write_call(path: Path, content: str) -> Reply:
    from dsh.testing import ToolCallSpec

    arguments = {"file_path": str(path), "content": content}
    return Reply(tool_calls=[ToolCallSpec(name="write", arguments=arguments)])


async def test_this_session_on_a_write_outside_the_project_allows_that_folder_only(
    runtime: Runtime, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """ "This session [a]" on a write outside the project grants what the dialog says
    (that folder and under it) for the rest of the session: the next write there runs
    unasked; a write to another folder, or to a protected path inside the granted one,
    is still asked."""
    from dsh.ui.tui.screens.approval import ApprovalScreen

    project, notes, other = tmp_path / "project", tmp_path / "out" / "notes", tmp_path / "other"
    for folder in (project, notes, other):
        folder.mkdir(parents=True)
    fake_llm.add(write_call(notes / "a.txt", "first\n"))
    fake_llm.add(write_call(notes / "deeper" / "b.txt", "second\n"))
    fake_llm.add(write_call(other / "c.txt", "third\n"))
    fake_llm.add(write_call(notes / ".git" / "config", "[core]\n"))
    fake_llm.add(Reply(text="Wrote what I could."))

    async def dialog_shows(what: str) -> ApprovalScreen:
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what=what)
        dialog = app.screen
        assert isinstance(dialog, ApprovalScreen)
        await until(pilot, lambda: dialog.guard.open, what="the dialog to take keys")
        return dialog

    async with tui(runtime, project, home(tmp_path)) as (app, pilot):
        await type_text(app, pilot, "write the notes")
        await pilot.press("enter")
        first = await dialog_shows("the first approval")
        assert first.request.grant == f"edit({notes.resolve()}/**)"
        covers = f"edits to files in {notes.resolve()}/ and its subfolders"
        assert first.request.grant_covers == covers
        await pilot.press("a")
        # The second write, in the granted folder, runs unasked; the third is asked.
        third = await dialog_shows("the approval of another folder")
        assert str(other / "c.txt") in third.request.summary + str(third.request.paths)
        assert (notes / "deeper" / "b.txt").read_text() == "second\n"
        await pilot.press("n")
        fourth = await dialog_shows("the approval of a protected path in the granted folder")
        assert ".git" in str(fourth.request.paths)
        assert fourth.request.grant is None  # never offered for a protected path
        await pilot.press("n")
        await until(pilot, lambda: "Wrote what I could." in screen_text(app), what="the end")
    assert (notes / "a.txt").read_text() == "first\n"
    assert not (other / "c.txt").exists()
    assert not (notes / ".git").exists()
