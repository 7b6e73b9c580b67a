"""``dsh replay SESSION``: run a stored session (an id or prefix) or a replay file again,
offline, and say step by step whether the requests and tool calls match the recorded
ones. Exit 0 when identical, 1 at the first difference (named), 2 when the session
cannot be read."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from dsh.paths import dsh_home


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "replay",
        help="run a session again offline and compare each request with the recorded one",
    )
    parser.add_argument("session", help="a session id (or prefix), or a replay file")
    parser.add_argument(
        "--tools",
        choices=("recorded", "live"),
        default="recorded",
        help="recorded: each call gets its recorded result, nothing runs (default); live: "
        "tools run in a scratch copy of the workspace at the session's first checkpoint",
    )
    parser.add_argument("--json", action="store_true", help="the report as JSON")
    parser.add_argument(
        "--pace", action="store_true", help="serve the model's chunks with the recorded pauses"
    )
    parser.add_argument("--model", help="a fork: the turns after --until-turn go to this model")
    parser.add_argument("--provider", help="a fork: the provider route of those turns")
    parser.add_argument(
        "--until-turn",
        type=int,
        metavar="N",
        help="with --model or --provider: replay turns 1..N from the log, then send the "
        "recorded prompts of the later turns to the model for real (default: 1)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="with a fork: store the new session, to open it with dsh --resume",
    )
    parser.add_argument(
        "--render",
        choices=("text", "svg"),
        help="instead of replaying: the session's transcript as the TUI draws it now",
    )
    parser.add_argument(
        "--size", default="100x30", help="the screen --render draws (COLUMNSxROWS, default 100x30)"
    )
    parser.add_argument(
        "--expect",
        metavar="FILE",
        help="with --render: compare with this rendering; exit 1 with the lines that differ",
    )


def run_replay(args: argparse.Namespace) -> int:
    return asyncio.run(_replay(args))


async def _replay(args: argparse.Namespace) -> int:
    from dsh.kernel import Context, discover, load_vocabularies
    from dsh.replay.compare import compare
    from dsh.replay.export import ReplayFileError, is_replay_file, read_replay_file
    from dsh.replay.recorded import read_recording
    from dsh.replay.run import ReplayOptions, replay

    vocabulary = Context(name="vocabulary")
    await load_vocabularies(vocabulary, discover())
    try:
        target = Path(args.session)
        forking = args.model is not None or args.provider is not None
        if (args.until_turn is not None or args.keep) and not forking:
            print("dsh: --until-turn and --keep go with --model or --provider", file=sys.stderr)
            return 2
        if args.until_turn is not None and args.until_turn < 0:
            print("dsh: --until-turn is a turn number, 0 or more", file=sys.stderr)
            return 2
        options = ReplayOptions(
            tools=args.tools,
            pace=args.pace,
            model=args.model,
            provider=args.provider,
            live_after=(1 if args.until_turn is None else args.until_turn) if forking else None,
        )
        try:
            if is_replay_file(target):
                document = await asyncio.to_thread(read_replay_file, target)
                header, events = document.loaded(str(target))
                options.settings = document.settings
                options.foreign = True
                options.workspace = document.files()
            else:
                header, events = await _stored(args.session)
                home = dsh_home()
                settings = home / "settings.toml"
                if settings.is_file():
                    options.settings = await asyncio.to_thread(settings.read_text)
                if args.tools == "live":
                    from dsh.replay.export import first_checkpoint_files

                    options.workspace = await first_checkpoint_files(home, events)
        except (ReplayFileError, LookupError, OSError, ValueError) as error:
            print(f"dsh: {error}", file=sys.stderr)
            return 2
        if args.tools == "live" and options.workspace is None and not args.render:
            print(
                "dsh: this session has no checkpoint to start from: --tools live works in an "
                "empty folder",
                file=sys.stderr,
            )
        if args.render:
            return await _render(args, events)
        recording = read_recording(header, events)
        run = await replay(recording, options)
        report = compare(run)
        if args.keep and run.header is not None:
            kept = await _keep(run.header, run.events, header.cwd)
            report.notes.append(f"the fork is stored as session {kept}: dsh --resume {kept[:8]}")
        if args.json:
            sys.stdout.write(json.dumps(report.to_json(), indent=1, ensure_ascii=False) + "\n")
        else:
            print(
                f"replaying {header.id[:8]}: {len(recording.requests)} requests, "
                f"{len(recording.calls)} tool calls, tools {args.tools}"
            )
            sys.stdout.write(report.text())
        return 0 if report.identical else 1
    finally:
        await vocabulary.dispose()


async def _render(args: argparse.Namespace, events: Any) -> int:
    import difflib

    from dsh.replay.render import parse_size, render_transcript

    try:
        width, height = parse_size(args.size)
    except ValueError as error:
        print(f"dsh: {error}", file=sys.stderr)
        return 2
    drawn = await render_transcript(events, width=width, height=height, form=args.render)
    if args.expect is None:
        sys.stdout.write(drawn)
        return 0
    try:
        expected = await asyncio.to_thread(Path(args.expect).read_text)
    except OSError as error:
        print(f"dsh: {args.expect}: cannot be read ({error.strerror})", file=sys.stderr)
        return 2
    if drawn == expected:
        print(f"the transcript is drawn as {args.expect} holds it")
        return 0
    diff = difflib.unified_diff(
        expected.splitlines(keepends=True),
        drawn.splitlines(keepends=True),
        fromfile=args.expect,
        tofile="drawn now",
    )
    sys.stdout.writelines(diff)
    return 1


async def _keep(header: Any, events: Any, cwd: str | None) -> str:
    """Store the replay's session (a fork) in this dsh's home, in the recorded folder."""
    from dsh.session import SessionStore
    from dsh.settings import load_settings

    home = dsh_home()
    backend = load_settings(home, Path.cwd(), check=False).storage.backend
    store = SessionStore.at(home, backend)
    kept = header.model_copy(update={"cwd": cwd}) if cwd else header
    try:
        persistence = store.persistence
        await persistence.create(kept)
        await persistence.append(kept.id, list(events))
        if store.catalog is not None:
            await store.catalog.record(
                kept, list(events), backend=persistence.name, location=persistence.location(kept.id)
            )
    finally:
        await store.aclose()
    return str(kept.id)


async def _stored(id_or_prefix: str) -> tuple[Any, Any]:
    from dsh.session import SessionStore
    from dsh.settings import load_settings

    home = dsh_home()
    backend = load_settings(home, Path.cwd(), check=False).storage.backend
    store = SessionStore.at(home, backend)
    try:
        session_id = await store.resolve(id_or_prefix)
        loaded = await store.persistence.inspect(session_id)
        return loaded.header, loaded.events
    finally:
        await store.aclose()
