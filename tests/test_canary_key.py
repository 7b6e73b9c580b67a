"""An API key never lands in a session log, a debug log, an error message or output.

A canary key is used for real: stored with the credentials service, sent to the
scripted server, echoed back by the server in an error (as some providers do), and
carried through a stored session. Then every place it must not be is searched.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsh.credentials import CredentialStore
from dsh.llm import (
    AssistantMessage,
    Finish,
    FinishError,
    GenerateOptions,
    ModelSource,
    StreamChunk,
    assemble,
    user_text,
)
from dsh.runtime import start_runtime
from dsh.services import CREDENTIALS
from dsh.session import (
    AssistantChunk,
    AssistantMessageData,
    StepEnd,
    StepStart,
    TurnCompleted,
    TurnEnd,
    TurnFailed,
    TurnStart,
)
from dsh.testing import FakeLLM, Fault, Reply, Script

CANARY = "sk-canary-5d1f0e9a7b3c4411"


async def test_the_key_goes_only_where_it_must(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("DSH_HOME", str(home))
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    CredentialStore(home, tmp_path).set("DEEPSEEK_API_KEY", CANARY)
    caplog.set_level(logging.DEBUG)  # httpx, httpcore, dsh: everything

    echo = Fault(status=401, body={"error": {"message": f"Incorrect API key provided: {CANARY}"}})
    script = Script(
        replies=[Reply(fault=echo), Reply(reasoning="Checking.", text="All good.")],
        require_key=CANARY,
    )
    async with FakeLLM(script) as server:
        monkeypatch.setenv("DEEPSEEK_BASE_URL", server.base_url)
        runtime = await start_runtime(home=home)
        try:
            messages: list[str] = []
            session = await runtime.sessions.create(str(tmp_path), model="deepseek-v4-flash")
            for turn in (1, 2):
                session.append("turn/start", TurnStart(turn=turn))
                session.append("user/message", user_text("hello"))
                session.append("step/start", StepStart(turn=turn, step=1))
                options = GenerateOptions(
                    provider="deepseek",
                    model="deepseek-v4-flash",
                    messages=tuple(session.derive_messages()),
                )
                chunks: list[StreamChunk] = []
                seqs: list[int] = []
                async for chunk in runtime.llm.stream(options):
                    chunks.append(chunk)
                    data = AssistantChunk(turn=turn, step=1, chunk=chunk)
                    seqs.append(session.append("assistant/chunk", data).seq)
                assembled = assemble(chunks)
                final = chunks[-1]
                assert isinstance(final, Finish)
                message = AssistantMessage(
                    content=assembled.content or assembled.interrupted_blocks(),
                    source=ModelSource(provider="deepseek", model="deepseek-v4-flash"),
                )
                session.append(
                    "assistant/message",
                    AssistantMessageData(turn=turn, step=1, message=message, usage=assembled.usage),
                    source_event_seqs=seqs,
                )
                session.append("step/end", StepEnd(turn=turn, step=1))
                if isinstance(final.reason, FinishError):
                    messages.append(final.reason.failure.message)
                    reason = TurnFailed(error=final.reason.failure)
                else:
                    reason = TurnCompleted()
                session.append("turn/end", TurnEnd(turn=turn, reason=reason))
            await runtime.sessions.flush(session)
            status = runtime.root.get(CREDENTIALS).describe("DEEPSEEK_API_KEY")
        finally:
            await runtime.aclose()

    # The key did its job: the server received it, and the second call succeeded.
    assert server.requests[-1].headers["authorization"] == f"Bearer {CANARY}"
    assert "All good." in [m.text() for m in session.derive_messages()][-1]
    # The provider's echo was redacted from the failure everyone sees.
    assert len(messages) == 1
    assert "Incorrect API key provided: ***" in messages[0]
    assert CANARY not in messages[0]
    assert CANARY not in repr(status.to_dict())
    assert CANARY not in caplog.text
    stored = [p for p in home.rglob("*") if p.is_file() and p.name != "credentials.json"]
    assert any(p.name == "session.jsonl" for p in stored)
    for path in stored:
        assert CANARY.encode() not in path.read_bytes(), f"the key leaked into {path}"


def test_commands_never_print_the_key(tmp_path: Path) -> None:
    env = {**os.environ, "DSH_HOME": str(tmp_path), "DEEPSEEK_API_KEY": CANARY}
    for args in (["plugins", "--json"], ["plugins"], ["sessions", "list", "--all"], ["--help"]):
        result = subprocess.run(
            [sys.executable, "-m", "dsh", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert CANARY not in result.stdout + result.stderr
