"""First run: detecting a missing key, saving a choice, checking the connection."""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path

import pytest

from dsh.credentials import CredentialStore, Secret
from dsh.runtime import start_runtime
from dsh.settings import load_settings
from dsh.setup import (
    SetupChoice,
    SetupError,
    check_choice,
    check_connection,
    needs_setup,
    save_setup,
)
from dsh.testing import FakeLLM, Reply


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("DEEPSEEK_API_KEY", "MY_KEY"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "home"
    path.mkdir()
    return path


def test_a_missing_deepseek_key_asks_for_setup(home: Path, tmp_path: Path) -> None:
    store = CredentialStore(home, tmp_path, environ={})
    assert needs_setup(load_settings(home, tmp_path, environ={}), store)
    with_key = CredentialStore(home, tmp_path, environ={"DEEPSEEK_API_KEY": "sk-x"})
    assert not needs_setup(load_settings(home, tmp_path, environ={}), with_key)
    (home / "settings.toml").write_text('[agent]\nprovider = "ollama"\n')
    assert not needs_setup(load_settings(home, tmp_path, environ={}), store)


async def test_a_pasted_key_goes_to_the_credential_file_never_the_settings(
    home: Path, tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = CredentialStore(home, tmp_path, environ={})
    choice = SetupChoice(
        kind="deepseek",
        model="deepseek-v4-pro",
        base_url=fake_llm.base_url,
        key=Secret("sk-canary-123"),
    )
    fake_llm.add(Reply(text="OK"))
    assert await check_connection(choice, timeout_s=10) is None
    path = save_setup(home, store, choice)
    settings_text = path.read_text()
    assert "sk-canary-123" not in settings_text
    saved = tomllib.loads(settings_text)
    assert saved["agent"] == {"provider": "deepseek", "model": "deepseek-v4-pro"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    credentials = home / "credentials.json"
    assert "sk-canary-123" in credentials.read_text()
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert not needs_setup(load_settings(home, tmp_path, environ={}), store)

    # The saved setup is what the next start uses: the same key reaches the server.
    monkeypatch.setenv("DSH_HOME", str(home))
    runtime = await start_runtime(home=home, cwd=tmp_path)
    try:
        from dsh.llm import user_text

        fake_llm.add(Reply(text="hi"))
        agent = await runtime.agents.create(tmp_path)
        assert agent.options.model == "deepseek-v4-pro"
        agent.followup(user_text("hello"))
        await agent.when_idle()
        assert fake_llm.chat_requests[-1].headers["authorization"] == "Bearer sk-canary-123"
    finally:
        await runtime.aclose()


async def test_an_openai_compatible_endpoint_with_a_named_variable(
    home: Path, tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", "sk-from-env")
    choice = SetupChoice(
        kind="openai-compat",
        name="local",
        model="qwen",
        base_url=fake_llm.base_url + "/v1",
        key_env="MY_KEY",
    )
    fake_llm.add(Reply(text="OK"))
    assert await check_connection(choice, timeout_s=10) is None
    save_setup(home, CredentialStore(home, tmp_path, environ={}), choice)
    saved = tomllib.loads((home / "settings.toml").read_text())
    assert saved["agent"] == {"provider": "local", "model": "qwen"}
    assert saved["plugins"]["llm-openai-compat"]["providers"] == [
        {"name": "local", "base_url": fake_llm.base_url + "/v1", "api_key_env": "MY_KEY"}
    ]
    assert not (home / "credentials.json").exists()


async def test_connection_problems_are_explained(home: Path, fake_llm: FakeLLM) -> None:
    unreachable = SetupChoice(
        kind="openai-compat", model="m", base_url="http://127.0.0.1:9/v1", name="x"
    )
    problem = await check_connection(unreachable, timeout_s=5)
    assert problem is not None
    assert problem != ""
    missing = SetupChoice(kind="deepseek", model="deepseek-v4-flash", key_env="NOT_SET_HERE")
    assert (
        await check_connection(missing, timeout_s=5)
        == "NOT_SET_HERE is not set in this environment"
    )
    with pytest.raises(SetupError, match="needs a key"):
        check_choice(SetupChoice(kind="deepseek", model="deepseek-v4-flash"))
    with pytest.raises(SetupError, match="base URL"):
        check_choice(SetupChoice(kind="openai-compat", model="m", base_url="ftp://x"))
