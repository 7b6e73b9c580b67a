"""Replay files as tests: a folder of ``dsh sessions export --format replay`` files, each
a test that replays it (``--tools recorded``) and fails with the first difference.

```python
FOLDER = Path(__file__).parent / "fixtures" / "replay"

@replay_files(FOLDER)
async def test_replays(replay_file: Path) -> None:
    assert_identical(await replay_file_report(replay_file))
```

A user's bug report becomes a test by adding its file to the folder (docs/replay.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from dsh.kernel import Candidate, Context, discover, load_vocabularies
from dsh.replay.compare import Report, compare
from dsh.replay.export import read_replay_file
from dsh.replay.recorded import read_recording
from dsh.replay.run import ReplayOptions, ToolsMode, replay

F = TypeVar("F", bound=Callable[..., Any])


def replay_files(folder: Path, *, pattern: str = "*.json") -> Callable[[F], F]:
    """Parametrize a test over the replay files of ``folder`` (``replay_file``), one
    test id per file's name."""
    files = sorted(folder.glob(pattern))
    return pytest.mark.parametrize("replay_file", files, ids=[path.stem for path in files])


async def replay_file_report(
    path: Path,
    *,
    tools: ToolsMode = "recorded",
    substitutions: Mapping[str, str] | None = None,
    plugins: Sequence[Candidate] = (),
) -> Report:
    """Replay the file at ``path`` and compare: ``substitutions`` fill placeholders in
    its settings (a path that differs between machines); ``plugins`` are loaded into
    the replaying runtime beside the bundled ones."""
    document = read_replay_file(path)
    settings = document.settings
    for placeholder, value in (substitutions or {}).items():
        settings = settings.replace(placeholder, value)
    vocabulary = Context(name="replay-vocabulary")
    await load_vocabularies(vocabulary, discover())
    try:
        header, events = document.loaded(str(path))
        recording = read_recording(header, events)
        options = ReplayOptions(
            tools=tools,
            settings=settings,
            workspace=document.files(),
            plugins=plugins,
            foreign=True,  # a file, whoever added it: its hooks are not run
        )
        return compare(await replay(recording, options))
    finally:
        await vocabulary.dispose()


def assert_identical(report: Report) -> None:
    """Fail with the whole step-by-step report unless the replay was identical."""
    if not report.identical:
        raise AssertionError("the replay differs from the recording:\n" + report.text())
