"""The lsp tool's read-only operations against a real language server
(python-lsp-server, from the test extras) on the fixture project.

These tests only ask, never change a file, so they share one server (started by
the module's first test, stopped after its last): each stays independent of the
others' order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.plugins.lsp_fixtures.harness import Session, session

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def py(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Session]:
    async with session(tmp_path_factory.mktemp("lsp-queries")) as started:
        yield started


async def test_definition_jumps_from_a_use_to_the_declaration(py: Session) -> None:
    # app.py line 8: `    return f"area {area(circle):.2f}"`; `area` starts at character 20.
    text = await py.lsp("definition", "pkg/app.py", line=8, character=21)
    assert text == "pkg/geometry.py:17:5  def area(circle: Circle) -> float:"
    method = await py.lsp("definition", "pkg/app.py", line=16, character=32)
    assert method == 'pkg/geometry.py:12:9  def scaled(self, factor: float) -> "Circle":'


async def test_positions_count_characters_past_non_ascii_text(py: Session) -> None:
    # Line 12 has `é` and `😀` (two UTF-16 units, four UTF-8 bytes) before `area`
    # (character 33) and `Circle` (character 38): columns are converted both ways.
    line = (py.cwd / "pkg/app.py").read_text().splitlines()[11]
    assert line.index("area") + 1 == 33
    assert line.index("Circle") + 1 == 38
    assert await py.lsp("definition", "pkg/app.py", line=12, character=33) == (
        "pkg/geometry.py:17:5  def area(circle: Circle) -> float:"
    )
    assert await py.lsp("definition", "pkg/app.py", line=12, character=43) == (
        "pkg/geometry.py:6:7  class Circle:"
    )
    references = await py.lsp("references", "pkg/app.py", line=12, character=33)
    assert "pkg/app.py:12:33  " in references


async def test_references_list_every_use_and_the_declaration(py: Session) -> None:
    text = await py.lsp("references", "pkg/geometry.py", line=17, character=5)
    assert text.splitlines() == [
        "pkg/app.py:3:34  from pkg.geometry import Circle, area",
        'pkg/app.py:8:20  return f"area {area(circle):.2f}"',
        'pkg/app.py:12:33  return "héllo 😀 " + str(sum(area(Circle(r)) for r in radii))',
        "pkg/app.py:16:12  return area(Circle(radius).scaled(2))",
        "pkg/geometry.py:17:5  def area(circle: Circle) -> float:",
    ]


async def test_hover_shows_the_signature_and_the_docstring(py: Session) -> None:
    text = await py.lsp("hover", "pkg/app.py", line=16, character=12)
    assert "area(circle: Circle) -> float" in text
    assert "The area enclosed by ``circle``." in text
    blank = await py.lsp("hover", "pkg/app.py", line=2, character=1)
    assert blank == "No hover information."


async def test_document_symbols_are_a_tree(py: Session) -> None:
    text = await py.lsp("document_symbols", "pkg/geometry.py")
    # pylsp also lists the imported module (`module math  line 3`).
    assert [row for row in text.splitlines() if "math" not in row] == [
        "class Circle  line 6",
        "  method __init__  line 9",
        "    field radius  line 10",
        "  method scaled  line 12",
        "function area  line 17",
    ]
    assert await py.lsp("document_symbols", "pkg/__init__.py") == "No symbols in pkg/__init__.py."


async def test_workspace_symbols_say_pylsp_does_not_support_them(py: Session) -> None:
    # pylsp 1.15 offers no workspaceSymbolProvider: the honest answer is an error
    # pointing at grep, not an empty list that reads as "no such symbol".
    result = await py.run("lsp", operation="workspace_symbols", query="Circle")
    assert result.code == "LSP_UNSUPPORTED"
    assert "python language server (pylsp) does not support workspace_symbols" in result.text
    assert "grep" in result.text
    by_file = await py.run(
        "lsp", operation="workspace_symbols", query="Circle", file_path="pkg/app.py"
    )
    assert by_file.code == "LSP_UNSUPPORTED"
    # Without file_path the language was guessed from the project's files.
    assert [s.name for s in py.service.status()] == ["python"]


async def test_diagnostics_of_a_clean_file(py: Session) -> None:
    assert await py.lsp("diagnostics", "pkg/geometry.py") == "No diagnostics."


async def test_positions_and_paths_are_checked(py: Session) -> None:
    past = await py.fails("lsp", "LSP_INVALID_POSITION", operation="hover",
                          file_path="pkg/app.py", line=17, character=1)  # fmt: skip
    assert past == "Error: line 17 is past the end of pkg/app.py, which has 16 lines."
    wide = await py.fails("lsp", "LSP_INVALID_POSITION", operation="hover",
                          file_path="pkg/app.py", line=3, character=99)  # fmt: skip
    assert "character 99 is past the end of line 3 of pkg/app.py, which has 37" in wide
    missing = await py.fails("lsp", "FS_NOT_FOUND", operation="hover",
                             file_path="pkg/nope.py", line=1, character=1)  # fmt: skip
    assert "pkg/nope.py does not exist" in missing
    unknown = await py.fails("lsp", "LSP_UNAVAILABLE", operation="diagnostics",
                             file_path="notes.txt")  # fmt: skip
    assert "no language server is configured for .txt files" in unknown
    invalid = await py.fails("lsp", "INVALID_ARGUMENTS", operation="hover", file_path="pkg/app.py")
    assert "line and character" in invalid
    absolute = str(py.cwd / "pkg/app.py")
    assert await py.lsp("definition", absolute, line=8, character=21) == (
        "pkg/geometry.py:17:5  def area(circle: Circle) -> float:"
    )


async def test_paths_outside_the_working_directory_are_absolute(
    py: Session, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere.py"
    outside.write_text("def helper() -> int:\n    return 1\n\n\nvalue = helper()\n")
    text = await py.lsp("definition", str(outside), line=5, character=9)
    assert text == f"{outside}:1:5  def helper() -> int:"
