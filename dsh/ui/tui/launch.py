"""Starting the TUI from the command line: its settings, the demo, the app."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from dsh.paths import dsh_home


async def launch(
    prompt: str | None,
    *,
    pick: bool = False,
    demo: bool = False,
    cwd: Path | None = None,
    **choice: Any,
) -> int:
    """Run the TUI to the end; the exit status. ``choice`` holds the session flags
    (``resume``, ``continue_last``, ``model``, ``provider``, ``effort``,
    ``permission_mode``). ``demo`` runs it against the built-in scripted model in a
    throwaway project and home."""
    from dsh.settings import SettingsError, load_settings
    from dsh.ui.tui.app import TuiRequest, run_tui

    if demo:
        return await _demo(prompt)
    where = (cwd or Path.cwd()).resolve()
    try:
        # The process's settings, read once: [tui] now, before the first frame (it
        # needs no pydantic); the session controller checks the rest and settles the
        # project's trust behind the painted prompt.
        settings = load_settings(
            dsh_home(), where, check=False, trust=True if choice.get("trust") else None
        )
        tui = settings.tui
    except SettingsError as error:
        sys.stderr.write(f"dsh: {error}\n")
        return 1
    request = TuiRequest(
        prompt=prompt,
        cwd=where,
        pick=pick,
        theme=tui.theme,
        copy_on_select=tui.copy_on_select,
        notify=tui.notify,
        settings=settings,
        **choice,
    )
    return await run_tui(request, mouse=tui.mouse)


async def _demo(prompt: str | None) -> int:
    from dsh.demo import DemoError, start_demo
    from dsh.ui.tui.app import TuiRequest, run_tui

    try:
        demo = await start_demo()
    except DemoError as error:
        sys.stderr.write(f"dsh: {error}\n")
        return 1
    # What the scripted server needs (a key it takes); it never leaves this process.
    os.environ.update(demo.environment)
    os.environ["DSH_HOME"] = str(demo.home)
    try:
        request = TuiRequest(
            prompt=prompt,
            draft=None if prompt else demo.prompt,
            cwd=demo.project,
            home=demo.home,
            plugin_configs=demo.plugin_configs,
        )
        return await run_tui(request, resume_hint=False)  # its sessions go with it
    finally:
        await demo.close()
