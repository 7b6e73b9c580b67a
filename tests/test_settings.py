from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsh.llm import GenerateOptions, TextBlock, assemble, user_text
from dsh.runtime import start_runtime
from dsh.settings import SettingsError, load_settings, merge
from dsh.testing import FakeLLM, Reply


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_project_document_overrides_the_users_key_by_key(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "work" / "app"
    user = write(
        home / "settings.toml",
        '[plugins.llm-deepseek]\nbase_url = "http://a"\nread_timeout = 60\n[plugins]\ndisabled = ["x"]\n',
    )
    local = write(
        project / ".dsh" / "settings.toml", '[plugins.llm-deepseek]\nbase_url = "http://b"\n'
    )
    (project / "src").mkdir()
    (project / ".git").mkdir()  # the project root: discovery goes up to it
    settings = load_settings(home, project / "src", trust=True)  # found from a subfolder too
    assert settings.plugin_configs() == {
        "llm-deepseek": {"base_url": "http://b", "read_timeout": 60}
    }
    assert settings.disabled_plugins() == ["x"]
    assert settings.origin("plugins", "llm-deepseek") == f"{user} and {local}"


def test_no_documents_mean_defaults(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "home", tmp_path)
    assert settings.plugin_configs() == {}
    assert settings.disabled_plugins() == []


def test_bad_documents_name_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "home" / "settings.toml", "[plugins\n")
    with pytest.raises(SettingsError, match=re.escape(f"{path}: not valid TOML")):
        load_settings(tmp_path / "home", tmp_path)
    write(path, "[plugins]\ndisabled = 'all'\n")
    with pytest.raises(SettingsError, match=r"plugins\.disabled must be a list"):
        load_settings(tmp_path / "home", tmp_path).disabled_plugins()


def test_merge_is_deep_for_tables_only() -> None:
    assert merge({"a": {"b": 1, "c": [1]}, "d": 1}, {"a": {"c": [2]}, "d": {"e": 2}}) == {
        "a": {"b": 1, "c": [2]},
        "d": {"e": 2},
    }


async def test_a_provider_configured_in_settings_answers_through_the_runtime(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    write(
        home / "settings.toml",
        f'[[plugins.llm-openai-compat.providers]]\nname = "local"\nbase_url = "{fake_llm.base_url}/v1"\n'
        "[plugins.llm-deepseek.models.deepseek-v4-pro]\ncontext_window = 300000\n",
    )
    fake_llm.add(Reply(text="configured by settings"))
    runtime = await start_runtime(home=home, cwd=tmp_path)
    try:
        assert "local" in runtime.llm.providers()
        assert runtime.llm.resolve("deepseek", "deepseek-v4-pro").context_window == 300_000
        options = GenerateOptions(provider="local", model="qwen", messages=(user_text("hi"),))
        chunks = [c async for c in runtime.llm.stream(options)]
        assert assemble(chunks).content == (TextBlock(text="configured by settings"),)
    finally:
        await runtime.aclose()


def dsh(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DSH_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "dsh", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=home,
    )


def test_dsh_plugins_reports_a_bad_plugin_config_with_its_file(tmp_path: Path) -> None:
    path = write(
        tmp_path / "settings.toml",
        '[plugins.llm-openai-compat]\nproviders = [{ name = "x" }]\n[plugins]\ndisabled = ["llm-deepseek"]\n',
    )
    rows = {r["name"]: r for r in json.loads(dsh(tmp_path, "plugins", "--json").stdout)}
    assert rows["llm-deepseek"]["status"] == "disabled"
    assert rows["llm-openai-compat"]["status"] == "failed"
    assert (
        f"invalid config in {path} [plugins.llm-openai-compat]"
        in rows["llm-openai-compat"]["error"]
    )
    assert "base_url" in rows["llm-openai-compat"]["error"]
    write(path, "not = [valid\n")
    broken = dsh(tmp_path, "plugins")
    assert broken.returncode == 1
    assert broken.stderr.startswith(f"dsh: {path}: not valid TOML")
