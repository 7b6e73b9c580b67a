"""The architecture rules of docs/architecture.md, enforced over the source tree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(source: str) -> list[tuple[int, str]]:
    """Every module a Python source imports (absolute names), with its line."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            # `from dsh import kernel` imports the module dsh.kernel too.
            found.extend(
                (node.lineno, f"{node.module}.{alias.name}")
                for alias in node.names
                if _is_module(f"{node.module}.{alias.name}")
            )
    return found


def public_api() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = re.search(r"<!-- public-api -->(.*?)<!-- /public-api -->", text, re.S)
    assert block, "docs/architecture.md lost its public-api list"
    return set(re.findall(r"`([\w.]+)`", block.group(1)))


BUNDLED = ("dsh_plugins", "plugins")
"""The bundled plugins' import name, and the folder's name a checkout also has on
sys.path (so ``import plugins`` works there, and nowhere else)."""


def _names_bundled(module: str) -> bool:
    return any(module == name or module.startswith(f"{name}.") for name in BUNDLED)


def core_violations(path: Path, source: str) -> list[str]:
    return [
        f"{path}:{line} imports {module}"
        for line, module in imported_modules(source)
        if _names_bundled(module)
    ]


def folder_name_imports(path: Path, source: str) -> list[str]:
    """Imports of the folder's name ``plugins``: they work in a checkout only."""
    return [
        f"{path}:{line} imports {module}"
        for line, module in imported_modules(source)
        if module == "plugins" or module.startswith("plugins.")
    ]


def plugin_violations(path: Path, source: str, allowed: set[str]) -> list[str]:
    problems = []
    for line, module in imported_modules(source):
        if module != "dsh" and not module.startswith("dsh."):
            continue
        if module in allowed:
            continue
        problems.append(f"{path}:{line} imports {module}, which is not public API")
    return problems


def _is_module(name: str) -> bool:
    relative = Path(*name.split("."))
    return (ROOT / relative).is_dir() or (ROOT / relative.with_suffix(".py")).is_file()


def python_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def test_public_api_modules_exist() -> None:
    for module in public_api():
        assert _is_module(module), f"{module} is listed as public API but does not exist"


def test_core_never_imports_plugins() -> None:
    files = python_files("dsh")
    assert len(files) > 10
    problems = [p for f in files for p in core_violations(f, f.read_text())]
    assert problems == []


def test_nothing_imports_the_folder_name() -> None:
    """An installed dsh has dsh_plugins and no ``plugins`` (issue 43): an import of the
    folder's name would pass every test in a checkout and fail for everyone else."""
    files = [
        path for folder in ("dsh", "plugins", "tests", "bench") for path in python_files(folder)
    ]
    assert len(files) > 100
    problems = [p for f in files for p in folder_name_imports(f, f.read_text())]
    assert problems == []


def test_plugins_import_only_public_api() -> None:
    allowed = public_api()
    problems = [
        p for f in python_files("plugins") for p in plugin_violations(f, f.read_text(), allowed)
    ]
    assert problems == []


def test_the_outside_plugin_uses_only_public_api() -> None:
    """The example in tests/fixtures is an outside plugin: it may not even reach the
    bundled plugins' shared library, only what docs/architecture.md lists."""
    files = python_files("tests/fixtures/dsh-plugin-example")
    assert len(files) > 3
    allowed = public_api()
    problems = [
        p
        for f in files
        for p in [*plugin_violations(f, f.read_text(), allowed), *core_violations(f, f.read_text())]
    ]
    assert problems == []


def test_the_checks_catch_violations() -> None:
    """The rules above pass vacuously if their checkers see nothing: prove they see."""
    path = Path("x.py")
    assert core_violations(path, "import plugins.bash\n") == ["x.py:1 imports plugins.bash"]
    assert core_violations(path, "from plugins import fs\n") != []
    assert core_violations(path, "def f():\n    from plugins.lsp import plugin\n") != []
    assert core_violations(path, "import pluginsx\nfrom dsh.kernel import Context\n") == []
    assert core_violations(path, "from dsh_plugins.fs import x\n") == [
        "x.py:1 imports dsh_plugins.fs"
    ]
    assert folder_name_imports(path, "import plugins\n") == ["x.py:1 imports plugins"]
    assert folder_name_imports(path, "from dsh_plugins import fs\nimport pluginsx\n") == []

    allowed = public_api()
    assert plugin_violations(path, "from dsh.kernel import Plugin, Context\n", allowed) == []
    assert plugin_violations(path, "from dsh import __version__\n", allowed) == []
    assert plugin_violations(path, "import httpx\n", allowed) == []
    assert plugin_violations(path, "from dsh.kernel.context import _Hub\n", allowed) == [
        "x.py:1 imports dsh.kernel.context, which is not public API"
    ]
    assert plugin_violations(path, "from dsh.llm import assembler\n", allowed) == [
        "x.py:1 imports dsh.llm.assembler, which is not public API"
    ]


def test_the_plugin_guide_names_every_hook_and_service_key() -> None:
    import dsh.hooks
    import dsh.services
    from dsh.kernel import Hook

    guide = (ROOT / "docs" / "plugins.md").read_text()
    declared = {name: value for name, value in vars(dsh.hooks).items() if isinstance(value, Hook)}
    assert set(declared.values()) == set(dsh.hooks.CORE_HOOKS)
    for constant, hook in declared.items():
        assert f"`{constant}` `{hook.name}`" in guide, f"docs/plugins.md lacks the hook {constant}"
    keys = [name for name in dsh.services.__all__ if name.isupper()]
    assert len(keys) >= 10
    for name in keys:
        assert f"| `{name}` |" in guide, f"docs/plugins.md lacks the service key {name}"
