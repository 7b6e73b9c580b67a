"""Settings: TOML documents and the environment, read in layers.

Layers, lowest first: the defaults (in the models that read each table), the user
document ``$DSH_HOME/settings.toml``, the project document (the nearest
``.dsh/settings.toml`` from the working directory up to the project root, never
above the home folder), the environment, and last the command line (flags such as
``--model`` apply over all of these). A later layer wins key by key; permission
rules add up instead. The project document applies in full only in a folder the
user trusts (:mod:`dsh.trust`); elsewhere only its keys that narrow what dsh does
apply (:mod:`dsh.narrowing`). A settings file that another user owns or could write
is refused. In the environment, ``DSH_<TABLE>__<KEY>=value`` sets ``table.key``
(``DSH_AGENT__MODEL=deepseek-v4-pro``; a plugin's table is
``DSH_PLUGINS__MY_PLUGIN__BASE_URL`` for ``my-plugin``, underscores in the plugin's
name standing for hyphens); the value is read as a TOML value when it parses as one, else as text.

The result is one :class:`Settings` per process: read once (the front end loads it, or
the session controller when the front end did not), handed to the runtime and from
it to the plugins (the ``settings`` service). Callers read the validated core tables
as typed attributes (``settings.agent``, ``.permissions``, ``.tui``, ``.storage``),
not the documents.

Core tables are validated here (:data:`CORE_TABLES`); plugins are configured by
``[plugins.<plugin-name>]`` tables, validated by each plugin's own model when it
loads, and switched off by ``[plugins] disabled = ["name", ...]``; ``[plugins]
modules`` names modules to load plugins from, beyond the bundled and installed ones::

    [plugins.my-provider]
    base_url = "https://proxy.example.com"
    models.my-model.context_window = 500000

Credentials never live here: settings name them (``api_key_env = "MY_KEY"``).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh.kernel import ServiceKey
from dsh.narrowing import Ignored, narrow

# PROJECT_DIR and its kin are dsh.paths's; still importable from here.
from dsh.paths import ENV_FILE as ENV_FILE
from dsh.paths import PROJECT_DIR as PROJECT_DIR
from dsh.paths import USER_FILE as USER_FILE
from dsh.paths import unsafe_to_obey
from dsh.settings_files import Document as Document
from dsh.settings_files import SettingsError as SettingsError
from dsh.settings_files import read_document as read_document
from dsh.settings_files import write_private as write_private
from dsh.settings_tui import TableProblem as TableProblem
from dsh.settings_tui import TuiTable
from dsh.trust import TrustState, TrustStore, project_root

if TYPE_CHECKING:
    from dsh.settings_tables import (
        AgentOptions,
        CheckpointsTable,
        PermissionsTable,
        SandboxTable,
        StorageTable,
    )

ENV_PREFIX = "DSH_"
# DSH_* names that are not settings (read by their own code, or meant for children).
ENV_RESERVED = frozenset({"DSH_HOME", "DSH_SESSION_ID", "DSH_SESSION_JSONL", "DSH_SHELL"})
ENV_ALIASES = {"DSH_PERSISTENCE_BACKEND": ("storage", "backend")}
"""Older names of settings in the environment. ``DSH_STORAGE__BACKEND`` wins over
``DSH_PERSISTENCE_BACKEND`` when both are set."""
ENVIRONMENT = Path("<environment>")


@dataclass(frozen=True)
class Settings:
    """The documents in force, lowest layer first."""

    documents: tuple[Document, ...] = ()
    merged: dict[str, Any] = field(default_factory=dict)
    own: dict[str, Any] = field(default_factory=dict)
    """The user's own layers merged (user document, environment): what a project,
    trusted or not, did not set. A key is sent only where these say
    (:meth:`own_section`)."""
    root: Path | None = None
    """The project root trust is decided for."""
    project: Path | None = None
    """The project document found, applied in full or narrowed."""
    trust: TrustState = "unknown"
    ignored: tuple[Ignored, ...] = ()
    """Keys of the project's configuration not applied: the folder is not trusted."""
    own_documents: tuple[Document, ...] = ()
    """The user's own documents as read (the user file, the environment)."""
    project_document: Document | None = None
    """The project document as read, whole, whether it applies or not: deciding the
    project's trust later (:meth:`decided`) reads nothing again."""
    claude_documents: tuple[Document, ...] = ()
    """A project's Claude Code settings (``.claude/settings.json``, then
    ``settings.local.json``) in dsh's words, whole, whether they apply or not: project
    layers beneath the project document (:mod:`dsh.claude_code`)."""
    claude_notes: tuple[str, ...] = ()
    """Which Claude Code files were read, and what of them is not applied: said once
    at start-up, with the project's keys not applied."""

    @property
    def trusted(self) -> bool:
        return self.trust == "trusted"

    # The core tables, validated from the merged documents on first use (a table
    # nobody reads costs nothing; ``[tui]`` is read before pydantic is imported).

    @cached_property
    def agent(self) -> AgentOptions:
        """``[agent]``: what each agent starts with."""
        return self._validated("agent")  # type: ignore[no-any-return]

    @cached_property
    def permissions(self) -> PermissionsTable:
        """``[permissions]``: the mode and the rules, allow and deny added up over the layers."""
        return self._validated("permissions")  # type: ignore[no-any-return]

    @cached_property
    def tui(self) -> TuiTable:
        """``[tui]``: the interactive UI."""
        return self._validated("tui")  # type: ignore[no-any-return]

    @cached_property
    def storage(self) -> StorageTable:
        """``[storage]``: where sessions are kept."""
        return self._validated("storage")  # type: ignore[no-any-return]

    @cached_property
    def checkpoints(self) -> CheckpointsTable:
        """``[checkpoints]``: snapshots of the project's files, for ``/undo``."""
        return self._validated("checkpoints")  # type: ignore[no-any-return]

    @cached_property
    def sandbox(self) -> SandboxTable:
        """``[sandbox]`` as the user's own layers set it, with the policy a project's
        settings (trusted or not) may only narrow: a repository cannot turn off or
        widen what contains the commands run in it."""
        from dsh.sandbox.policy import POLICIES, narrowest

        try:
            table = validate_table("sandbox", self.own_section("sandbox"))
        except TableProblem as problem:
            key = ".".join(("sandbox", *problem.loc))
            raise SettingsError(f"{self.origin('sandbox')}: {key}: {problem.msg}") from None
        project = self.project_document.values if self.project_document is not None else {}
        wanted = (
            project.get("sandbox", {}).get("policy")
            if isinstance(project.get("sandbox"), dict)
            else None
        )
        if wanted in POLICIES:
            table = table.model_copy(update={"policy": narrowest(table.policy, wanted)})
        return table  # type: ignore[no-any-return]

    def _validated(self, name: str) -> Any:
        try:
            return validate_table(name, self.section(name))
        except TableProblem as problem:
            key = ".".join((name, *problem.loc))
            raise SettingsError(f"{self.origin(name)}: {key}: {problem.msg}") from None

    def decided(self, trusted: bool) -> Settings:
        """These settings once the project's trust is decided: the project document
        whole, or only what narrows, as :func:`load_settings` would have it with
        ``trust=trusted``, without reading any file again. Checked as loaded."""
        settings = _layered(
            self.own_documents,
            self.project_document,
            root=self.root,
            project=self.project,
            state="trusted" if trusted else "untrusted",
            claude=self.claude_documents,
            notes=self.claude_notes,
        )
        check_core_tables(settings)
        return settings

    def own_section(self, *keys: str) -> dict[str, Any]:
        """The table at ``keys`` as the user's own layers set it."""
        return _table(self.own, keys)

    def section(self, *keys: str) -> dict[str, Any]:
        """The merged table at ``keys`` (empty if absent)."""
        return _table(self.merged, keys)

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


def _table(values: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    node: Any = values
    for key in keys:
        node = node.get(key, {}) if isinstance(node, dict) else {}
    return dict(node) if isinstance(node, dict) else {}


def project_document(cwd: Path, root: Path | None = None, home: Path | None = None) -> Path | None:
    """The nearest ``.dsh/settings.toml`` from ``cwd`` up to the project ``root`` (see
    :func:`dsh.trust.project_root`), never above the home folder: a folder above the
    project, such as a shared ``/tmp``, configures nothing."""
    here = cwd.resolve()
    top = (root or project_root(here)).resolve()
    stop = home.resolve() if home is not None else Path.home().resolve()
    for folder in (here, *here.parents):
        candidate = folder / PROJECT_DIR / USER_FILE
        if candidate.is_file():
            return candidate
        if folder in (top, stop):
            break
    return None


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` laid on ``base``: tables merge key by key, anything else replaces."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def environment_document(environ: Mapping[str, str]) -> Document | None:
    """The ``DSH_<TABLE>__<KEY>`` variables as one more document."""
    values: dict[str, Any] = {}
    for alias, (table, key) in ENV_ALIASES.items():
        raw = environ.get(alias, "").strip().lower()
        if raw:  # empty, as unset: the default
            values.setdefault(table, {})[key] = parse_value(raw)
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or name in ENV_RESERVED or name in ENV_ALIASES:
            continue
        if "__" not in name:
            continue
        parts = [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]
        if not all(parts):
            continue
        if parts[0] == "plugins" and len(parts) > 2:
            parts[1] = parts[1].replace("_", "-")
        node = values
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break
            node = child
        else:
            node[parts[-1]] = parse_value(raw)
    return Document(ENVIRONMENT, values) if values else None


def parse_value(text: str) -> Any:
    """A TOML value (``8``, ``true``, ``["a"]``, ``"x"``) when ``text`` is one, else the text."""
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text


def load_settings(
    home: Path,
    cwd: Path,
    *,
    environ: Mapping[str, str] | None = None,
    check: bool = True,
    trust: bool | None = None,
) -> Settings:
    """The user document, the project document and the environment, merged.

    The project document applies in full only when its project is trusted: by
    ``trust=True`` (``--trust``), or a decision in the trust store when ``trust`` is
    None. Otherwise only the keys that narrow apply (:func:`dsh.narrowing.narrow`),
    and :attr:`Settings.ignored` lists the rest. A settings file another user could
    have written is refused. ``check=False`` skips validating the core tables (a quick
    look before start-up, which validates them again)."""
    root = project_root(cwd)
    user_path = home / USER_FILE
    project = project_document(cwd, root)
    if project is not None and project.resolve() == user_path.resolve():
        project = None  # $DSH_HOME is ~/.dsh and dsh runs in ~
    for path in (user_path, project):
        if path is not None and path.is_file():
            problem = unsafe_to_obey(path)
            if problem is not None:
                raise SettingsError(
                    f"{path}: refused, {problem}; a settings file decides what dsh may do "
                    "without asking, so only you may write it"
                )
    own = [read_document(user_path)] if user_path.is_file() else []
    variables = os.environ if environ is None else environ
    from_env = environment_document(variables)
    if from_env is not None:
        own.append(from_env)
    claude, notes = _claude_files(own, variables, cwd, root)
    own = claude.own + own
    project_doc = read_document(project) if project is not None else None
    state: TrustState = "unknown"
    if trust is not None:
        state = "trusted" if trust else "untrusted"
    elif (
        project_doc is not None
        or claude.project
        or (cwd / ENV_FILE).is_file()
        or TrustStore(home).path.exists()
    ):
        # A decision made before counts even without a settings document: plugins read
        # project files of their own only when the project is trusted.
        state = TrustStore(home).state(root)  # a TrustError is a SettingsError
    settings = _layered(
        tuple(own),
        project_doc,
        root=root,
        project=project,
        state=state,
        claude=claude.project,
        notes=notes,
    )
    if check:
        check_core_tables(settings)
    return settings


@dataclass(frozen=True)
class _ClaudeLayers:
    own: list[Document] = field(default_factory=list)
    """The user's Claude Code file, beneath the user's own settings file."""
    project: tuple[Document, ...] = ()


def _claude_files(
    own: list[Document], environ: Mapping[str, str], cwd: Path, root: Path
) -> tuple[_ClaudeLayers, tuple[str, ...]]:
    """Claude Code's settings files in dsh's words, when the user's own layers leave
    ``[claude_code] read`` on, and the lines saying what was read (:mod:`dsh.claude_code`)."""
    from dsh import claude_code

    if not claude_code.claude_reading(merged_documents(own)):
        return _ClaudeLayers(), ()
    home = claude_code.home_folder(environ)
    user = claude_code.user_folder(environ, home)
    read = [claude_code.read_claude_file(user / claude_code.SETTINGS_FILE, base=home, home=home)]
    mine = [file.document for file in read if file is not None and file.document.values]
    theirs: list[Document] = []
    folder = claude_code.project_folder(cwd, root, user, home)
    if folder is not None:
        for name in claude_code.PROJECT_FILES:
            path = folder / claude_code.CLAUDE_DIR / name
            found = claude_code.read_claude_file(path, base=folder, home=home)
            read.append(found)
            if found is not None and found.document.values:
                theirs.append(found.document)
    notes: list[str] = []
    for file in read:
        if file is not None:
            notes += [file.summary, *file.notes] if file.document.values else file.notes
    return _ClaudeLayers(mine, tuple(theirs)), tuple(notes)


def _layered(
    own: tuple[Document, ...],
    project_doc: Document | None,
    *,
    root: Path | None,
    project: Path | None,
    state: TrustState,
    claude: tuple[Document, ...] = (),
    notes: tuple[str, ...] = (),
) -> Settings:
    """The documents in layers: the user's files (Claude Code's, then dsh's), the
    project's (Claude Code's, then the project document: whole when trusted, else what
    narrows), the environment."""
    own_merged = merged_documents(own)
    ignored: list[Ignored] = []
    documents = [document for document in own if document.path != ENVIRONMENT]
    for document in (*claude, *([project_doc] if project_doc is not None else [])):
        if state == "trusted":
            documents.append(document)
        else:
            kept, left_out = narrow(document.values, own_merged)
            documents.append(Document(document.path, kept))
            ignored += [replace(item, origin=str(document.path)) for item in left_out]
    documents += [document for document in own if document.path == ENVIRONMENT]
    return Settings(
        tuple(documents),
        merged_documents(documents),
        own=own_merged,
        root=root,
        project=project,
        trust=state,
        ignored=tuple(ignored),
        own_documents=own,
        project_document=project_doc,
        claude_documents=claude,
        claude_notes=notes,
    )


def merged_documents(documents: Iterable[Document]) -> dict[str, Any]:
    """The documents laid one on the next. Permission rules add up instead: a later
    layer's ``deny = []`` must not erase the deny rules of the layers under it; and so
    do each event's hooks, as Claude Code's do across its files: a project's hooks
    run beside the user's, not instead of them."""
    merged: dict[str, Any] = {}
    gathered: dict[str, list[Any]] = {"allow": [], "deny": []}
    hooks: dict[str, list[Any]] = {}
    for document in documents:
        merged = merge(merged, document.values)
        table = document.values.get("permissions")
        if isinstance(table, Mapping):
            for name, rules in gathered.items():
                value = table.get(name)
                if isinstance(value, list):
                    rules.extend(rule for rule in value if rule not in rules)
        events = document.values.get("hooks")
        if isinstance(events, Mapping):
            for event, groups in events.items():
                if isinstance(groups, list):
                    listed = hooks.setdefault(event, [])
                    listed.extend(group for group in groups if group not in listed)
    if hooks and isinstance(merged.get("hooks"), dict):
        merged["hooks"] = {**merged["hooks"], **hooks}
    table = merged.get("permissions")
    if isinstance(table, dict):
        # A new table: with one layer setting it, ``merge`` handed over that document's
        # own, which must not change under it.
        added = {
            name: rules for name, rules in gathered.items() if isinstance(table.get(name), list)
        }
        merged["permissions"] = {**table, **added}
    return merged


def check_core_tables(settings: Settings) -> None:
    """Validate the core's own tables in each document, naming the file and the key of
    any problem."""
    for name in CORE_TABLES:
        for document in settings.documents:
            table = document.values.get(name)
            if table is None:
                continue
            if not isinstance(table, dict):
                raise SettingsError(f"{document.path}: {name} must be a table")
            try:
                validate_table(name, table)
            except TableProblem as problem:
                key = ".".join((name, *problem.loc))
                raise SettingsError(f"{document.path}: {key}: {problem.msg}") from None


def validate_table(name: str, table: Mapping[str, Any]) -> Any:
    """The core table ``name`` read from ``table`` by its model; a
    :class:`~dsh.settings_tui.TableProblem` says what it refuses."""
    model = CORE_TABLES[name]()
    if model is TuiTable:  # checked without pydantic: see dsh.settings_tui
        return TuiTable.model_validate(table)
    from pydantic import ValidationError

    try:
        return model.model_validate(table)
    except ValidationError as error:
        problem = error.errors()[0]
        raise TableProblem(tuple(str(p) for p in problem["loc"]), problem["msg"]) from None


def table_default(name: str, key: str) -> tuple[bool, Any]:
    """Whether ``key`` is a key of the core table ``name`` with a default, and the default."""
    model = CORE_TABLES[name]()
    if model is TuiTable:
        return TuiTable.default_of(key)
    field = model.model_fields.get(key)
    if field is None or field.is_required():
        return False, None
    return True, field.get_default(call_default_factory=True)


def _agent_model() -> Any:
    from dsh.settings_tables import AgentOptions

    return AgentOptions


def _permissions_model() -> Any:
    from dsh.settings_tables import PermissionsTable

    return PermissionsTable


def _tui_model() -> Any:
    return TuiTable


def _checkpoints_model() -> Any:
    from dsh.settings_tables import CheckpointsTable

    return CheckpointsTable


def _environment_model() -> Any:
    from dsh.settings_tables import EnvironmentTable

    return EnvironmentTable


def _claude_code_model() -> Any:
    from dsh.settings_tables import ClaudeCodeTable

    return ClaudeCodeTable


def _sandbox_model() -> Any:
    from dsh.settings_tables import SandboxTable

    return SandboxTable


def _storage_model() -> Any:
    from dsh.settings_tables import StorageTable

    return StorageTable


# Core tables and the models that check them (loaded lazily: pydantic models cost
# import time, and most runs read only one or two of them).
CORE_TABLES = {
    "agent": _agent_model,
    "permissions": _permissions_model,
    "tui": _tui_model,
    "storage": _storage_model,
    "environment": _environment_model,
    "sandbox": _sandbox_model,
    "checkpoints": _checkpoints_model,
    "claude_code": _claude_code_model,
}


SETTINGS: ServiceKey[Settings] = ServiceKey("settings")
"""The settings as loaded (``settings.trusted``, ``own_section(...)``: the user's own)."""
