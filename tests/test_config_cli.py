"""``dsh config`` and the settings layers: defaults, user, project, environment."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest

from dsh.cli import build_command_parser
from dsh.cli.config import run_config
from dsh.settings import SettingsError, load_settings


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    monkeypatch.setenv("DSH_HOME", str(home))
    monkeypatch.chdir(project)
    for name in list(os.environ):
        if name.startswith("DSH_") and "__" in name:
            monkeypatch.delenv(name)
    return home, project


def config(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_config(build_command_parser().parse_args(["config", *argv]), out, err)
    return code, out.getvalue(), err.getvalue()


def test_set_get_list_unset_round_trip(places: tuple[Path, Path]) -> None:
    home, project = places
    assert config("set", "agent.model", "deepseek-v4-pro")[0] == 0
    assert config("set", "agent.max_steps", "40")[0] == 0
    assert config("set", "agent.model", "deepseek-v4-flash", "--project")[0] == 0
    user = home / "settings.toml"
    assert stat.S_IMODE(user.stat().st_mode) == 0o600
    assert config("get", "agent.model")[1] == '"deepseek-v4-flash"\n'  # the project wins
    assert config("get", "agent.max_steps")[1] == "40\n"
    code, out, _ = config("list")
    assert f'agent.model = "deepseek-v4-flash"    # {project / ".dsh" / "settings.toml"}' in out
    assert f"agent.max_steps = 40    # {user}" in out
    user.write_text("# my comment\n" + user.read_text())
    assert config("unset", "agent.max_steps")[0] == 0
    assert "# my comment" in user.read_text()  # layout and comments survive an edit
    assert config("get", "agent.max_steps")[0] == 1
    code, out, err = config("get", "tui.theme")
    assert (code, out) == (0, '"dsh-dark"\n')
    assert "default" in err
    assert "user:" in config("path")[1]


def test_bad_values_and_credentials_are_refused_with_the_key(places: tuple[Path, Path]) -> None:
    code, _, err = config("set", "agent.max_steps", "0")
    assert code == 1
    assert "agent.max_steps" in err
    code, _, err = config("set", "permissions.mode", "yolo")
    assert code == 1
    assert "permissions.mode" in err
    code, _, err = config("set", "plugins.llm-deepseek.api_key", "sk-secret")
    assert code == 1
    assert "credential" in err
    code, _, err = config("set", "plugins.nope.x", "1")
    assert code == 1
    assert "no plugin named 'nope'" in err
    code, _, err = config("set", "plugins.bash.default_timeout_ms", "-5")
    assert code == 1
    assert "plugins.bash.default_timeout_ms" in err
    assert config("set", "plugins.bash.default_timeout_ms", "5000")[0] == 0
    home, _ = places
    assert "sk-secret" not in (home / "settings.toml").read_text()


def test_layers_defaults_user_project_environment(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "p"
    (project / ".dsh").mkdir(parents=True)
    home.mkdir()
    (home / "settings.toml").write_text('[agent]\nmodel = "a"\nmax_steps = 5\n')
    (project / ".dsh" / "settings.toml").write_text('[agent]\nmodel = "b"\n')
    environ = {
        "DSH_AGENT__MAX_STEPS": "7",
        "DSH_PLUGINS__LLM_DEEPSEEK__BASE_URL": "http://127.0.0.1:9",
        "DSH_HOME": "/ignored",
    }
    settings = load_settings(home, project, environ=environ, trust=True)
    assert settings.section("agent") == {"model": "b", "max_steps": 7}
    assert settings.plugin_configs()["llm-deepseek"] == {"base_url": "http://127.0.0.1:9"}
    assert settings.origin("agent").endswith("<environment>")


def test_a_bad_core_key_names_its_file_and_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.toml").write_text("[tui]\nmouse = 3\n")
    with pytest.raises(SettingsError, match=r"settings.toml: tui.mouse"):
        load_settings(home, tmp_path, environ={})
    (home / "settings.toml").write_text("[permissions]\nmodes = 'bypass'\n")
    with pytest.raises(SettingsError, match=r"permissions.modes: Extra inputs"):
        load_settings(home, tmp_path, environ={})
    with pytest.raises(SettingsError, match=r"<environment>: agent.max_steps"):
        load_settings(tmp_path / "none", tmp_path, environ={"DSH_AGENT__MAX_STEPS": "-1"})


def test_the_storage_backend_is_a_setting_config_shows(
    places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, _ = places
    monkeypatch.delenv("DSH_PERSISTENCE_BACKEND", raising=False)
    code, out, err = config("get", "storage.backend")
    assert (code, out) == (0, '"jsonl"\n')
    assert "default" in err
    code, _, err = config("set", "storage.backend", "mongo")
    assert code == 1
    assert "storage.backend: Input should be 'jsonl' or 'sqlite'" in err
    assert config("set", "storage.backend", "sqlite")[0] == 0
    assert f'storage.backend = "sqlite"    # {home / "settings.toml"}' in config("list")[1]
    monkeypatch.setenv("DSH_PERSISTENCE_BACKEND", "jsonl")  # the environment layer wins
    assert 'storage.backend = "jsonl"    # <environment>' in config("list")[1]
    code, _, err = config("set", "tui.mouse", "3")  # [tui], checked without pydantic
    assert code == 1
    assert "tui.mouse: Input should be a valid boolean" in err
