"""The permission policy is facts in, verdict out: it reads no settings, asks no one,
logs nothing and knows no tool type, so it can be read and tested on its own."""

from __future__ import annotations

import ast
from pathlib import Path

POLICY = Path(__file__).resolve().parents[2] / "dsh" / "policy"
ALLOWED = ("dsh.policy", "dsh.paths", "dsh.permission_modes", "dsh.bulk", "dsh.sandbox")
"""What the policy may import from dsh: itself, the names of dsh's files and modes,
the collector pause, and the sandbox's vocabulary (what an escalation asks for)."""


def core_imports(source: str) -> set[str]:
    """Every dsh module ``source`` imports, wherever it stands (``TYPE_CHECKING`` too)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "dsh" or name.startswith("dsh.")}


def test_the_policy_imports_no_settings_pipeline_or_log() -> None:
    modules = sorted(POLICY.glob("*.py"))
    assert len(modules) > 10
    strays = {
        f"{path.name} imports {name}"
        for path in modules
        for name in core_imports(path.read_text())
        if not any(name == ok or name.startswith(f"{ok}.") for ok in ALLOWED)
    }
    assert strays == set()


def test_the_check_sees_a_stray_import() -> None:
    assert core_imports("from dsh.settings import PROJECT_DIR\n") == {"dsh.settings"}
    assert core_imports("if TYPE_CHECKING:\n    import dsh.tools.definition\n") == {
        "dsh.tools.definition"
    }
