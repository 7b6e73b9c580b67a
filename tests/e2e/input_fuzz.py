r"""The terminal input fuzzer: random key sequences typed into the real ``dsh`` in tmux,
checked against a reference editor of what a person typing them expects.

A *case* comes from a seed: segments of keys, each typed in one ``send-keys`` (a
burst) or key by key with random pauses, the first possibly from 0 ms after exec
(before dsh has set raw mode). Keys are those docs/keys.md gives a meaning in the
prompt: typing (ASCII, CJK, emoji, wide characters, ``\``), Enter, Tab, Ctrl+J,
Alt+Enter, ``\`` then Enter, Left/Right, Backspace, Esc, and bracketed pastes (ASCII,
CJK, emoji, many lines, 10,000 characters) once the terminal asked for them.
:class:`Editor` is the reference: text and cursor, and the documented meaning of each
key. What reached the scripted server (the conversation's user messages, in order)
must equal the messages the editor sent, and the prompt box must end as it says.

Steering is not modelled: a message sent while a turn runs steers it, and a steer
overtakes follow-ups queued with Tab. So the replies are quick, a segment starts once
dsh is idle again after the sends of the one before, and within a segment no Enter
sends after a Tab sent (``x Enter y Tab``, ``x Enter y Enter`` are kept: their order
holds however the turns fall). Esc, which cancels a running turn and which the
terminal reads as Alt with the next byte, is typed alone, at idle, with a pause after.
Up/Down (history) are not in the alphabet: tests of their own cover them.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dsh.testing import FakeLLM, Reply
from tests.support.tmux import Terminal, child_env, says

PASTE_LINES, PASTE_CHARS, ONE_LINE_OFFERED = 12, 1200, 4096
"""As dsh.ui.tui.prompt_input: a paste over these shows as a placeholder."""
PLACEHOLDER = re.compile(r"\[pasted text #(\d+), \d+ lines?\]")
READY = "/help lists commands"
WIDE = "\uff57\uff49\uff44\uff45"
"""``wide`` in full-width letters, two columns each."""
WORDS = [
    "hello",
    "fix",
    "the",
    "bug",
    "дом",
    "日本語",
    "テスト",
    "😀",
    "🚀",
    "é",
    WIDE,
    "a.b",
    "x-y",
]
CHARS = "abcxyz019 .,-?'\"\\日本語😀é"
SPECIAL = ["Enter", "Tab", "C-j", "M-Enter", "Left", "Right", "BSpace"]


@dataclass
class Editor:
    """The prompt as docs/keys.md describes it: text, a cursor, and what was sent."""

    text: str = ""
    cursor: int = 0
    pastes: dict[int, str] = field(default_factory=dict)
    sent: list[str] = field(default_factory=list)

    def insert(self, text: str) -> None:
        self.text = self.text[: self.cursor] + text + self.text[self.cursor :]
        self.cursor += len(text)

    def expanded(self) -> str:
        return PLACEHOLDER.sub(lambda m: self.pastes.get(int(m[1]), m[0]), self.text)

    def would_send(self, key: str) -> bool:
        if key == "Enter" and self.cursor and self.text[self.cursor - 1] == "\\":
            return False
        return key in ("Enter", "Tab") and bool(self.expanded().strip())

    def key(self, key: str) -> None:
        if key in ("C-j", "M-Enter"):
            self.insert("\n")
        elif key == "Enter" and self.cursor and self.text[self.cursor - 1] == "\\":
            self.text = self.text[: self.cursor - 1] + "\n" + self.text[self.cursor :]
        elif key in ("Enter", "Tab"):
            if self.expanded().strip():
                self.sent.append(self.expanded().strip())
                self.text, self.cursor = "", 0
                self.pastes.clear()
        elif key == "Left":
            self.cursor = max(0, self.cursor - 1)
        elif key == "Right":
            self.cursor = min(len(self.text), self.cursor + 1)
        elif key == "BSpace" and self.cursor:
            self.text = self.text[: self.cursor - 1] + self.text[self.cursor :]
            self.cursor -= 1
        # Escape: with no turn, menu or card, nothing in the prompt changes.

    def paste(self, text: str) -> None:
        single = "\n" not in text.strip() and len(text) <= ONE_LINE_OFFERED
        lines = len(text.splitlines()) or 1
        if single or (lines <= PASTE_LINES and len(text) <= PASTE_CHARS):
            self.insert(text)
            return
        number = len(self.pastes) + 1
        self.pastes[number] = text
        self.insert(f"[pasted text #{number}, {lines} {'line' if lines == 1 else 'lines'}]")


@dataclass
class Step:
    kind: str  # "type", "key" or "paste"
    value: str


@dataclass
class Segment:
    steps: list[Step]
    burst: bool
    """All in one ``send-keys`` (pastes apart), else one by one with pauses."""
    pause: float = 0.0
    """Before the segment (the first: after exec; the others: after idle)."""
    early: bool = False
    """Typed from ``pause`` after exec, without waiting for the session."""


@dataclass
class Case:
    seed: int
    segments: list[Segment]
    editor: Editor
    """The reference editor after every segment: what must have been sent."""
    gaps: list[float] = field(default_factory=list)


def _paste_text(rng: random.Random) -> str:
    kind = rng.choice(["ascii", "cjk", "emoji", "lines", "long", "huge"])
    if kind == "ascii":
        return " ".join(rng.choice(WORDS[:4]) for _ in range(rng.randint(1, 6)))
    if kind == "cjk":
        return "".join(rng.choice("日本語中文한국어テスト") for _ in range(rng.randint(1, 30)))
    if kind == "emoji":
        return "".join(rng.choice("😀🚀✨🎉" + WIDE) for _ in range(rng.randint(1, 20)))
    if kind == "lines":
        count = rng.randint(2, 40)
        return "\n".join(f"line {i} {rng.choice(WORDS)}" for i in range(count))
    if kind == "long":
        return "".join(rng.choice("abc 日😀") for _ in range(rng.randint(1201, 3000)))
    return "".join(rng.choice("abcdefgh ") for _ in range(10_000))


def generate(seed: int) -> Case:
    """The case of ``seed``: the same keys and timings on every machine."""
    rng = random.Random(seed)
    editor = Editor()
    segments: list[Segment] = []
    for index in range(rng.randint(1, 5)):
        early = index == 0 and rng.random() < 0.4
        if not early and editor.text and rng.random() < 0.15:
            segments.append(Segment([Step("key", "Escape")], burst=True, pause=0.0))
            continue
        steps: list[Step] = []
        tabbed = False
        for _ in range(rng.randint(1, 12)):
            roll = rng.random()
            if roll < 0.45:
                text = rng.choice(WORDS) if rng.random() < 0.5 else rng.choice(CHARS)
                steps.append(Step("type", text))
                editor.insert(text)
            elif roll < 0.55 and not early:
                text = _paste_text(rng)
                steps.append(Step("paste", text))
                editor.paste(text)
            else:
                # Before raw mode the kernel erases (Backspace) and a LF is read as
                # Enter, so early keys are those that keep their meaning there.
                keys = ["Enter", "Tab", "M-Enter", "Left", "Right"] if early else SPECIAL
                key = rng.choice(keys)
                if editor.would_send(key) and key == "Enter" and tabbed:
                    key = "M-Enter" if early else "C-j"
                tabbed = tabbed or (key == "Tab" and editor.would_send(key))
                steps.append(Step("key", key))
                editor.key(key)
        pause = rng.choice([0.0, 0.0, 0.05, 0.2, 0.5]) if early else rng.choice([0.0, 0.1])
        segments.append(Segment(steps, burst=rng.random() < 0.6, pause=pause, early=early))
    # The end: what is left is sent (the cursor to the end, a backslash last is no
    # `\` Enter); whitespace alone, which Enter does not send, is erased.
    # (a few more than needed: in a run of cases paste numbers go on, #9 to #10)
    steps = [Step("key", "Right")] * (len(editor.text) - editor.cursor + 4)
    for step in steps:
        editor.key(step.value)
    if editor.text.endswith("\\"):
        steps.append(Step("type", "."))
        editor.insert(".")
    steps.append(Step("key", "Enter"))
    editor.key("Enter")
    erase = [Step("key", "BSpace")] * (len(editor.text) + 4)
    for step in erase:
        editor.key(step.value)
    segments.append(Segment(steps + erase, burst=True))
    gaps = [rng.choice([0.0, 0.01, 0.05]) for _ in range(200)]
    return Case(seed, segments, editor, gaps)


def sent(server: FakeLLM) -> list[str]:
    """The conversation's user messages, as the last request carried them."""
    if not server.chat_requests:
        return []
    users = [m["content"] for m in server.chat_requests[-1].body["messages"] if m["role"] == "user"]
    # (the environment plugin's context goes as a user message of its own)
    return [
        text for text in users if not (isinstance(text, str) and text.startswith("Today's date: "))
    ]


class Difference(AssertionError):
    """What reached the server or stayed in the prompt is not what the editor says."""


async def _until(
    check: Callable[[], Awaitable[bool]],
    what: str,
    limit: float,
    terminal: Terminal,
    server: FakeLLM,
) -> None:
    deadline = time.monotonic() + limit
    while not await check():
        if time.monotonic() > deadline:
            shown = [text[:200] for text in sent(server)]
            raise Difference(
                f"timed out waiting for {what}; the server got {shown!r}; the screen:\n"
                + await terminal.screen()
            )
        await asyncio.sleep(0.05)


async def run_case(case: Case, root: Path, *, limit: float = 60.0) -> None:
    """Type ``case`` into a fresh dsh; raises :class:`Difference` on any mismatch."""
    await run_cases([case], root, limit=limit)


async def run_cases(cases: list[Case], root: Path, *, limit: float = 60.0) -> None:
    """Type ``cases`` one after the other into one fresh dsh (the first one's early
    keys from its start, the others' once it is idle): what a dsh starting for each
    would cost, many times over, in bench/. Raises :class:`Difference` naming the
    seed of the first case that differs."""
    count = sum(len(case.editor.sent) for case in cases)
    replies = [Reply(text=f"ok {i}") for i in range(count + 20)]
    answered: list[object] = []
    async with FakeLLM(replies, on_response=answered.append) as server:
        home, project = root / "home", root / "project"
        home.mkdir()
        project.mkdir()
        terminal = Terminal(root)
        try:
            command = ["env", "TERM=xterm-256color", sys.executable, "-m", "dsh"]
            await terminal.start(command, project, child_env(home, server))
            run = _Run(terminal, server, answered, limit)
            for index, case in enumerate(cases):
                await run.case(case, first=index == 0)
            await terminal.keys("C-q")
            await terminal.wait_exit(limit)
        finally:
            await terminal.close()


class _Run:
    """One dsh typed into, and the reference editor beside it (its paste numbers go on
    from case to case, as the prompt's do)."""

    def __init__(
        self, terminal: Terminal, server: FakeLLM, answered: list[object], limit: float
    ) -> None:
        self.terminal, self.server, self.answered, self.limit = terminal, server, answered, limit
        self.replay = Editor()
        self.ready = False

    async def idle(self) -> bool:
        # Every message sent so far has reached the server and every request is
        # answered: what is left of the turn is its end, which changes no order.
        server = self.server
        if len(sent(server)) != len(self.replay.sent) or len(self.answered) != len(server.requests):
            return False
        lines = [line for line in (await self.terminal.screen()).splitlines() if line.strip()]
        return bool(lines) and " idle" in lines[-1]

    async def empty_prompt(self) -> bool:
        return "Ask dsh anything" in await self.terminal.screen()

    async def until(self, check: Callable[[], Awaitable[bool]], what: str) -> None:
        await _until(check, what, self.limit, self.terminal, self.server)

    async def case(self, case: Case, *, first: bool) -> None:
        terminal, replay = self.terminal, self.replay
        gaps = itertools.cycle(case.gaps)
        before = len(replay.sent)
        for number, segment in enumerate(case.segments):
            if segment.early and first:
                await asyncio.sleep(segment.pause)
            else:
                if not self.ready:
                    await terminal.wait_for(says(READY), limit=self.limit)
                    self.ready = True
                await self.until(self.idle, f"seed {case.seed}: idle before segment {number}")
                await asyncio.sleep(segment.pause)
            await _type(terminal, segment, gaps)
            for step in segment.steps:
                if step.kind == "type":
                    replay.insert(step.value)
                elif step.kind == "paste":
                    replay.paste(step.value)
                else:
                    replay.key(step.value)
            if segment.steps == [Step("key", "Escape")]:
                await asyncio.sleep(0.5)  # alone: with a byte soon after it, Esc reads as Alt
        await self.until(self.idle, f"seed {case.seed}: the last messages")
        got = sent(self.server)[before:]
        if got != replay.sent[before:] or (before == 0 and got != case.editor.sent):
            raise Difference(
                f"seed {case.seed}: the server got {got!r}, expected {replay.sent[before:]!r}"
            )
        # The last keys erase what is left: the prompt shows its placeholder again.
        await self.until(self.empty_prompt, f"seed {case.seed}: an empty prompt at the end")


async def _type(terminal: Terminal, segment: Segment, gaps: Iterator[float]) -> None:
    """The segment's keys: a burst as one tmux command list (one write to dsh's
    terminal, as a fast typist or automation), else one at a time."""
    pending: list[Step] = []

    async def flush() -> None:
        args: list[str] = []
        for step in pending:
            literal = ["-l"] if step.kind == "type" else []
            args += [*([";"] if args else []), "send-keys", "-t", "dsh-e2e", *literal, step.value]
        pending.clear()
        if args:
            await terminal.tmux(*args)

    for step in segment.steps:
        if step.kind == "paste":
            await flush()
            await terminal.tmux("set-buffer", "-b", "fuzz", step.value)
            await terminal.tmux("paste-buffer", "-p", "-b", "fuzz", "-t", "dsh-e2e")
            continue
        pending.append(step)
        if not segment.burst:
            await flush()
            await asyncio.sleep(next(gaps))
    await flush()
