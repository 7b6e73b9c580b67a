"""Settings documents: TOML files, the user's and the project's, read in layers.

``$DSH_HOME/settings.toml`` is the user document; ``.dsh/settings.toml`` in the project
(the nearest one from the working directory up) is the project document, which wins
where both set a key. Plugins are configured by ``[plugins.<plugin-name>]`` tables and
switched off by ``[plugins] disabled = ["name", ...]``; ``[plugins] modules`` names
modules to load plugins from, beyond the bundled and installed ones::

    [plugins.llm-deepseek]
    base_url = "https://proxy.example.com"
    models.deepseek-v4-flash.context_window = 500000

Credentials never live here: settings name them (``api_key_env = "MY_KEY"``).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

USER_FILE = "settings.toml"
PROJECT_DIR = ".dsh"


class SettingsError(ValueError):
    """A settings document cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Document:
    path: Path
    values: dict[str, Any]


@dataclass(frozen=True)
class Settings:
    """The documents in force, lowest layer first."""

    documents: tuple[Document, ...] = ()
    merged: dict[str, Any] = field(default_factory=dict)

    def section(self, *keys: str) -> dict[str, Any]:
        """The merged table at ``keys`` (empty if absent)."""
        node: Any = self.merged
        for key in keys:
            node = node.get(key, {}) if isinstance(node, dict) else {}
        return dict(node) if isinstance(node, dict) else {}

    def origin(self, *keys: str) -> str:
        """Which files set the table at ``keys``, for error messages."""
        found = []
        for document in self.documents:
            node: Any = document.values
            for key in keys:
                node = node.get(key) if isinstance(node, dict) else None
            if node is not None:
                found.append(str(document.path))
        return " and ".join(found) or "defaults"

    def plugin_configs(self) -> dict[str, dict[str, Any]]:
        plugins = self.section("plugins")
        return {name: value for name, value in plugins.items() if isinstance(value, dict)}

    def plugin_modules(self) -> list[str]:
        modules = self.section("plugins").get("modules", [])
        if not isinstance(modules, list) or not all(isinstance(n, str) for n in modules):
            raise SettingsError(
                f"{self.origin('plugins')}: plugins.modules must be a list of module names"
            )
        return modules

    def disabled_plugins(self) -> list[str]:
        disabled = self.section("plugins").get("disabled", [])
        if not isinstance(disabled, list) or not all(isinstance(n, str) for n in disabled):
            raise SettingsError(
                f"{self.origin('plugins')}: plugins.disabled must be a list of plugin names"
            )
        return disabled


def project_document(cwd: Path, home: Path | None = None) -> Path | None:
    """The nearest ``.dsh/settings.toml`` from ``cwd`` up, not above the home folder."""
    stop = home.resolve() if home is not None else Path.home().resolve()
    for folder in (cwd.resolve(), *cwd.resolve().parents):
        candidate = folder / PROJECT_DIR / USER_FILE
        if candidate.is_file():
            return candidate
        if folder == stop:
            break
    return None


def read_document(path: Path) -> Document:
    try:
        with path.open("rb") as handle:
            values = tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"{path}: not valid TOML: {error}") from None
    except OSError as error:
        raise SettingsError(f"{path}: cannot be read: {error.strerror}") from None
    return Document(path, values)


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` laid on ``base``: tables merge key by key, anything else replaces."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def load_settings(home: Path, cwd: Path) -> Settings:
    """The user document, then the project document, merged."""
    paths = [home / USER_FILE]
    project = project_document(cwd)
    if project is not None and project != paths[0]:
        paths.append(project)
    documents = tuple(read_document(p) for p in paths if p.is_file())
    merged: dict[str, Any] = {}
    for document in documents:
        merged = merge(merged, document.values)
    return Settings(documents, merged)
