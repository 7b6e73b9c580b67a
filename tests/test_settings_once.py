"""The settings are read once per process and handed down: a TUI start-up (the trust
question answered "trust" on the way) and a ``dsh -p`` run each read every settings
document exactly once, and the runtime, its plugins and the front end see the same
validated tables."""

from __future__ import annotations

import asyncio
import io
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Button

import dsh.settings
from dsh.services import APPROVALS, SETTINGS
from dsh.settings_files import Document
from dsh.testing import FakeLLM, Reply
from dsh.ui.headless import HeadlessRequest, run
from dsh.ui.tui.app import DshApp
from dsh.ui.tui.launch import tui_request
from dsh.ui.tui.screens.trust import TrustScreen
from tests.ui.tui_support import SIZE, until

LIMIT = 30.0
"""Any one wait: start-up imports the runtime and the plugins, slow on a loaded box."""


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[Path]:
    """How many times each settings document is read."""
    counted: Counter[Path] = Counter()
    read = dsh.settings.read_document

    def counting(path: Path) -> Document:
        counted[path.resolve()] += 1
        return read(path)

    monkeypatch.setattr(dsh.settings, "read_document", counting)
    return counted


def make_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLLM) -> Path:
    """``$DSH_HOME`` whose settings point the provider at the scripted server."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.delenv("NO_COLOR", raising=False)
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("DSH_HOME", str(home))
    (home / "settings.toml").write_text(
        f'[plugins.llm-deepseek]\nbase_url = "{fake_llm.base_url}"\n\n'
        "[plugins.title]\ngenerate = false\n\n[tui]\ncopy_on_select = false\n"
    )
    return home


def make_project(tmp_path: Path, settings: str) -> Path:
    """A cloned repository with its own settings (0644, as a clone leaves them)."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / ".dsh").mkdir()
    path = project / ".dsh" / "settings.toml"
    path.write_text(settings)
    path.chmod(0o644)
    return project.resolve()


async def test_a_tui_start_reads_each_document_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLLM, reads: Counter[Path]
) -> None:
    home = make_home(tmp_path, monkeypatch, fake_llm)
    project = make_project(tmp_path, '[permissions]\nmode = "bypass"\n\n[agent]\nmax_steps = 3\n')
    request = tui_request(None, cwd=project)  # what `dsh` does before the first frame
    assert request.copy_on_select is False  # [tui], typed, before pydantic is needed
    app = DshApp(request)
    async with app.run_test(size=SIZE) as pilot:
        try:

            def asked() -> bool:
                return isinstance(app.screen, TrustScreen) and len(app.screen.query(Button)) == 3

            await until(pilot, asked, LIMIT, "the trust dialog")
            await pilot.press("tab", "right", "enter")  # Trust
            await asyncio.wait_for(app.ready.wait(), LIMIT)
            assert app.runtime is not None
            settings = app.runtime.root.get(SETTINGS)
            # Trusting applied the project's document whole, read once all the same.
            assert settings.trusted
            assert settings.permissions.mode == "bypass"
            assert app.runtime.root.get(APPROVALS).mode == "bypass"
            assert app.agent is not None
            assert app.agent.options.max_steps == 3
        finally:
            await app.shutdown()
    assert reads == {
        (home / "settings.toml").resolve(): 1,
        project / ".dsh" / "settings.toml": 1,
    }


async def test_a_headless_run_reads_each_document_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLLM, reads: Counter[Path]
) -> None:
    home = make_home(tmp_path, monkeypatch, fake_llm)
    project = make_project(tmp_path, '[agent]\nmax_steps = 3\n\n[storage]\nbackend = "sqlite"\n')
    fake_llm.add(Reply(text="Read once."))
    out, err = io.StringIO(), io.StringIO()
    code = await run(HeadlessRequest(prompt="hello", cwd=project), out=out, err=err)
    assert code == 0, err.getvalue()
    assert out.getvalue() == "Read once.\n"
    # Untrusted: the project may narrow the limits, not choose where sessions go.
    assert "ignored storage.backend" in err.getvalue()
    assert reads == {
        (home / "settings.toml").resolve(): 1,
        project / ".dsh" / "settings.toml": 1,
    }
    assert list(home.glob("sessions/**/*.jsonl"))  # stored as the user's settings say


def test_decided_trust_relayers_what_was_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: Counter[Path]
) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "settings.toml").write_text('[permissions]\nmode = "default"\n')
    project = make_project(
        tmp_path, '[permissions]\nmode = "bypass"\n[storage]\nbackend = "sqlite"\n'
    )
    untrusted = dsh.settings.load_settings(home, project, environ={})
    assert untrusted.trust == "unknown"
    assert untrusted.permissions.mode == "default"
    assert untrusted.storage.backend == "jsonl"
    trusted = untrusted.decided(True)
    assert sum(reads.values()) == 2  # nothing read again
    again = dsh.settings.load_settings(home, project, environ={}, trust=True)
    assert trusted.merged == again.merged
    assert trusted.permissions.mode == "bypass"
    assert trusted.storage.backend == "sqlite"
    assert not trusted.ignored
    assert untrusted.decided(False).ignored == untrusted.ignored


def test_storage_backend_from_the_environment(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "settings.toml").write_text('[storage]\nbackend = "sqlite"\n')

    def backend(**environ: str) -> Any:
        return dsh.settings.load_settings(home, tmp_path, environ=environ).storage.backend

    assert backend() == "sqlite"
    # The older variable is the environment layer's other name for storage.backend.
    assert backend(DSH_PERSISTENCE_BACKEND="jsonl") == "jsonl"
    assert backend(DSH_PERSISTENCE_BACKEND=" SQLite ") == "sqlite"
    assert backend(DSH_PERSISTENCE_BACKEND="") == "sqlite"  # empty: as unset
    assert backend(DSH_STORAGE__BACKEND="jsonl", DSH_PERSISTENCE_BACKEND="sqlite") == "jsonl"
    with pytest.raises(dsh.settings.SettingsError, match=r"<environment>: storage.backend"):
        backend(DSH_PERSISTENCE_BACKEND="mongo")


def test_permission_modes_are_defined_once() -> None:
    from typing import get_args

    from dsh.cli import build_parser
    from dsh.permission_modes import MODES, PermissionMode
    from dsh.policy.permissions import MODES as TOOL_MODES
    from dsh.settings_tables import PermissionsTable

    flag = next(a for a in build_parser()._actions if a.dest == "permission_mode")
    assert tuple(flag.choices or ()) == MODES == TOOL_MODES == get_args(PermissionMode)
    assert get_args(PermissionsTable.model_fields["mode"].annotation) == MODES
