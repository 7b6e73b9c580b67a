"""Plain line mode driven through a pipe, against a real runtime and the scripted model."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input

from dsh.runtime import Runtime
from dsh.services import APPROVALS
from dsh.testing import FakeLLM, Reply, ToolCallSpec
from dsh.tools.questions import Question, QuestionOption
from dsh.ui.plain import plain_console
from dsh.ui.plain_dialogs import parse_answer
from dsh.ui.plain_input import path_completions
from dsh.ui.session_commands import ago
from tests.support.plain_script import run_plain_script
from tests.ui.plain_support import TIMEOUT, Plain


def tool_messages(server: FakeLLM, request: int = -1) -> list[str]:
    return [
        m["content"] for m in server.chat_requests[request].body["messages"] if m["role"] == "tool"
    ]


def user_messages(server: FakeLLM, request: int = -1) -> list[str]:
    return [
        m["content"] for m in server.chat_requests[request].body["messages"] if m["role"] == "user"
    ]


async def test_a_prompt_gets_its_streamed_answer(
    runtime: Runtime, pipe: PipeInput, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(reasoning="ponder", text="Hello there.\nSecond *line*."))
    plain = Plain(runtime, pipe, tmp_path)
    plain.type("hi\r")
    text = await plain.wait_for("── turn 1 · completed")
    assert await plain.quit() == 0
    assert "Hello there.\nSecond *line*.\n" in text
    assert "thinking… (6 chars)" in text
    assert "hi" not in text.splitlines()  # what was typed is not echoed
    assert user_messages(fake_llm)[-1] == "hi"
    [history] = (tmp_path / "home" / "history").glob("*.plain")
    assert "+hi" in history.read_text()


async def test_an_initial_prompt_runs_first(
    runtime: Runtime, pipe: PipeInput, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(text="Started."))
    plain = Plain(runtime, pipe, tmp_path, prompt="go")
    await plain.wait_for("── turn 1")
    assert await plain.quit() == 0
    assert "Started." in plain.text


async def test_an_approved_call_runs(
    runtime: Runtime, pipe: PipeInput, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="shout", arguments={"text": "hello"})]))
    fake_llm.add(Reply(text="Shouted."))
    plain = Plain(runtime, pipe, tmp_path)
    plain.type("shout hello\r")
    text = await plain.wait_for("shout asks to run: shout hello")
    assert "● shout hello" in text  # the header when it started
    plain.type("y\r")
    text = await plain.wait_for("── turn 1")
    assert await plain.quit() == 0
    assert tool_messages(fake_llm) == ["HELLO"]
    assert "✓ shout hello" in text
    assert "  HELLO\n" in text  # the generic card: the result, indented
    assert "Shouted." in text


async def test_a_denied_call_tells_the_model(
    runtime: Runtime, pipe: PipeInput, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="shout", arguments={"text": "hello"})]))
    fake_llm.add(Reply(text="I will whisper."))
    plain = Plain(runtime, pipe, tmp_path)
    plain.type("shout hello\r")
    await plain.wait_for("asks to run")
    plain.type("maybe\r")  # not an answer: asked again
    await plain.wait_for("Please answer y, a, n or f.")
    plain.type("n too loud\r")
    text = await plain.wait_for("── turn 1")
    assert await plain.quit() == 0
    [denied] = tool_messages(fake_llm)
    assert "the user denied shout: too loud" in denied
    assert "⊘ shout hello" in text
    assert "I will whisper." in text


async def test_an_approval_names_the_subagent_that_asks_its_bytes_as_pictures(
    runtime: Runtime, pipe: PipeInput, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    from dsh.hooks import APPROVAL_ASK
    from dsh.tools.approval import ApprovalRequest

    plain = Plain(runtime, pipe, tmp_path)
    await plain.wait_for("Ctrl+D to quit")
    asked = ApprovalRequest(
        id="r1",
        session_id="s1",
        call_id="c1",
        tool_name="shout",
        summary="shout hello",
        risk="exec",
        agent_label="explore\x1b]2;pwned\x07 \x1b[2J",
    )
    # Asked as the approvals service asks for a subagent's call: through the hook.
    decision = asyncio.create_task(runtime.root.serial(APPROVAL_ASK, asked))
    text = await plain.wait_for("asks to run: shout hello")
    assert "subagent: explore␛]2;pwned␇ ␛[2J" in text
    assert "\x1b]2;" not in text
    assert "\x1b[2J" not in text
    plain.type("n\r")
    answer = await asyncio.wait_for(decision, TIMEOUT)
    assert answer is not None
    assert answer.outcome == "deny"
    assert await plain.quit() == 0


async def test_a_child_agents_run_prints_its_last_lines_and_session(
    runtime: Runtime, pipe: PipeInput, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    from dsh.kernel import Candidate
    from tests.support.delegate_tool import plugin as delegate_plugin

    await runtime.plugins.load([Candidate("delegate", "tests", delegate_plugin)])
    arguments = {"description": "find \x1b[2Jtests", "prompt": "Where?", "reply": "In tests/."}
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="delegate", arguments=arguments)]))
    fake_llm.add(Reply(text="Found."))
    plain = Plain(runtime, pipe, tmp_path)
    plain.type("delegate\r")
    text = await plain.wait_for("── turn 1")
    assert await plain.quit() == 0
    assert "find ␛[2Jtests · completed" in text
    assert "\x1b[2J" not in text
    assert "… 4 earlier lines" in text
    assert "read 4.py" in text
    assert "read 3.py" not in text
    assert "  session " in text


async def test_ctrl_c_at_an_approval_denies_and_cancels(
    runtime: Runtime, pipe: PipeInput, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="shout", arguments={"text": "hello"})]))
    plain = Plain(runtime, pipe, tmp_path)
    plain.type("shout hello\r")
    await plain.wait_for("asks to run")
    plain.type("\x03")
    text = await plain.wait_for("── turn 1 · cancelled")
    assert "⊘ shout hello" in text
    assert await plain.quit() == 0
    assert len(fake_llm.chat_requests) == 1


async def test_a_draft_survives_an_approval(
    runtime: Runtime, pipe: PipeInput, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    # The answer that asks is held until the draft is typed: the draft is typed while
    # the turn runs, before the question, however slowly the machine goes.
    fake_llm.add(
        Reply(tool_calls=[ToolCallSpec(name="shout", arguments={"text": "hello"})], gate="ask")
    )
    fake_llm.add(Reply(text="Shouted."))
    fake_llm.add(Reply(text="Got it."))
    plain = Plain(runtime, pipe, tmp_path)
    plain.type("shout hello\r")
    for _ in range(int(TIMEOUT / 0.01)):  # the turn runs: its request waits at the gate
        if fake_llm.chat_requests:
            break
        await asyncio.sleep(0.01)
    plain.type("half")  # typed while the turn runs, not sent yet
    # Read from the pipe at the loop's next turn; the question needs many more.
    fake_llm.open_gate("ask")
    await plain.wait_for("asks to run")
    plain.type("y\r")
    await plain.wait_for("✓ shout hello")
    plain.type(" done\r")
    await plain.wait_for("Got it.")
    assert await plain.quit() == 0
    assert user_messages(fake_llm)[-1] == "half done"


def test_approval_details_show_a_diff_or_a_command() -> None:
    from rich.console import Console

    from dsh.tools.approval import ApprovalRequest
    from dsh.ui.plain_dialogs import approval_details

    def shown(details: str, risk: str) -> str:
        request = ApprovalRequest(
            id="r",
            session_id="s",
            call_id="c",
            tool_name="t",
            summary="s",
            details=details,
            risk=risk,  # type: ignore[arg-type]
        )
        console = Console(record=True, width=80, color_system="standard", force_terminal=True)
        console.print(approval_details(request))
        return console.export_text(styles=True)

    assert "\x1b[32m+new" in shown("--- a\n+++ b\n@@ -1 +1 @@\n-old\n+new", "write")
    assert "rm" in shown("rm -rf build", "exec")
    long = shown("\n".join(f"line {n}" for n in range(100)), "write")
    assert "… 60 more lines" in long


async def test_a_question_is_answered_by_number(
    runtime: Runtime, pipe: PipeInput, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    question = {
        "id": "colour",
        "question": "Which colour?",
        "header": "Paint",
        "options": [{"label": "red"}, {"label": "blue", "description": "calm"}],
    }
    fake_llm.add(
        Reply(
            tool_calls=[ToolCallSpec(name="ask_user_question", arguments={"questions": [question]})]
        )
    )
    fake_llm.add(Reply(text="Blue it is."))
    plain = Plain(runtime, pipe, tmp_path)
    plain.type("paint it\r")
    text = await plain.wait_for("2. blue - calm")
    assert "? Paint: Which colour?\n  1. red\n" in text
    plain.type("2\r")
    await plain.wait_for("Blue it is.")
    assert await plain.quit() == 0
    [answer] = tool_messages(fake_llm)
    assert json.loads(answer) == {"answers": [{"id": "colour", "selected": ["blue"]}]}


def test_answers_parse_numbers_or_own_words() -> None:
    options = (QuestionOption(label="a"), QuestionOption(label="b"), QuestionOption(label="c"))
    single = Question(id="q", question="?", options=options)
    multi = Question(id="q", question="?", options=options, multi_select=True)
    assert parse_answer(single, "2").selected == ("b",)  # type: ignore[union-attr]
    assert parse_answer(single, "1, 2") is None
    assert parse_answer(single, "9") is None
    assert parse_answer(multi, "3, 1 3").selected == ("c", "a")  # type: ignore[union-attr]
    assert parse_answer(single, "neither").custom == "neither"  # type: ignore[union-attr]
    assert parse_answer(single, "") is None


async def test_help_new_and_unknown_commands(
    runtime: Runtime, pipe: PipeInput, tmp_path: Path
) -> None:
    plain = Plain(runtime, pipe, tmp_path)
    first = (await plain.wait_for("Ctrl+D to quit")).split("session ")[1][:8]
    plain.type("/help\r")
    text = await plain.wait_for("Keys:")
    for line in ("/new ", "/resume [id]", "/quit ", "/status "):
        assert line in text
    plain.type("/nope\r")
    await plain.wait_for("Unknown command /nope")
    plain.type("/new\r")
    text = await plain.wait_for("Ctrl+D to quit", count=2)
    second = text.rsplit("session ", 1)[1][:8]
    assert second != first
    plain.type("/status\r")
    await plain.wait_for("idle")
    plain.type("/cost\r")  # the built-in commands plugin's, as in every front end
    await plain.wait_for("No model calls in this session yet.")
    plain.type("/permissions accept-edits\r")
    await plain.wait_for("Permission mode: accept-edits")
    plain.type("/exit\r")
    assert await asyncio.wait_for(plain.task, TIMEOUT) == 0


async def test_resume_replays_the_earlier_session(
    runtime: Runtime, pipe: PipeInput, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="echo", arguments={"text": "x"})]))
    fake_llm.add(Reply(text="Noted."))
    first = Plain(runtime, pipe, tmp_path, prompt="remember this")
    await first.wait_for("── turn 1")
    assert await first.quit() == 0
    session_id = first.text.split("session ")[1][:8]

    with create_pipe_input() as second_pipe:
        second = Plain(runtime, second_pipe, tmp_path, continue_last=True)
        text = await second.wait_for("resumed session")
        assert await second.quit() == 0
    replayed = text.split("── resumed session")[0].splitlines()
    assert replayed[0] == "> remember this"
    assert replayed[1].startswith("✓ echo x ")  # compact: the header alone
    assert replayed[2:3] == ["Noted."]
    assert replayed[3].startswith("── turn 1 · completed")
    assert len(replayed) == 4
    assert f"resumed session {session_id}" in text


async def test_resume_command_lists_this_folders_sessions(
    runtime: Runtime, pipe: PipeInput, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(text="First answer."))
    plain = Plain(runtime, pipe, tmp_path, prompt="first session")
    await plain.wait_for("── turn 1")
    plain.type("/new\r")
    await plain.wait_for("Ctrl+D to quit", count=2)
    plain.type("/resume\r")
    text = await plain.wait_for("1. first session · 1 turn · just now")
    assert "Recent sessions here:" in text
    plain.type("1\r")
    text = await plain.wait_for("resumed session")
    assert "> first session\nFirst answer.\n" in text
    assert await plain.quit() == 0


async def test_ctrl_c_cancels_the_running_turn_then_only_clears_the_line(
    runtime: Runtime, pipe: PipeInput, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(Reply(text="Start\n" + "slow " * 200, chunk_size=5, chunk_delay_ms=20))
    plain = Plain(runtime, pipe, tmp_path)
    plain.type("go\r")
    await plain.wait_for("Start\n")
    plain.type("\x03")
    text = await plain.wait_for("── turn 1 · cancelled")
    assert "Cancelling the turn" in text
    plain.type("\x03")  # idle: nothing to cancel, the prompt stays
    plain.type("/help\r")
    await plain.wait_for("Keys:")
    assert await plain.quit() == 0


async def test_a_line_typed_during_a_turn_steers_it(
    runtime: Runtime, pipe: PipeInput, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(
        Reply(
            text="Working\n",
            tool_calls=[ToolCallSpec(name="echo", arguments={"text": "a", "delay": 0.5})],
        )
    )
    fake_llm.add(Reply(text="Steered."))
    plain = Plain(runtime, pipe, tmp_path)
    plain.type("start\r")
    await plain.wait_for("● echo a")
    plain.type("use tabs\r")
    await plain.wait_for("── turn 1")
    assert await plain.quit() == 0
    assert "use tabs" in json.dumps(fake_llm.chat_requests[-1].body["messages"])
    assert len(fake_llm.chat_requests) == 2  # one turn, not a follow-up turn


async def test_no_color_means_no_escape_codes(
    runtime: Runtime,
    pipe: PipeInput,
    fake_llm: FakeLLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("TERM", "xterm-256color")
    coloured = Terminal()
    plain_console(coloured).print("x", style="bold red")
    assert "\x1b[" in coloured.getvalue()  # a terminal gets colour...

    monkeypatch.setenv("NO_COLOR", "1")
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="echo", arguments={"text": "x"})]))
    fake_llm.add(Reply(text="Plain."))
    plain = Plain(runtime, pipe, tmp_path, out=Terminal())
    plain.type("go\r")
    text = await plain.wait_for("── turn 1")
    assert await plain.quit() == 0
    assert "✓ echo x" in text
    assert "\x1b" not in text  # ...but not with NO_COLOR


async def test_a_failed_resume_exits_with_an_error(
    runtime: Runtime, pipe: PipeInput, tmp_path: Path
) -> None:
    plain = Plain(runtime, pipe, tmp_path, resume="no-such-session")
    assert await asyncio.wait_for(plain.task, TIMEOUT) == 1
    assert "no-such-session" in plain.text


async def test_a_script_on_stdin_runs_prompt_by_prompt(
    fake_llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a terminal, each line waits for the turn before it; an approval takes
    its answer from the script; the output is plain text."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.toml").write_text(
        f'[plugins.llm-deepseek]\nbase_url = "{fake_llm.base_url}"\n'
        "[plugins.title]\ngenerate = false\n"
        '[plugins]\nmodules = ["tests.support.echo_tool"]\n'
    )
    fake_llm.add(Reply(text="One."))
    fake_llm.add(Reply(tool_calls=[ToolCallSpec(name="shout", arguments={"text": "hey"})]))
    fake_llm.add(Reply(text="Two."))
    # No NO_COLOR: the output must be plain because stdout is no terminal.
    env = {"DSH_HOME": str(home), "DEEPSEEK_API_KEY": "sk-test", "NO_COLOR": None}
    code, out, err = await run_plain_script(tmp_path, b"first\nsecond\ny\n", env)
    assert code == 0, err
    lines = out.splitlines()
    assert "\x1b" not in out
    assert lines[1:] == [
        "> first",
        "One.",
        lines[3],
        "> second",
        "● shout hey",
        "? shout asks to run: shout hey",
        "  exec needs approval",
        "  [a] allows for this session: `shout` and `shout …`",
        "Allow? [y]es once / [a]lways this session / [n]o / [f]eedback: y",
        lines[10],
        "  HEY",
        "Two.",
        lines[13],
    ]
    assert lines[3].startswith("── turn 1 · completed")
    assert lines[10].startswith("✓ shout hey ")
    assert tool_messages(fake_llm) == ["HEY"]


def test_completion_of_commands_and_paths(tmp_path: Path) -> None:
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from dsh.commands import Command
    from dsh.ui.plain_input import PlainCompleter

    async def nothing(context: Any, args: str) -> None:
        pass

    commands = [Command("new", "start", nothing), Command("nope", "x", nothing)]
    (tmp_path / "notes.md").write_text("")
    completer = PlainCompleter(
        lambda prefix: [c for c in commands if c.name.startswith(prefix)], lambda: tmp_path
    )

    def complete(text: str) -> list[str]:
        found = completer.get_completions(Document(text), CompleteEvent(completion_requested=True))
        return [c.text for c in found]

    assert complete("/n") == ["/new", "/nope"]
    assert complete("/ne") == ["/new"]
    assert complete("/new x") == []
    assert complete("read @no") == ["@notes.md"]
    assert complete("read no") == []


async def test_completion_asks_the_plugins_for_mentions(tmp_path: Path) -> None:
    """Tab after ``@`` offers what plugins offer (an MCP resource) after the paths;
    an offer that would type whitespace or terminal controls is left out."""
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from dsh.agent import MentionChoice
    from dsh.ui.plain_input import PlainCompleter

    (tmp_path / "notes.md").write_text("")
    asked: list[str] = []

    async def mentions(query: str) -> list[MentionChoice]:
        asked.append(query)
        return [
            MentionChoice("@notes:today", "notes:today", "\x1b[2Jtoday's notes"),
            MentionChoice("@notes:x\x1b[2J", "bad"),
            MentionChoice("@notes:a b", "bad"),
        ]

    completer = PlainCompleter(lambda prefix: [], lambda: tmp_path, mentions)
    event = CompleteEvent(completion_requested=True)
    found = [c async for c in completer.get_completions_async(Document("read @no"), event)]
    assert [c.text for c in found] == ["@notes.md", "@notes:today"]
    assert "\x1b" not in str(found[1].display_meta)
    assert asked == ["no"]
    found = [c async for c in completer.get_completions_async(Document("/n"), event)]
    assert asked == ["no"]  # not an @: the plugins are not asked


def test_path_completion(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("")
    (tmp_path / "setup.py").write_text("")
    (tmp_path / ".hidden").write_text("")
    assert list(path_completions(tmp_path, "s")) == ["setup.py", "src/"]
    assert list(path_completions(tmp_path, "src/m")) == ["src/main.py"]
    assert list(path_completions(tmp_path, ".h")) == [".hidden"]
    assert list(path_completions(tmp_path, "nowhere/")) == []


def test_ago() -> None:
    now = 1_700_000_000.0
    assert ago(int(now * 1000), now) == "just now"
    assert ago(int((now - 7_200) * 1000), now) == "2 h ago"
    assert ago(int(now - 300), now) == "5 min ago"


def test_plain_mode_does_not_import_textual() -> None:
    code = "import dsh.ui.plain, sys; assert 'textual' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_a_failed_command_says_why_once(
    runtime: Runtime, pipe: PipeInput, tmp_path: Path
) -> None:
    plain = Plain(runtime, pipe, tmp_path)
    await plain.wait_for("/help")
    plain.type("/model deepseek-v4-prp\r")
    await plain.wait_for("does not list a model")
    await asyncio.sleep(0.2)
    assert plain.text.count("does not list a model") == 1
    assert await plain.quit() == 0


async def test_permissions_read_only_applies_to_what_the_model_does_next(
    runtime: Runtime, pipe: PipeInput, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """/permissions switches the runtime's mode (it once set it on a throwaway view of
    the service, and nothing changed): a write the model asks for next never happens."""
    target = tmp_path / "written.txt"
    fake_llm.add(
        Reply(
            tool_calls=[
                ToolCallSpec(name="write", arguments={"file_path": str(target), "content": "x"})
            ]
        ),
        Reply(text="I could not write it."),
    )
    plain = Plain(runtime, pipe, tmp_path)
    await plain.wait_for("/help")
    plain.type("/permissions read-only\r")
    await plain.wait_for("Permission mode: read-only")
    assert runtime.root.get(APPROVALS).mode == "read-only"
    plain.type("write the file\r")
    await plain.wait_for("I could not write it.")
    assert not target.exists()
    assert await plain.quit() == 0
