"""``dsh --demo``: every part of dsh at work, with no API key and no network.

A throwaway project (a small Python file) and the scripted model server of
:mod:`dsh.testing` on 127.0.0.1, playing a short conversation: the model reads the
file, proposes an edit (which asks for your approval), runs the program (approval
again), asks you a question, and answers. The UI is the real one; only the model is
scripted, so whatever you type, the same conversation plays.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh.testing import FakeLLM, Reply, Script, ToolCallSpec

DEMO_PROMPT = "Have a look at greet.py and make the greeting friendlier."
DEMO_OVER = (
    "The demo's scripted conversation is over, so this is all the scripted model can "
    "say. Run `dsh` in your own repository, with a DeepSeek key or any OpenAI-compatible "
    "endpoint, to work with a real model. /exit or Ctrl+C twice leaves."
)

GREET = """\
def greet(name):
    return "Hello " + name


if __name__ == "__main__":
    print(greet("world"))
"""

NEW_LINE = '    return f"Hello, {name}! Nice to see you."'


def scenario() -> list[Reply]:
    """The model's side of the demo conversation, one reply per request."""
    return [
        Reply(
            reasoning="I should read the file before changing it.",
            text="Let me read `greet.py` first.",
            tool_calls=[ToolCallSpec(name="read", arguments={"file_path": "greet.py"})],
            chunk_delay_ms=15,
        ),
        Reply(
            reasoning="String concatenation without punctuation; an f-string reads better.",
            text="The greeting is a bare concatenation. I'll make it warmer:",
            tool_calls=[
                ToolCallSpec(
                    name="edit",
                    arguments={
                        "file_path": "greet.py",
                        "old_string": '    return "Hello " + name',
                        "new_string": NEW_LINE,
                    },
                )
            ],
            chunk_delay_ms=15,
        ),
        Reply(
            text="Now let me run it to check.",
            tool_calls=[
                ToolCallSpec(
                    name="bash",
                    arguments={"command": "python3 greet.py", "description": "Run the program"},
                )
            ],
            chunk_delay_ms=15,
        ),
        Reply(
            text="It works. One question before I finish:",
            tool_calls=[
                ToolCallSpec(
                    name="ask_user_question",
                    arguments={
                        "questions": [
                            {
                                "id": "tests",
                                "question": "Should I add a test for greet()?",
                                "options": [
                                    {"label": "Yes", "description": "a pytest test"},
                                    {"label": "No", "description": "leave it"},
                                ],
                            }
                        ]
                    },
                )
            ],
            chunk_delay_ms=15,
        ),
        Reply(
            text=(
                "Done. `greet.py` now says:\n\n"
                "```python\n"
                f"{NEW_LINE.strip()}\n"
                "```\n\n"
                "That was the whole demo: a read, an edit and a command that each went "
                "through the permission check, a question, and this answer, all stored as "
                "session events you can resume with `/resume`. Run `dsh` in your own "
                "repository to work with a real model."
            ),
            chunk_delay_ms=10,
        ),
    ]


@dataclass
class Demo:
    server: FakeLLM
    project: Path
    home: Path
    scratch: Path | None = None
    """The temporary folder the demo made for itself, removed by :meth:`close`."""

    @property
    def plugin_configs(self) -> dict[str, dict[str, Any]]:
        """What points dsh at the scripted server (a key it accepts is in the env)."""
        return {
            "llm-deepseek": {"base_url": self.server.base_url},
            "title": {"generate": False},
        }

    async def close(self) -> None:
        await self.server.close()
        if self.scratch is not None:
            await asyncio.to_thread(shutil.rmtree, self.scratch, ignore_errors=True)


async def start_demo(root: Path | None = None) -> Demo:
    """The demo project and a started scripted server. The caller runs the UI with
    ``DSH_HOME=demo.home``, ``DEEPSEEK_API_KEY`` set to anything, and ``plugin_configs``."""
    base = Path(tempfile.mkdtemp(prefix="dsh-demo-")) if root is None else root
    project, home = base / "project", base / "home"
    project.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (project / "greet.py").write_text(GREET)
    server = FakeLLM(Script(replies=scenario(), after_last=Reply(text=DEMO_OVER)))
    await server.start()
    return Demo(server, project, home, base if root is None else None)
