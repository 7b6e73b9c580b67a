"""Starting the TUI from the command line: its settings, the demo, the app run to its
end (a SIGTERM ends it as a person would, the session closed)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh.paths import dsh_home

if TYPE_CHECKING:
    from dsh.ui.tui.app import TuiRequest
    from dsh.ui.tui.early_terminal import EarlyTerminal


async def launch(
    prompt: str | None,
    *,
    pick: bool = False,
    demo: bool = False,
    cwd: Path | None = None,
    early: EarlyTerminal | None = None,
    **choice: Any,
) -> int:
    """Run the TUI to the end; the exit status. ``choice`` holds the session flags
    (``resume``, ``continue_last``, ``model``, ``provider``, ``effort``,
    ``permission_mode``). ``demo`` runs it against the built-in scripted model in a
    throwaway project and home. ``early``: the terminal as dsh took it at start, with
    what was typed before."""
    from dsh.settings import SettingsError

    if demo:
        return await _demo(prompt, early)
    try:
        request = tui_request(prompt, pick=pick, cwd=cwd, **choice)
    except SettingsError as error:
        sys.stderr.write(f"dsh: {error}\n")
        return 1
    assert request.settings is not None
    return await run_tui(request, mouse=request.settings.tui.mouse, early=early)


def tui_request(
    prompt: str | None, *, pick: bool = False, cwd: Path | None = None, **choice: Any
) -> TuiRequest:
    """The app's request, with the process's settings read once: ``[tui]`` is used
    now, before the first frame (it needs no pydantic); the session controller checks
    the rest and settles the project's trust behind the painted prompt.
    Raises :class:`~dsh.settings.SettingsError`."""
    from dsh.settings import load_settings
    from dsh.ui.tui.app import TuiRequest

    where = (cwd or Path.cwd()).resolve()
    trust = True if choice.get("trust") else None
    settings = load_settings(dsh_home(), where, check=False, trust=trust)
    tui = settings.tui
    return TuiRequest(
        prompt=prompt,
        cwd=where,
        pick=pick,
        theme=tui.theme,
        copy_on_select=tui.copy_on_select,
        notify=tui.notify,
        settings=settings,
        **choice,
    )


async def _demo(prompt: str | None, early: EarlyTerminal | None) -> int:
    from dsh.demo import DemoError, start_demo
    from dsh.ui.tui.app import TuiRequest

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
        return await run_tui(request, resume_hint=False, early=early)  # its sessions go with it
    finally:
        await demo.close()


async def run_tui(
    request: TuiRequest,
    *,
    mouse: bool = True,
    resume_hint: bool = True,
    early: EarlyTerminal | None = None,
) -> int:
    import signal

    from dsh.ui.tui.app import EXIT_FAILED, EXIT_OK, EXIT_TERMINATED, DshApp

    app = DshApp(request)
    if sys.platform != "win32":
        from textual.drivers.linux_driver import LinuxDriver

        from dsh.ui.tui.input_driver import driver_class

        if app.driver_class is LinuxDriver:
            app.driver_class = driver_class(early)

    def terminate() -> None:
        # Ended as by the person (the session closed, its SessionEnd hooks run), not
        # killed mid-write; a second SIGTERM kills at once.
        loop.remove_signal_handler(signal.SIGTERM)
        app.end_reason = "other"
        app.exit_code = EXIT_TERMINATED
        app.exit(EXIT_TERMINATED, return_code=EXIT_TERMINATED)

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, terminate)
    try:
        code = await app.run_async(mouse=mouse)
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        await app.shutdown()
    # The terminal is the shell's again.
    for line in app.controller.unsaved:  # what could not be stored, said where it stays
        sys.stderr.write(f"dsh: {line}\n")
    if resume_hint and app.resumable is not None:
        sys.stdout.write(f"Resume this session with: dsh --resume {app.resumable}\n")
    code = code if isinstance(code, int) else app.exit_code
    return EXIT_FAILED if app.controller.unsaved and code == EXIT_OK else code
