from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from dsh.kernel import (
    Candidate,
    Context,
    DependencyCycleError,
    Plugin,
    PluginDefinitionError,
    PluginHost,
    PluginStatus,
    ServiceKey,
    bundled_package,
    discover,
    discover_bundled,
    discover_entry_points,
    load_vocabularies,
    order_plugins,
)


def key(name: str) -> ServiceKey[Any]:
    return ServiceKey(name)


def keyed(kw: dict[str, Any]) -> dict[str, Any]:
    """The service names given for inject, optional and provides, as keys."""
    for group in ("inject", "optional", "provides"):
        if isinstance(kw.get(group), tuple):
            kw[group] = tuple(key(name) for name in kw[group])
    return kw


def plugin(name: str, **kw: Any) -> Plugin:
    kw.setdefault("apply", lambda ctx, config: None)
    return Plugin(name=name, **keyed(kw))


def provider(name: str, *services: str, log: list[str] | None = None, **kw: Any) -> Plugin:
    def apply(ctx: Context, config: object) -> None:
        for service in services:
            ctx.provide(key(service), f"{service} from {name}")
        if log is not None:
            log.append(f"load {name}")
            ctx.effect(lambda: lambda: log.append(f"unload {name}"))

    return Plugin(name=name, apply=apply, **keyed({"provides": services, **kw}))


def candidates(*plugins: Plugin) -> list[Candidate]:
    return [Candidate(p.name, f"test {p.name}", plugin=p) for p in plugins]


# ---------------------------------------------------------------------- definitions


def test_plugin_definition_is_validated() -> None:
    with pytest.raises(PluginDefinitionError, match="name"):
        plugin("Bad Name")
    with pytest.raises(PluginDefinitionError, match="tuple"):
        plugin("x", inject="llm")  # a bare string is a classic mistake
    with pytest.raises(
        PluginDefinitionError, match=r"ServiceKeys \(the core's are in dsh\.services"
    ):
        Plugin(name="x", apply=lambda ctx, config: None, inject=("llm",))  # type: ignore[arg-type]
    with pytest.raises(PluginDefinitionError, match="pydantic"):
        plugin("x", config=dict)
    with pytest.raises(PluginDefinitionError, match="vocabulary"):
        plugin("x", vocabulary="todo/write")


# ---------------------------------------------------------------------- ordering


def test_dependency_order_puts_providers_first_and_keeps_ties_stable() -> None:
    ui = plugin("ui", inject=("sessions", "llm"))
    llm = plugin("llm-deepseek", provides=("llm",))
    sessions = plugin("sessions", provides=("sessions",), inject=("store",))
    store = plugin("store", provides=("store",))
    extra = plugin("extra")
    ordered = [p.name for p in order_plugins([ui, llm, sessions, extra, store])]
    # Each plugin's providers are pulled ahead of it, in the order it injects them;
    # everything else keeps the given order.
    assert ordered == ["store", "sessions", "llm-deepseek", "ui", "extra"]


def test_optional_services_order_loading_but_are_not_required() -> None:
    a = plugin("a", optional=("b-service",))
    b = plugin("b", provides=("b-service",))
    assert [p.name for p in order_plugins([a, b])] == ["b", "a"]


def test_a_cycle_is_a_clear_error_naming_it() -> None:
    a = plugin("a", provides=("sa",), inject=("sb",))
    b = plugin("b", provides=("sb",), inject=("sc",))
    c = plugin("c", provides=("sc",), inject=("sa",))
    with pytest.raises(DependencyCycleError) as caught:
        order_plugins([a, b, c])
    assert caught.value.cycle == ["a", "b", "c", "a"]
    assert "a -> b -> c -> a" in str(caught.value)


# ---------------------------------------------------------------------- loading


async def test_loads_in_dependency_order_and_unloads_in_reverse() -> None:
    log: list[str] = []
    root = Context()
    host = PluginHost(root)
    records = await host.load(
        candidates(
            provider("ui", log=log, inject=("llm",)),
            provider("llm", "llm", log=log, inject=("store",)),
            provider("store", "store", log=log),
        )
    )
    assert [r.name for r in records] == ["store", "llm", "ui"]
    assert all(r.status is PluginStatus.LOADED for r in records)
    assert root.get(key("llm")) == "llm from llm"
    await host.unload_all()
    assert log == ["load store", "load llm", "load ui", "unload ui", "unload llm", "unload store"]
    assert not root.has(key("llm"))


async def test_a_failing_plugin_is_unwound_and_reported_and_others_still_load() -> None:
    undone: list[str] = []

    def broken(ctx: Context, config: object) -> None:
        ctx.provide(key("half"), "registered before failing")
        ctx.effect(lambda: lambda: undone.append("broken's effect"))
        raise RuntimeError("cannot start: port in use")

    root = Context()
    host = PluginHost(root)
    records = await host.load(
        candidates(
            Plugin(name="broken", apply=broken, provides=(key("half"),)),
            provider("fine", "fine"),
            plugin("needs-half", inject=("half",)),
        )
    )
    status = {r.name: (r.status, r.error) for r in records}
    assert status["broken"][0] is PluginStatus.FAILED
    assert "RuntimeError: cannot start: port in use" in str(status["broken"][1])
    assert status["fine"][0] is PluginStatus.LOADED
    assert status["needs-half"][0] is PluginStatus.SKIPPED
    assert "'half'" in str(status["needs-half"][1])
    assert "broken" in str(status["needs-half"][1])
    assert undone == ["broken's effect"]
    assert not root.has(key("half"))


async def test_async_apply_is_awaited() -> None:
    async def apply(ctx: Context, config: object) -> None:
        ctx.provide(key("svc"), 42)

    root = Context()
    await PluginHost(root).load(candidates(Plugin(name="a", apply=apply, provides=(key("svc"),))))
    assert root.get(key("svc")) == 42


async def test_a_missing_service_skips_the_plugin_with_the_reason() -> None:
    root = Context()
    [record] = await PluginHost(root).load(candidates(plugin("ui", inject=("llm",))))
    assert record.status is PluginStatus.SKIPPED
    assert record.error == "needs service 'llm': nothing provides it"


async def test_core_services_on_the_root_satisfy_injections() -> None:
    root = Context()
    root.provide(key("sessions"), object())
    [record] = await PluginHost(root).load(candidates(plugin("ui", inject=("sessions",))))
    assert record.status is PluginStatus.LOADED


async def test_cycle_members_fail_and_the_rest_load() -> None:
    root = Context()
    records = await PluginHost(root).load(
        candidates(
            plugin("a", provides=("sa",), inject=("sb",)),
            plugin("b", provides=("sb",), inject=("sa",)),
            provider("c", "sc"),
        )
    )
    status = {r.name: r for r in records}
    assert status["a"].status is PluginStatus.FAILED
    assert "cycle" in str(status["a"].error)
    assert status["b"].status is PluginStatus.FAILED
    assert status["c"].status is PluginStatus.LOADED


async def test_config_is_validated_against_the_plugin_model() -> None:
    class Config(BaseModel):
        model_config = {"extra": "forbid"}
        greeting: str = "hello"

    got: list[Config] = []
    good = Plugin(name="good", apply=lambda ctx, c: got.append(c), config=Config)
    bad = Plugin(name="bad", apply=lambda ctx, c: None, config=Config)
    records = await PluginHost(Context()).load(
        candidates(good, bad), configs={"good": {"greeting": "hi"}, "bad": {"greting": "x"}}
    )
    assert got == [Config(greeting="hi")]
    assert records[1].status is PluginStatus.FAILED
    assert "invalid config" in str(records[1].error)
    assert "greting" in str(records[1].error)


async def test_a_plugin_must_provide_what_it_declares() -> None:
    [record] = await PluginHost(Context()).load(candidates(plugin("liar", provides=("llm",))))
    assert record.status is PluginStatus.FAILED
    assert "'llm'" in str(record.error)


async def test_disabled_and_duplicate_plugins_are_reported() -> None:
    records = await PluginHost(Context()).load(
        candidates(plugin("a"), plugin("a"), plugin("off")), disabled=["off"]
    )
    assert [(r.name, r.status) for r in records] == [
        ("a", PluginStatus.FAILED),
        ("off", PluginStatus.DISABLED),
        ("a", PluginStatus.LOADED),
    ]
    assert "duplicate" in str(records[0].error)


async def test_unloading_a_plugin_unloads_its_dependents_first() -> None:
    log: list[str] = []
    root = Context()
    host = PluginHost(root)
    await host.load(
        candidates(
            provider("store", "store", log=log),
            provider("llm", "llm", log=log, inject=("store",)),
            provider("other", "other", log=log),
        )
    )
    assert await host.unload("store") == ["llm", "store"]
    assert log[-2:] == ["unload llm", "unload store"]
    assert host.record("other").status is PluginStatus.LOADED  # type: ignore[union-attr]
    assert host.record("store").status is PluginStatus.UNLOADED  # type: ignore[union-attr]


# ---------------------------------------------------------------------- vocabulary


def worded(name: str, log: list[str], *, fails: bool = False, **kw: Any) -> Plugin:
    """A plugin whose vocabulary and apply say when they run and are undone."""

    def vocabulary(ctx: Context) -> None:
        log.append(f"words {name}")
        ctx.effect(lambda: lambda: log.append(f"unword {name}"))
        if fails:
            raise RuntimeError("no words")

    def apply(ctx: Context, config: object) -> None:
        log.append(f"apply {name}")

    return Plugin(name=name, apply=apply, vocabulary=vocabulary, **keyed(kw))


async def test_a_plugins_vocabulary_comes_before_apply_and_goes_with_it() -> None:
    log: list[str] = []
    host = PluginHost(Context())
    await host.load(candidates(worded("notes", log), worded("broken", log, fails=True)))
    assert log == ["words notes", "apply notes", "words broken", "unword broken"]
    record = host.record("broken")
    assert record is not None
    assert record.status is PluginStatus.FAILED
    assert "no words" in (record.error or "")
    await host.unload("notes")
    assert log[-1] == "unword notes"


async def test_a_reader_loads_vocabularies_alone() -> None:
    log: list[str] = []
    root = Context()
    found = [
        *candidates(
            worded("notes", log),
            worded("broken", log, fails=True),
            worded("needy", log, inject=("nothing-provides-this",)),
            plugin("plain"),
        ),
        Candidate("gone", "test gone", error="ImportError: no module"),
    ]
    assert await load_vocabularies(root, found) == ["notes", "needy"]
    # No plugin applied: a reader registers what records mean, and runs nothing.
    assert log == ["words notes", "words broken", "unword broken", "words needy"]
    await root.dispose()
    assert log[-2:] == ["unword needy", "unword notes"]


# ---------------------------------------------------------------------- discovery


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


GOOD_PLUGIN = """
    from dsh.kernel import Plugin, ServiceKey

    GREETING = ServiceKey("greeting")

    def apply(ctx, config):
        ctx.provide(GREETING, "hello from {name}")

    plugin = Plugin(name="{name}", provides=(GREETING,), apply=apply)
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory on sys.path holding a bundled-style package and an installed dist."""
    root = tmp_path / "site"
    write(root / "fakeplugins" / "__init__.py", "")
    write(root / "fakeplugins" / "greeter.py", GOOD_PLUGIN.format(name="greeter"))
    write(root / "fakeplugins" / "broken.py", "import no_such_module_anywhere\n")
    write(root / "fakeplugins" / "empty.py", "x = 1\n")
    write(root / "fakeplugins" / "_private.py", "raise SystemExit('never imported')\n")
    write(root / "thirdparty_dsh.py", GOOD_PLUGIN.format(name="thirdparty"))
    dist = root / "thirdparty_dsh-1.2.dist-info"
    write(dist / "METADATA", "Metadata-Version: 2.1\nName: thirdparty-dsh\nVersion: 1.2\n")
    write(
        dist / "entry_points.txt",
        "[dsh.plugins]\nthirdparty = thirdparty_dsh\nmissing = thirdparty_dsh_gone:plugin\n"
        # Only dsh's own distribution says which package is bundled.
        "[dsh.bundled]\nplugins = fakeplugins\n",
    )
    monkeypatch.syspath_prepend(str(root))
    return root


def test_discovers_bundled_modules_and_reports_broken_ones(site: Path) -> None:
    found = {c.name: c for c in discover_bundled("fakeplugins")}
    assert set(found) == {"greeter", "broken", "empty"}
    assert found["greeter"].plugin is not None
    assert found["greeter"].origin == "bundled fakeplugins.greeter"
    assert "ModuleNotFoundError" in str(found["broken"].error)
    assert "does not expose" in str(found["empty"].error)


def test_discovers_entry_points_with_their_distribution(site: Path) -> None:
    found = {c.name: c for c in discover_entry_points()}
    assert found["thirdparty"].plugin is not None
    assert "from thirdparty-dsh 1.2" in found["thirdparty"].origin
    assert found["missing"].plugin is None
    assert "thirdparty_dsh_gone" in str(found["missing"].error)


def test_discovery_is_done_once_a_process_for_the_same_modules_and_path(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start-up asks twice (the setup's forms, then the runtime) and ``dsh acp`` at
    every session: the installed distributions' metadata is read once."""
    import importlib.metadata

    reads: list[str] = []
    real = importlib.metadata.entry_points

    def counted(**selection: Any) -> Any:
        reads.append(str(selection.get("group")))
        return real(**selection)

    monkeypatch.setattr(importlib.metadata, "entry_points", counted)
    first = discover()
    again = discover()
    assert [c.name for c in again] == [c.name for c in first]
    assert "thirdparty" in {c.name for c in first}
    assert reads == ["dsh.plugins"]
    again.clear()  # each caller gets its own list
    assert [c.name for c in discover()] == [c.name for c in first]
    # Another path (a plugin folder added) or other settings modules: found anew.
    monkeypatch.syspath_prepend(str(site / "elsewhere"))
    discover()
    discover(["thirdparty_dsh"])
    assert reads == ["dsh.plugins"] * 3


def test_bundled_package_absent_finds_nothing() -> None:
    assert discover_bundled("no_such_package_for_dsh") == []


def test_the_bundled_package_is_named_by_dsh_s_own_distribution(site: Path) -> None:
    """The core knows no package name: dsh's distribution says where its plugins are,
    and another distribution claiming the group does not make its package bundled."""
    assert bundled_package() == "dsh_plugins"
    found = discover_bundled()
    assert {"bash", "fs", "mcp"} <= {c.name for c in found}
    assert all(c.origin.startswith("bundled dsh_plugins.") for c in found)


def test_dsh_plugins_command_reports_loaded_and_failed(site: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = subprocess.run(
        [sys.executable, "-m", "dsh", "plugins", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    rows = {row["name"]: row for row in json.loads(run.stdout)}
    assert rows["thirdparty"]["status"] == "loaded"
    assert rows["thirdparty"]["provides"] == ["greeting"]
    assert rows["missing"]["status"] == "failed"
    assert "thirdparty_dsh_gone" in rows["missing"]["error"]
    assert "1 plugin(s) failed" in run.stderr

    table = subprocess.run(
        [sys.executable, "-m", "dsh", "plugins"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    ).stdout
    assert "thirdparty" in table
    assert "loaded" in table
    assert "failed" in table
