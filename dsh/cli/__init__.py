"""Command-line parsing and dispatch. Each command imports what it needs when it runs,
so that ``dsh --version`` and ``dsh --help`` stay instant."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

from dsh.cli.version import VersionAction
from dsh.permission_modes import MODES
from dsh.sandbox.policy import POLICIES

SUBCOMMANDS = (
    "acp",
    "completion",
    "config",
    "doctor",
    "models",
    "plugins",
    "replay",
    "sessions",
    "trust",
    "untrust",
)
PICK = ""
"""``--resume`` given without an id."""

EPILOG = """commands:
  dsh plugins [--json]      the plugins found, where from, and which failed to load
  dsh sessions ACTION       list, show, search, export, import, rm, reindex sessions
  dsh replay SESSION        run a session (or a replay file) again offline, compared step by step
  dsh config ACTION         path, list, get, set, unset settings
  dsh doctor [--live]       check the settings, key, endpoint, sandbox and tools, with fixes
  dsh trust [PATH]          trust a project: its .dsh/settings.toml applies in full
  dsh trust --list          the folders trusted (or not)
  dsh untrust PATH          stop trusting a project: its settings may only narrow
  dsh NAME ACTION ...       a plugin's command (`dsh plugins` lists the plugins)
  dsh acp                   be an editor's agent (Agent Client Protocol on stdio)
  dsh completion SHELL      the completion script for bash, zsh or fish

examples:
  dsh -p "why does the build fail?"
  git diff | dsh -p "review this change" --output-format json
  dsh -p "and now the tests" --continue
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsh",
        description="An interactive terminal coding agent with durable sessions.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=VersionAction)
    parser.add_argument(
        "prompt",
        nargs="?",
        help="what to ask (with -p, text piped on stdin follows it, or is the prompt)",
    )
    parser.add_argument(
        "-p",
        "--print",
        dest="headless",
        action="store_true",
        help="headless: run the prompt to the end of its turn, print the answer, exit",
    )
    parser.add_argument("--output-format", choices=["text", "json", "stream-json"], default="text")
    parser.add_argument(
        "--input-format",
        choices=["text", "stream-json"],
        default="text",
        help="stream-json: read prompt, followup, steer, inject and cancel commands from stdin",
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="line mode, for dumb terminals, screen readers and logs (a script on stdin "
        "runs prompt by prompt)",
    )
    parser.add_argument("--model", help="model id, e.g. deepseek-v4-pro")
    parser.add_argument("--provider", help="provider route, e.g. deepseek")
    parser.add_argument("--effort", help="reasoning effort: off, low, high, max")
    parser.add_argument(
        "--resume",
        metavar="ID",
        nargs="?",
        const=PICK,
        help="continue the session with this id (or prefix); without one, pick a session",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="try dsh with no key: a scripted model shows every part at work",
    )
    parser.add_argument(
        "-c",
        "--continue",
        dest="continue_last",
        action="store_true",
        help="continue the latest session of this directory",
    )
    parser.add_argument(
        "--fork-session",
        action="store_true",
        help="with --resume or --continue: continue in a new session, leaving that one "
        "as it is (works while another dsh has it open)",
    )
    parser.add_argument(
        "--wait",
        action="store_true",
        help="with --resume or --continue: if another dsh has the session open, wait "
        "until it closes it",
    )
    parser.add_argument("--max-steps", type=int, metavar="N", help="end a turn after N steps")
    parser.add_argument(
        "--title",
        action="store_true",
        help="headless: title the session (one more, small model call); interactive UIs always do",
    )
    parser.add_argument("--cwd", metavar="DIR", help="work in DIR instead of the current directory")
    parser.add_argument(
        "--permission-mode",
        choices=MODES,
        help="what may run without asking (headless: what is not allowed is denied)",
    )
    parser.add_argument(
        "--sandbox",
        choices=POLICIES,
        help="what contains the commands the model runs: workspace-write (default: the "
        "project writable, no network), read-only, or off",
    )
    parser.add_argument(
        "--trust",
        action="store_true",
        help="apply this folder's own configuration (.dsh/settings.toml, .env) in full for "
        "this run, as if trusted (see `dsh trust`)",
    )
    return parser


def build_command_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dsh")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    plugins = commands.add_parser(
        "plugins", help="list the plugins found, where from, and which failed to load"
    )
    plugins.add_argument("--json", action="store_true", help="print JSON instead of a table")
    models = commands.add_parser(
        "models",
        help="list the provider's models with what dsh knows of them (context, output, "
        "vision, prices)",
    )
    models.add_argument("--json", action="store_true", help="print JSON instead of a table")
    models.add_argument("--provider", help="the provider route (default: [agent] provider)")
    doctor = commands.add_parser(
        "doctor",
        help="check the settings, the key, the endpoint, the sandbox, git, rg, node and "
        "the configured language and MCP servers, saying how to fix what is wrong",
    )
    doctor.add_argument(
        "--live", action="store_true", help="also send one tiny request (max_tokens 1)"
    )
    doctor.add_argument("--json", action="store_true", help="print JSON instead of lines")
    doctor.add_argument(
        "--timeout",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="how long any one check may take (default 10)",
    )
    acp = commands.add_parser(
        "acp", help="be an editor's agent: the Agent Client Protocol on stdin and stdout"
    )
    acp.add_argument(
        "--permission-mode",
        choices=MODES,
        help="the sessions' permission mode at start (the editor can switch it)",
    )
    acp.add_argument(
        "--sandbox", choices=POLICIES, help="what contains the commands the model runs"
    )
    completion = commands.add_parser(
        "completion",
        help='print the shell completion script: eval "$(dsh completion bash)", '
        "source <(dsh completion zsh), dsh completion fish | source",
    )
    completion.add_argument("shell", choices=("bash", "zsh", "fish"))
    from dsh.cli.config import add_parser as add_config_parser
    from dsh.cli.sessions_parser import add_parser
    from dsh.cli.trust import add_parsers as add_trust_parsers
    from dsh.replay.cli import add_parser as add_replay_parser

    add_parser(commands)
    add_replay_parser(commands)
    add_config_parser(commands)
    add_trust_parsers(commands)
    return parser


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError("give a number of seconds above 0, at most 3600")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    from dsh.control_chars import VisibleStream
    from dsh.held_secrets import hold

    # First of all: the keys leave the environment (and /proc/<pid>/environ) before
    # anything can start a child or a thread that would copy them.
    hold()
    # Every note on stderr, whoever writes it and whatever it quotes (a file name the
    # model chose, a line of a stored log), shows control characters as pictures.
    sys.stderr = VisibleStream.around(sys.stderr)
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in SUBCOMMANDS:
        command = build_command_parser().parse_args(args_list)
        return _into_stdout(lambda: _command(command))
    if _maybe_plugin_command(args_list):
        code = _into_stdout(lambda: _plugin_command(args_list))
        if code is not None:
            return code
    parser = build_parser()
    args = parser.parse_args(args_list)
    if (args.fork_session or args.wait) and not (args.resume or args.continue_last):
        flag = "--fork-session" if args.fork_session else "--wait"
        parser.error(f"{flag} goes with --resume or --continue")
    if args.max_steps is not None and args.max_steps < 1:
        parser.error("--max-steps must be at least 1")
    if (args.headless or args.plain) and args.resume == PICK:
        mode = "-p" if args.headless else "--plain"
        parser.error(f"{mode} needs a session id after --resume (dsh sessions list shows them)")
    if args.demo and not args.headless:
        return _tui(args)
    if args.plain and not args.headless:
        return _plain(args)
    if not args.headless:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            print(
                "dsh: the interactive UI needs a terminal; use -p for a one-shot run, or"
                " --plain for line mode",
                file=sys.stderr,
            )
            return 2
        return _tui(args)
    return _headless(args)


_Code = TypeVar("_Code", int, int | None)


def _into_stdout(run: Callable[[], _Code]) -> _Code | int:
    """Run a command that prints, ending quietly when stdout's reader has gone
    (``dsh sessions export ID | head``) as ``cat`` does: status 141, no traceback."""
    try:
        code = run()
        sys.stdout.flush()  # inside the guard: a closed pipe is found here, not at exit
    except BrokenPipeError:
        # Whatever is still buffered must not fail again when Python exits.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141  # what a shell reports for a command killed by SIGPIPE
    return code


_WORD = re.compile(r"^[a-z][a-z0-9_-]*$")


def _maybe_plugin_command(args: list[str]) -> bool:
    """``dsh NAME WORD ...``: two words first, which no prompt can be (the prompt is one
    argument), the first no core command; or ``dsh NAME`` alone, which a plugin's
    command answers with its usage (``dsh mcp``) and any other word leaves a prompt.
    Only then are the plugins looked at."""
    if not args or not _WORD.match(args[0]):
        return False
    return len(args) == 1 or not args[1].startswith("-") or args[1] in ("-h", "--help")


def _plugin_command(args: list[str]) -> int | None:
    """Run the plugin command named ``args[0]``; None when no plugin has one."""
    from dsh.kernel import discover

    for candidate in discover():
        plugin = candidate.plugin
        for command in plugin.cli if plugin is not None else ():
            if command.name == args[0]:
                if sys.stdout.isatty():
                    from dsh.control_chars import VisibleStream

                    sys.stdout = VisibleStream.around(sys.stdout)
                parser = argparse.ArgumentParser(
                    prog=f"dsh {command.name}", description=command.help
                )
                command.configure(parser)
                return command.run(parser.parse_args(args[1:]), _Host())
    return None


class _Host:
    """The :class:`~dsh.kernel.CliHost` of a plugin's command."""

    def runtime(self) -> Any:
        import contextlib

        @contextlib.asynccontextmanager
        async def started() -> AsyncIterator[Any]:
            import asyncio
            from pathlib import Path

            from dsh.paths import dsh_home
            from dsh.runtime import start_runtime
            from dsh.settings import load_settings

            home, cwd = dsh_home(), Path.cwd()
            settings = await asyncio.to_thread(load_settings, home, cwd)
            runtime = await start_runtime(home=home, cwd=cwd, settings=settings)
            try:
                yield runtime.root
            finally:
                await runtime.aclose()

        return started()


def _session_choice(args: argparse.Namespace) -> dict[str, Any]:
    """What every front end takes from the flags: where, which session, which model."""
    from pathlib import Path

    return {
        "cwd": Path(args.cwd) if args.cwd else None,
        "resume": args.resume or None,
        "continue_last": args.continue_last,
        "model": args.model,
        "provider": args.provider,
        "effort": args.effort,
        "permission_mode": args.permission_mode,
        "sandbox": args.sandbox,
        "trust": args.trust,
        "fork": args.fork_session,
        "wait": args.wait,
    }


def _plain(args: argparse.Namespace) -> int:
    import asyncio

    from dsh.bulk import pause_for_start_up
    from dsh.code_cache import install as install_code_cache

    pause_for_start_up()  # until the runtime is up (SessionController.start)
    install_code_cache()  # until then too

    from dsh.ui.plain import PlainRequest, run_plain

    # stdin is not read as the prompt: piped, it is a script
    request = PlainRequest(prompt=args.prompt, **_session_choice(args))
    code = asyncio.run(run_plain(request))
    sys.stdout.flush()
    return code


def _tui(args: argparse.Namespace) -> int:
    from dsh.ui.tui.early_terminal import take_terminal

    # Before the imports below (a second on a cold start): an Enter typed meanwhile
    # must reach the app as Enter, not as the LF the cooked terminal makes of it.
    early = take_terminal()
    try:
        import asyncio

        from dsh.bulk import pause_for_start_up
        from dsh.code_cache import install as install_code_cache

        pause_for_start_up()  # until the runtime is up (SessionController.start)
        install_code_cache()  # until then too

        from dsh.ui.tui.launch import launch

        code = asyncio.run(
            launch(
                args.prompt,
                pick=args.resume == PICK,
                demo=args.demo,
                early=early,
                **_session_choice(args),
            )
        )
    finally:
        if early is not None:
            early.restore()
    sys.stdout.flush()
    return code


def _command(args: argparse.Namespace) -> int:
    from dsh.control_chars import VisibleStream

    if args.command == "acp":
        from dsh.ui.acp import run as run_acp

        return run_acp(permission_mode=args.permission_mode, sandbox=args.sandbox)
    if sys.stdout.isatty():  # what a person reads; into a pipe it stays exact
        sys.stdout = VisibleStream.around(sys.stdout)
    match args.command:
        case "plugins":
            from dsh.cli.plugins import run_plugins

            return run_plugins(as_json=args.json)
        case "models":
            from dsh.cli.models import run_models

            return run_models(provider=args.provider, as_json=args.json)
        case "doctor":
            from dsh.cli.doctor import run_doctor

            return run_doctor(live=args.live, as_json=args.json, timeout_s=args.timeout)
        case "sessions":
            from dsh.cli.sessions import run_sessions

            return run_sessions(args)
        case "replay":
            from dsh.replay.cli import run_replay

            return run_replay(args)
        case "config":
            from dsh.cli.config import run_config

            return run_config(args)
        case "trust" | "untrust":
            from dsh.cli.trust import run_trust

            return run_trust(args)
        case "completion":
            from dsh.cli.completion import run_completion

            return run_completion(args.shell, build_parser(), build_command_parser())
    return 2


def _headless(args: argparse.Namespace) -> int:
    import asyncio

    from dsh.bulk import pause_for_start_up
    from dsh.code_cache import install as install_code_cache

    pause_for_start_up()  # until the runtime is up (SessionController.start)
    install_code_cache()  # until then too

    from dsh.ui.headless import HeadlessRequest, run

    prompt = args.prompt
    if args.input_format == "text":
        from dsh.cli.piped import piped_text, with_piped

        piped = piped_text(sys.stdin.buffer, sys.stderr, prompt_given=prompt is not None)
        prompt = with_piped(prompt, piped)
    request = HeadlessRequest(
        prompt=prompt,
        output_format=args.output_format,
        input_format=args.input_format,
        max_steps=args.max_steps,
        title=args.title,
        **_session_choice(args),
    )
    import gc

    # Everything imported so far lives until exit: keep the collector from walking it.
    gc.freeze()
    code = asyncio.run(run(request))
    # The session is flushed and closed and the runtime disposed by now; skipping the
    # interpreter's teardown saves a noticeable share of a short run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
