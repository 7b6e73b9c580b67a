"""``dsh --demo``: every part of dsh at work, with no API key and no network.

A demo is data: a throwaway project's files, the prompt put in the input, the
scripted model's side of the conversation (a :class:`~dsh.testing.Script` the server
of :mod:`dsh.testing` plays on 127.0.0.1), the plugin settings that point dsh at that
server (``{{server}}`` stands for its address) and the environment they need. The
bundled plugins ship theirs, ``demo.json`` beside them, which this module plays: the
core names none of the tools, plugins or providers in it. The UI is the real one;
only the model is scripted, so whatever you type, the same conversation plays.
"""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from dsh import DISTRIBUTION
from dsh.kernel.loader import bundled_package
from dsh.testing import FakeLLM, Script

DEMO_FILE = "demo.json"
SERVER = "{{server}}"


class DemoError(RuntimeError):
    """No demo to play: the bundled one is missing or broken (a broken install)."""


class Scenario(BaseModel):
    """A demo, as its file holds it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    about: str = ""
    prompt: str
    """Put in the input, not sent: the person sends it."""
    files: dict[str, str]
    """The project's files, by path relative to it."""
    script: Script
    plugins: dict[str, dict[str, Any]] = {}
    """Plugin settings for the demo (they replace the configured ones)."""
    environment: dict[str, str] = {}
    """Variables the demo's run needs, such as a key the scripted server takes."""


def bundled_scenario() -> Scenario:
    """The demo the bundled plugins ship. Raises :class:`DemoError`."""
    package = bundled_package()
    if package is None:
        raise DemoError(f"no bundled plugins: {DISTRIBUTION} is not installed")
    spec = importlib.util.find_spec(package)  # found, not imported
    folders = spec.submodule_search_locations if spec is not None else None
    for folder in folders or ():
        path = Path(folder) / DEMO_FILE
        if path.is_file():
            try:
                return Scenario.model_validate_json(path.read_bytes())
            except ValidationError as error:
                raise DemoError(f"{path}: not a demo: {error}") from None
    raise DemoError(f"no {DEMO_FILE} in the bundled plugins ({package})")


@dataclass
class Demo:
    scenario: Scenario
    server: FakeLLM
    project: Path
    home: Path
    scratch: Path | None = None
    """The temporary folder the demo made for itself, removed by :meth:`close`."""

    @property
    def prompt(self) -> str:
        return self.scenario.prompt

    @property
    def environment(self) -> dict[str, str]:
        return dict(self.scenario.environment)

    @property
    def plugin_configs(self) -> dict[str, dict[str, Any]]:
        """What points dsh at the scripted server (a key it accepts is in the
        environment)."""
        address = self.server.base_url
        return {name: _with_server(table, address) for name, table in self.scenario.plugins.items()}

    async def close(self) -> None:
        await self.server.close()
        if self.scratch is not None:
            await _remove(self.scratch)


async def _remove(folder: Path, tries: int = 20) -> None:
    """Remove the demo's folder. A program the demo started (its language server, a
    command) may still be writing there as it dies, which leaves a folder behind an
    rmtree that raced it: try again, briefly, until it is gone."""
    for _ in range(tries):
        if await asyncio.to_thread(_rmtree, folder):
            return
        await asyncio.sleep(0.1)


def _rmtree(folder: Path) -> bool:
    shutil.rmtree(folder, ignore_errors=True)
    return not folder.exists()


def _with_server(value: Any, address: str) -> Any:
    if isinstance(value, str):
        return value.replace(SERVER, address)
    if isinstance(value, dict):
        return {key: _with_server(item, address) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_server(item, address) for item in value]
    return value


async def start_demo(root: Path | None = None, scenario: Scenario | None = None) -> Demo:
    """The demo project and a started scripted server (the bundled scenario unless one
    is given). The caller runs the UI with ``DSH_HOME=demo.home``, ``demo.environment``
    and ``demo.plugin_configs``, and ``demo.prompt`` in the input."""
    if scenario is None:
        scenario = await asyncio.to_thread(bundled_scenario)
    for name in scenario.files:
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise DemoError(f"the demo's file {name!r} is outside its project")
    base = Path(tempfile.mkdtemp(prefix="dsh-demo-")) if root is None else root
    project, home = base / "project", base / "home"
    project.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name, text in scenario.files.items():
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    server = FakeLLM(scenario.script)
    await server.start()
    return Demo(scenario, server, project, home, base if root is None else None)
