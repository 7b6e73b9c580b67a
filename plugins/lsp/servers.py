"""Which language server serves which file: built-in defaults per language, the
user's ``[plugins.lsp.servers.<name>]`` tables merged over them, and finding the
command on this machine.

A default is used only when its command is found (the first of its candidates that
is); otherwise calls for the language fail with ``LSP_UNAVAILABLE`` and the line that
installs one. A command the user configured is used as given, or reported missing:
never silently replaced by a default.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator

from dsh.tools import ToolError
from dsh_plugins.lsp.positions import Encoding


class ServerConfig(BaseModel):
    """One server's settings; every field left out keeps the built-in default."""

    model_config = {"extra": "forbid"}

    command: list[str] | None = None
    """The program and its arguments, speaking LSP on stdin/stdout."""
    extensions: list[str] | None = None
    """File extensions it serves (``.py``); they are taken from any other server."""
    initialization_options: dict[str, Any] | None = None
    settings: dict[str, Any] | None = None
    """Sent with ``workspace/didChangeConfiguration`` and answered to ``workspace/configuration``."""
    env: dict[str, str] = Field(default_factory=dict)
    """Variables added to the (credential-scrubbed) environment of the process."""
    enabled: bool = True
    position_encoding: Encoding | None = None
    """How the server counts columns, when it does not count as it says (``utf-16``
    is the spec's; ``utf-32`` is code points)."""

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not value[0].strip()):
            raise ValueError("command must name a program")
        return value

    @field_validator("extensions")
    @classmethod
    def _extensions(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        return [ext.lower() if ext.startswith(".") else f".{ext.lower()}" for ext in value]


@dataclass(frozen=True)
class Default:
    candidates: tuple[tuple[str, ...], ...]
    """Commands tried in order; the first whose program is found is used."""
    extensions: tuple[str, ...]
    hint: str
    """How to install one."""


def _beside_python(program: str) -> str:
    """A program installed next to this interpreter (a venv's ``bin``), found even
    when that folder is not on PATH."""
    return str(Path(sys.executable).parent / program)


DEFAULTS: dict[str, Default] = {
    "python": Default(
        ((_beside_python("pylsp"),), ("pylsp",), ("pyright-langserver", "--stdio")),
        (".py", ".pyi"),
        "pip install python-lsp-server (or: npm i -g pyright)",
    ),
    "typescript": Default(
        (("typescript-language-server", "--stdio"),),
        (".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs"),
        "npm i -g typescript-language-server typescript",
    ),
    "go": Default((("gopls",),), (".go",), "go install golang.org/x/tools/gopls@latest"),
    "rust": Default((("rust-analyzer",),), (".rs",), "rustup component add rust-analyzer"),
    "c": Default(
        (("clangd",),),
        (".c", ".h", ".cc", ".cpp", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h++"),
        "apt install clangd (or your platform's clangd package)",
    ),
}


@dataclass(frozen=True)
class Quirk:
    """How a server really counts columns while announcing no encoding (so, by the
    spec, UTF-16)."""

    encoding: Encoding
    diagnostics: dict[str, Encoding] = field(default_factory=dict)
    """For diagnostics from these sources, when they count otherwise again."""


QUIRKS: dict[str, Quirk] = {
    # pylsp passes jedi's columns (code points) through unconverted, and pyflakes'
    # (Python's ast: UTF-8 bytes) too.
    "pylsp": Quirk("utf-32", {"pyflakes": "utf-8"}),
}

LANGUAGE_IDS: dict[str, str] = {
    ".py": "python", ".pyi": "python",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".tsx": "typescriptreact", ".js": "javascript", ".mjs": "javascript",
    ".cjs": "javascript", ".jsx": "javascriptreact",
    ".go": "go", ".rs": "rust", ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp",
    ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp", ".h++": "cpp",
}  # fmt: skip
"""The ``languageId`` of ``didOpen``; other extensions send the server's name."""


@dataclass(frozen=True)
class ServerSpec:
    """A server ready to start: its command found."""

    name: str
    command: tuple[str, ...]
    initialization_options: dict[str, Any] | None = None
    settings: dict[str, Any] | None = None
    env: dict[str, str] = field(default_factory=dict)
    position_encoding: Encoding | None = None
    """From settings: wins over what the server announces."""
    quirk: Quirk | None = None
    """For a server known to count otherwise than it announces, when it announces nothing."""

    @property
    def program(self) -> str:
        return os.path.basename(self.command[0])


@dataclass(frozen=True)
class Entry:
    name: str
    candidates: tuple[tuple[str, ...], ...]
    configured: bool
    """The command came from the user's settings."""
    hint: str
    enabled: bool
    initialization_options: dict[str, Any] | None
    settings: dict[str, Any] | None
    env: dict[str, str]
    position_encoding: Encoding | None


class Catalog:
    """The configured servers and the extensions each serves."""

    def __init__(self, configs: dict[str, ServerConfig]) -> None:
        self.entries: dict[str, Entry] = {}
        self.by_extension: dict[str, str] = {}
        for name, built_in in DEFAULTS.items():
            for ext in built_in.extensions:
                self.by_extension[ext] = name
        for name in [*DEFAULTS, *(n for n in configs if n not in DEFAULTS)]:
            default = DEFAULTS.get(name)
            config = configs.get(name, ServerConfig())
            if default is None and (config.command is None or not config.extensions):
                raise ValueError(
                    f"servers.{name}: a server without a built-in default needs a command "
                    "and extensions"
                )
            if config.extensions is not None:  # replaces its own, takes them from others
                for ext in [e for e, owner in self.by_extension.items() if owner == name]:
                    del self.by_extension[ext]
                self.by_extension.update(dict.fromkeys(config.extensions, name))
            if config.command is not None:
                candidates: tuple[tuple[str, ...], ...] = (tuple(config.command),)
            else:
                candidates = default.candidates if default is not None else ()
            self.entries[name] = Entry(
                name=name,
                candidates=candidates,
                configured=config.command is not None,
                hint=default.hint if default is not None else "",
                enabled=config.enabled,
                initialization_options=config.initialization_options,
                settings=config.settings,
                env=dict(config.env),
                position_encoding=config.position_encoding,
            )

    def server_name(self, path: Path) -> str:
        """The server for ``path``, or LSP_UNAVAILABLE naming its extension."""
        ext = path.suffix.lower()
        name = self.by_extension.get(ext)
        if name is None:
            known = " ".join(sorted(self.by_extension))
            what = f"{ext} files" if ext else f"files without an extension ({path.name})"
            raise ToolError(
                f"no language server is configured for {what}. Servers cover: {known}. "
                "Add one in settings under [plugins.lsp.servers.<name>] with command "
                "and extensions.",
                "LSP_UNAVAILABLE",
            )
        if not self.entries[name].enabled:
            raise ToolError(
                f"the {name} language server is disabled in settings "
                f"([plugins.lsp.servers.{name}] enabled = false).",
                "LSP_UNAVAILABLE",
            )
        return name

    def language_id(self, path: Path, server: str) -> str:
        return LANGUAGE_IDS.get(path.suffix.lower(), server)

    def server_name_or_none(self, path: Path) -> str | None:
        """The server for ``path`` if one is configured and enabled; None otherwise."""
        name = self.by_extension.get(path.suffix.lower())
        return name if name is not None and self.entries[name].enabled else None

    def spec(self, name: str) -> ServerSpec:
        """The server's command as found on this machine, or LSP_UNAVAILABLE with the
        install hint. Blocking (searches PATH)."""
        entry = self.entries[name]
        for candidate in entry.candidates:
            found = shutil.which(candidate[0])
            if found is not None:
                return ServerSpec(
                    name=name,
                    command=(found, *candidate[1:]),
                    initialization_options=entry.initialization_options,
                    settings=entry.settings,
                    env=entry.env,
                    position_encoding=entry.position_encoding,
                    quirk=QUIRKS.get(os.path.basename(found)),
                )
        if entry.configured:
            program = entry.candidates[0][0]
            hint = f" Install it ({entry.hint})" if entry.hint else " Install it"
            raise ToolError(
                f"the {name} language server command {program!r} was not found.{hint} or "
                f"fix [plugins.lsp.servers.{name}] command in settings.",
                "LSP_UNAVAILABLE",
            )
        tried = ", ".join(os.path.basename(c[0]) for c in entry.candidates)
        raise ToolError(
            f"no {name} language server is installed (looked for {tried}). "
            f"Install one: {entry.hint}.",
            "LSP_UNAVAILABLE",
        )
