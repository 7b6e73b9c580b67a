"""The shapes servers answer in, reduced and rendered; and which server serves which
file, with the settings merged over the defaults."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from dsh.tools import ToolError
from dsh_plugins.lsp import Config, render, results
from dsh_plugins.lsp.servers import Catalog, ServerConfig

CWD = Path("/work/project")
APP = CWD / "pkg/app.py"


def at(line: int, character: int) -> dict[str, int]:
    return {"line": line, "character": character}


def span(start: tuple[int, int], end: tuple[int, int]) -> dict[str, Any]:
    return {"start": at(*start), "end": at(*end)}


def test_locations_and_location_links() -> None:
    location = {"uri": APP.as_uri(), "range": span((2, 4), (2, 8))}
    link = {
        "targetUri": (CWD / "b c.py").as_uri(),
        "targetRange": span((0, 0), (9, 0)),
        "targetSelectionRange": span((3, 1), (3, 5)),
    }
    assert results.locations(None) == []
    assert results.locations(location) == [results.Span(APP, 2, 4)]
    assert results.locations([location, link]) == [
        results.Span(APP, 2, 4),
        results.Span(CWD / "b c.py", 3, 1),
    ]
    for bad in ("x", [{"uri": "http://example.com/a.py", "range": span((0, 0), (0, 1))}],
                [{"uri": APP.as_uri(), "range": {"start": at(-1, 0)}}]):  # fmt: skip
        with pytest.raises(results.Malformed):
            results.locations(bad)


def test_rendered_locations_are_relative_with_code_point_columns() -> None:
    texts = {APP: ["", "", '    s = "😀"; area(x)'], CWD / "gone.py": None}
    spans = [results.Span(APP, 2, 14), results.Span(CWD / "gone.py", 4, 7)]  # `area`
    assert render.locations(spans, CWD, texts, "utf-16", "none").splitlines() == [
        'pkg/app.py:3:14  s = "😀"; area(x)',
        "gone.py:5:8",
    ]
    outside = results.Span(Path("/elsewhere/x.py"), 0, 0)
    assert render.location(outside, CWD, {}, "utf-16") == "/elsewhere/x.py:1:1"
    many = [results.Span(APP, 0, 0)] * 105
    assert render.locations(many, CWD, {}, "utf-16", "").splitlines()[-1] == "(5 more)"


def test_hover_contents_in_every_shape() -> None:
    assert results.hover_text(None) is None
    assert results.hover_text({"contents": ""}) is None
    assert results.hover_text({"contents": {"kind": "markdown", "value": " **x** "}}) == "**x**"
    assert results.hover_text(
        {"contents": ["plain", {"language": "python", "value": "x: int"}]}
    ) == ("plain\n\n```python\nx: int\n```")
    with pytest.raises(results.Malformed):
        results.hover_text({"contents": [42]})


def test_flat_symbols_are_nested_by_their_ranges() -> None:
    def info(name: str, kind: int, start: tuple[int, int], end: tuple[int, int]) -> dict[str, Any]:
        return {
            "name": name,
            "kind": kind,
            "location": {"uri": APP.as_uri(), "range": span(start, end)},
        }

    flat = [
        info("helper", 12, (20, 0), (22, 0)),
        info("Shape", 5, (2, 0), (10, 0)),
        info("area", 6, (4, 4), (6, 0)),
        info("side", 8, (5, 8), (5, 12)),
        info("name", 6, (7, 4), (9, 0)),
    ]
    tree = results.document_symbols(flat)
    assert render.document_symbols(tree, None, "none").splitlines() == [
        "class Shape  line 3",
        "  method area  line 5",
        "    field side  line 6",
        "  method name  line 8",
        "function helper  line 21",
    ]
    hierarchical = [
        {
            "name": "Shape",
            "kind": 5,
            "range": span((2, 0), (10, 0)),
            "selectionRange": span((2, 6), (2, 11)),
            "children": [{"name": "area", "kind": 6, "range": span((4, 4), (6, 0)),
                          "selectionRange": span((4, 8), (4, 12))}],
        }
    ]  # fmt: skip
    assert render.document_symbols(results.document_symbols(hierarchical), None, "") == (
        "class Shape  line 3\n  method area  line 5"
    )
    assert render.document_symbols([], None, "No symbols.") == "No symbols."


def test_workspace_symbols_name_their_files() -> None:
    answer = [
        {"name": "Shape", "kind": 5, "location": {"uri": APP.as_uri(), "range": span((2, 0), (9, 0))}},
        {"name": "area", "kind": 6, "containerName": "Shape", "location": {"uri": APP.as_uri()}},
    ]  # fmt: skip
    assert render.workspace_symbols(results.workspace_symbols(answer), CWD, "").splitlines() == [
        "class Shape  pkg/app.py:3",
        "method area (in Shape)  pkg/app.py",
    ]


def test_diagnostics_are_sorted_tagged_and_capped() -> None:
    items = (
        {"range": span((3, 2), (3, 5)), "severity": 2, "source": "pycodestyle", "code": "E225",
         "message": "missing whitespace\naround operator"},
        {"range": span((0, 4), (0, 5)), "message": "no severity, no source"},
        {"not": "a diagnostic"},
    )  # fmt: skip
    found = results.diagnostics(items)
    lines = render.diagnostics("a.py", found, None, lambda source: "utf-16")
    assert lines == [
        "a.py:1:5 error no severity, no source",
        "a.py:4:3 warning [pycodestyle/E225] missing whitespace around operator",
    ]
    many = results.diagnostics(
        tuple({"range": span((i, 0), (i, 1)), "message": "m"} for i in range(60))
    )
    assert render.diagnostics("a.py", many, None, lambda source: "utf-16")[-1] == "(10 more)"


def test_long_output_is_clipped_at_a_line() -> None:
    text = "\n".join(f"line {i:05d}" for i in range(5000))
    clipped = render.clip(text)
    assert len(clipped) <= render.MAX_OUTPUT_CHARS
    assert clipped.endswith(f"\n(output cut at {render.MAX_OUTPUT_CHARS} characters)")
    assert clipped.splitlines()[-2].startswith("line ")


# ---------------------------------------------------------------------- servers


def test_defaults_cover_the_usual_languages() -> None:
    catalog = Catalog({})
    names = {
        ext: catalog.server_name(Path(f"x{ext}")) for ext in (".py", ".tsx", ".go", ".rs", ".hpp")
    }
    assert names == {".py": "python", ".tsx": "typescript", ".go": "go", ".rs": "rust", ".hpp": "c"}
    assert catalog.language_id(Path("a.tsx"), "typescript") == "typescriptreact"
    spec = catalog.spec("python")  # pylsp, installed with the test extras next to python
    assert spec.command == (str(Path(sys.executable).parent / "pylsp"),)


def test_missing_servers_say_how_to_install_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    catalog = Catalog({})
    with pytest.raises(ToolError) as caught:
        catalog.spec("go")
    assert caught.value.code == "LSP_UNAVAILABLE"
    assert "go install golang.org/x/tools/gopls@latest" in caught.value.message
    with pytest.raises(ToolError, match=r"no language server is configured for \.txt files"):
        catalog.server_name(Path("notes.txt"))
    with pytest.raises(ToolError, match=r"files without an extension \(Makefile\)"):
        catalog.server_name(Path("Makefile"))


def test_settings_merge_over_the_defaults() -> None:
    config = Config.model_validate(
        {
            "servers": {
                "python": {"settings": {"pylsp": {}}},
                "rust": {"enabled": False},
                "zig": {"command": ["zls"], "extensions": ["zig", ".ZON"]},
                "c": {"extensions": [".c"]},
            }
        }
    )
    catalog = Catalog(config.servers)
    assert catalog.server_name(Path("a.zon")) == "zig"
    assert catalog.server_name_or_none(Path("a.cpp")) is None  # c now serves .c only
    assert catalog.entries["python"].candidates[-1] == ("pyright-langserver", "--stdio")
    assert catalog.entries["python"].settings == {"pylsp": {}}
    with pytest.raises(ToolError, match="disabled in settings"):
        catalog.server_name(Path("main.rs"))
    assert catalog.server_name_or_none(Path("main.rs")) is None


def test_bad_settings_are_refused() -> None:
    refused: list[dict[str, Any]] = [
        {"zig": {"command": ["zls"]}},  # a new server needs extensions too
        {"zig": {"extensions": [".zig"]}},  # and a command
        {"python": {"command": []}},
        {"python": {"bogus": 1}},
    ]
    for servers in refused:
        with pytest.raises(ValidationError):
            Config.model_validate({"servers": servers})
    assert ServerConfig(extensions=["PY"]).extensions == [".py"]
