"""An outside plugin, end to end: ``tests/fixtures/dsh-plugin-example`` is installed as
its own distribution and the real ``dsh`` finds it through the ``dsh.plugins`` entry
point group, with nothing of it in ``dsh/`` or ``plugins/``.

The package is built and installed once per test process (each xdist worker has its
own), offline: ``pip install --target`` a temporary folder without build isolation or
dependencies, and that folder alone on the child's ``PYTHONPATH``. The test's venv is
never changed, so parallel workers cannot disturb each other.

The plugin (see docs/plugins.md) adds the ``word_count`` tool, its
``wordcount/counted`` event with a transcript view, ``/words``, a prompt-submit hook
that reminds the model of the counts made so far, and the ``[plugins.wordcount]``
table; each test checks one of them through the binary.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh.testing import FakeLLM, Reply, ToolCallSpec
from tests.e2e.harness import Finished, finish, text_of, user_texts
from tests.support.replays import note_settings
from tests.support.tmux import TMUX, Terminal, says
from tests.support.waits import HANG_S

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tests" / "fixtures" / "dsh-plugin-example"
DSH = Path(sys.executable).with_name("dsh")  # the console script of the test's own venv

NOTES = "The cat sat on the mat.\nThe cat ran; the dog sat.\nA cat, a hat.\n"
# Counted as [plugins.wordcount] below says: words of 3+ characters, the 2 most frequent.
SETTINGS = "[plugins.wordcount]\nmin_length = 3\ntop = 2\n"
COUNT = "notes.txt: 13 words of 3+ characters, 3 lines\nmost frequent: the (4), cat (3)"
# The same file with the defaults (every word, the 3 most frequent), for contrast.
DEFAULT_COUNT = "notes.txt: 16 words, 3 lines\nmost frequent: the (4), cat (3), a (2)"

_CLEARED_PREFIXES = ("DSH_", "DEEPSEEK_", "OPENAI_", "TMUX")


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the example plugin as pip installs it: its package and its
    ``.dist-info`` (with ``entry_points.txt``)."""
    if importlib.util.find_spec("hatchling") is None:
        pytest.fail("hatchling, the example's build backend, is missing: pip install -e '.[test]'")
    target = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    command += ["--no-index", "--no-build-isolation", "--no-deps", "--no-cache-dir"]
    command += ["--target", str(target), str(PACKAGE)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=HANG_S, check=False)
    assert done.returncode == 0, done.stderr
    assert (target / "dsh_example" / "__init__.py").is_file()
    return target


class Installation:
    """A home whose settings configure the plugin, a project with a file to count, and
    the environment that points the real ``dsh`` at both and the test's server."""

    def __init__(self, root: Path, site: Path, server: FakeLLM) -> None:
        self.home, self.project = root / "home", root / "project"
        self.home.mkdir()
        self.project.mkdir()
        (self.home / "settings.toml").write_text(SETTINGS)
        (self.project / "notes.txt").write_text(NOTES)
        self.site, self.server = site, server

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_CLEARED_PREFIXES)}
        env.update(
            DSH_HOME=str(self.home),
            DEEPSEEK_API_KEY="sk-test",
            DSH_PLUGINS__LLM_DEEPSEEK__BASE_URL=self.server.base_url,
            DSH_PLUGINS__TITLE__AUTO="never",  # no title call to script
            PYTHONPATH=str(self.site),  # the plugin, and nothing of this repository's tests
            PYTHONUNBUFFERED="1",
        )
        return env

    async def run(self, *args: str, stdin: str = "") -> Finished:
        env = self.env()
        note_settings(self.home, env)  # the plugin's site: the replay imports it too
        child = await asyncio.create_subprocess_exec(
            str(DSH),
            *args,
            cwd=self.project,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            return await finish(child, stdin.encode())
        finally:
            if child.returncode is None:
                child.kill()
                await child.wait()


@pytest.fixture
def installation(tmp_path: Path, installed: Path, fake_llm: FakeLLM) -> Installation:
    assert DSH.is_file(), f"no dsh console script beside {sys.executable}"
    return Installation(tmp_path, installed, fake_llm)


def count_notes() -> Reply:
    return Reply(
        reasoning="Count it.",
        tool_calls=[ToolCallSpec(name="word_count", arguments={"file_path": "notes.txt"})],
    )


def tool_results(body: dict[str, Any]) -> list[str]:
    return [text_of(m) for m in body["messages"] if m["role"] == "tool"]


async def test_dsh_plugins_lists_it_by_its_entry_point(installation: Installation) -> None:
    done = await installation.run("plugins", "--json")

    assert done.code == 0, done.stderr
    (record,) = [r for r in json.loads(done.stdout) if r["name"] == "wordcount"]
    assert record["status"] == "loaded", record
    assert record["origin"] == (
        "entry point wordcount = dsh_example:plugin from dsh-plugin-example 0.1.0"
    )


async def test_its_settings_table_is_checked_by_its_config_model(
    installation: Installation,
) -> None:
    (installation.home / "settings.toml").write_text("[plugins.wordcount]\nmin_lenght = 3\n")

    done = await installation.run("plugins")

    assert done.code == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("wordcount"))
    assert "failed" in line
    assert "min_lenght" in done.stdout  # the error names the key the model refused


async def test_the_tool_runs_as_configured_and_logs_its_event(
    installation: Installation, fake_llm: FakeLLM
) -> None:
    fake_llm.add(count_notes(), Reply(text="notes.txt has 13 longer words."))

    done = await installation.run("-p", "how long is notes.txt?", "--output-format", "stream-json")

    assert done.code == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    # The model read the count the settings table shaped (min_length 3, top 2).
    assert tool_results(fake_llm.chat_requests[1].body) == [COUNT]
    # The tool declared the file it reads; the pipeline judged it a read.
    (call,) = [e for e in lines if e["type"] == "tool/call"]
    assert call["data"]["name"] == "word_count"
    # Its own event is in the session log, between the call and its result.
    types = [e["type"] for e in lines]
    assert types.index("tool/call") < types.index("wordcount/counted") < types.index("tool/result")
    (counted,) = [e["data"] for e in lines if e["type"] == "wordcount/counted"]
    assert counted == {
        "path": "notes.txt",
        "words": 13,
        "lines": 3,
        "minLength": 3,
        "top": [{"word": "the", "count": 4}, {"word": "cat", "count": 3}],
    }
    assert lines[-1]["type"] == "result"
    assert lines[-1]["result"] == "notes.txt has 13 longer words."


async def test_without_its_table_the_defaults_apply(
    installation: Installation, fake_llm: FakeLLM
) -> None:
    (installation.home / "settings.toml").write_text("")
    fake_llm.add(count_notes(), Reply(text="Done."))

    done = await installation.run("-p", "how long is notes.txt?")

    assert done.code == 0, done.stderr
    assert tool_results(fake_llm.chat_requests[1].body) == [DEFAULT_COUNT]


async def test_read_rules_judge_it_by_the_file_it_declares(
    installation: Installation, fake_llm: FakeLLM
) -> None:
    # No rule names word_count: the deny rule is about reading notes.txt, and the tool's
    # Action says that is what a call does.
    settings = installation.home / "settings.toml"
    settings.write_text(SETTINGS + '[permissions]\ndeny = ["read(notes.txt)"]\n')
    fake_llm.add(count_notes(), Reply(text="I may not read it."))

    done = await installation.run("-p", "how long is notes.txt?", "--output-format", "stream-json")

    assert done.code == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert "wordcount/counted" not in [e["type"] for e in lines]
    (result,) = tool_results(fake_llm.chat_requests[1].body)
    assert "denied" in result.lower(), result
    assert "13 words" not in result


async def test_the_command_and_the_hook_read_the_counts_back_from_the_log(
    installation: Installation, fake_llm: FakeLLM
) -> None:
    fake_llm.add(count_notes(), Reply(text="Counted."))
    first = await installation.run("-p", "count notes.txt")
    assert first.code == 0, first.stderr
    assert len(fake_llm.chat_requests) == 2
    # The first prompt came before any count: the hook added nothing to it.
    assert not any("word_count" in t for t in user_texts(fake_llm.chat_requests[0].body))

    # A slash command as the prompt: /words, in the resumed session, makes no model call.
    words = await installation.run("-p", "/words", "--continue")
    assert words.code == 0, words.stderr
    assert words.stdout == "notes.txt: 13 words of 3+ characters, 3 lines\n"
    assert len(fake_llm.chat_requests) == 2

    # The next prompt carries the hook's reminder of the count, read from the log.
    fake_llm.add(Reply(text="It is short."))
    later = await installation.run("-p", "is it long?", "--continue")
    assert later.code == 0, later.stderr
    sent = user_texts(fake_llm.chat_requests[2].body)
    reminders = [t for t in sent if "Files counted with word_count" in t]
    assert len(reminders) == 1
    assert "- notes.txt: 13 words of 3+ characters, 3 lines" in reminders[0]
    assert sent.index(reminders[0]) > sent.index("is it long?")


async def test_plain_mode_shows_its_event_and_runs_its_command(
    installation: Installation, fake_llm: FakeLLM
) -> None:
    fake_llm.add(count_notes(), Reply(text="Counted."))

    done = await installation.run("--plain", stdin="how long is notes.txt?\n/words\n")

    assert done.code == 0, done.stderr
    out = done.stdout
    # The event's view: its card, as the fold step drew it.
    assert "Word count" in out
    assert "most frequent: the (4), cat (3)" in out
    # /words, after the turn.
    assert out.rstrip().endswith("notes.txt: 13 words of 3+ characters, 3 lines")


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
async def test_the_tui_shows_its_event_and_runs_its_command(
    installation: Installation, fake_llm: FakeLLM, terminal: Terminal
) -> None:
    fake_llm.add(count_notes(), Reply(text="Counted it."))
    env = {**installation.env(), "TERM": "xterm-256color"}
    await terminal.start([str(DSH)], installation.project, env)
    await terminal.wait_for(says("/help lists commands"))  # the session is open
    await terminal.keys("how long is notes.txt?", literal=True)
    await terminal.keys("Enter")

    screen = await terminal.wait_for("Counted it.")
    # The event's card (titled as its fold step says; the tool's own card is word_count).
    assert "Word count" in screen
    assert "most frequent: the (4), cat (3)" in " ".join(screen.split())
    await terminal.keys("/words", literal=True)
    await terminal.keys("Enter")
    await terminal.wait_for(says("notes.txt: 13 words of 3+ characters, 3 lines"))
    await terminal.keys("C-q")
    assert await terminal.wait_exit() == "0"
