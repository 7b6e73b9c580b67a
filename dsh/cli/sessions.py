"""``dsh sessions``: list, show, search, export, fork, import, remove and reindex sessions.

No plugin is applied here, but a command that reads logs first registers every
plugin's vocabulary (their event types), so a log reads as a running dsh reads it: a
plugin's title heads the Markdown, a summary's cost counts in the index. Finding the
plugins imports them all, so ``list`` does it only when it has a session to index.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic.alias_generators import to_camel

from dsh.control_chars import visible
from dsh.paths import dsh_home
from dsh.session import LoadedSession, Session, SessionStore
from dsh.session.catalog import CatalogEntry
from dsh.session.databases import reason
from dsh.session.jsonl import JsonlPersistence, export_jsonl, parse_jsonl
from dsh.session.markdown import to_markdown
from dsh.session.persistence import PersistenceError
from dsh.session.sqlite import SqlitePersistence
from dsh.session.store import (
    AmbiguousSessionError,
    Backend,
    ForkError,
    blobs_beside,
    copy_blobs,
    make_persistence,
)
from dsh.settings import SettingsError, load_settings

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.llm import SessionId
    from dsh.session.store import SessionSink


def _short_time(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M")


def _row(entry: CatalogEntry) -> str:
    tokens = entry.input_tokens + entry.cache_read_tokens + entry.output_tokens
    cost = f"${entry.cost:.4f}" if entry.cost is not None else "-"
    return (
        f"{entry.id[:8]}  {_short_time(entry.updated_at)}  {entry.turns:>4} "
        f"{'turn ' if entry.turns == 1 else 'turns'}  "
        f"{tokens:>9,} tok  {cost:>9}  {entry.display_title}"
        + (f"  (from {entry.parent_session[:8]})" if entry.parent_session else "")
    )


class _Cli:
    def __init__(self, args: argparse.Namespace, home: Path, backend: Backend) -> None:
        self.args = args
        self.home = home
        self.store = SessionStore.at(self.home, backend)
        self._vocabulary: Context | None = None

    async def vocabulary(self) -> None:
        """Register the plugins' vocabulary, once, before a log is read."""
        if self._vocabulary is None:
            from dsh.kernel import Context, discover, load_vocabularies

            self._vocabulary = Context(name="vocabulary")
            await load_vocabularies(self._vocabulary, discover())

    async def read(self, id_or_prefix: str) -> LoadedSession:
        """A stored session, from whichever backend holds it, without writing anything."""
        await self.vocabulary()
        session_id = await self.store.resolve(id_or_prefix)
        entry = await self.store.catalog.get(session_id) if self.store.catalog else None
        if entry is not None and entry.backend != self.store.persistence.name:
            other = make_persistence(entry.backend, self.home)  # type: ignore[arg-type]
            try:
                return await other.inspect(session_id)
            finally:
                await other.close()
        return await self.store.persistence.inspect(session_id)

    async def children(self, session_id: str, cwd: str | None) -> list[tuple[str, str]]:
        """The sessions started from this one (subagents, forks): in its directory."""
        if self.store.catalog is None:
            return []
        await self.index(cwd)
        entries = await self.store.catalog.list(cwd=cwd)
        found = [e for e in entries if e.parent_session == session_id]
        return [(e.id, e.display_title) for e in sorted(found, key=lambda e: e.created_at)]

    async def run(self) -> int:
        try:
            match self.args.action:
                case "list":
                    return await self.list()
                case "show":
                    loaded = await self.read(self.args.id)
                    for issue in loaded.issues:
                        print(f"note: {issue}", file=sys.stderr)
                    children = await self.children(loaded.header.id, loaded.header.cwd)
                    sys.stdout.write(to_markdown(loaded.header, loaded.events, children=children))
                    return 0
                case "search":
                    return await self.search()
                case "export":
                    return await self.export()
                case "fork":
                    return await self.fork()
                case "import":
                    return await self.import_file()
                case "rm":
                    return await self.remove()
                case "reindex":
                    return await self.reindex()
            return 2
        except (LookupError, AmbiguousSessionError, PersistenceError, ForkError) as error:
            print(f"dsh: {error}", file=sys.stderr)
            return 1
        except BrokenPipeError:
            raise  # stdout's reader left (`| head`): the command line ends it quietly
        except (OSError, sqlite3.Error) as error:
            # Storage that cannot be read (or a file that cannot be written): said in
            # one line, as any other failure of a command.
            print(f"dsh: {reason(error)}", file=sys.stderr)
            return 1
        finally:
            await self.store.aclose()
            if self._vocabulary is not None:
                await self._vocabulary.dispose()

    async def index(self, cwd: str | None) -> None:
        """Bring the index up to date with storage (``cwd``'s sessions, when given),
        registering the plugins' vocabulary first if a log is to be read."""
        differences = await self.store.index_differences(cwd)
        if differences.missing:
            await self.vocabulary()
        await self.store.index_missing(cwd, differences)

    async def list(self) -> int:
        assert self.store.catalog is not None
        cwd = None if self.args.all else os.getcwd()
        await self.index(cwd)
        entries = await self.store.catalog.list(cwd=cwd, limit=self.args.limit)
        if self.args.json:
            # camelCase keys, as every JSON dsh prints (the log's, stream-json's).
            rows = [{to_camel(key): value for key, value in vars(e).items()} for e in entries]
            print(json.dumps(rows, indent=2))
        elif not entries:
            where = "" if self.args.all else " in this directory (try --all)"
            print(f"No sessions{where}.")
        else:
            for entry in entries:
                print(visible(_row(entry) + (f"  [{entry.cwd}]" if self.args.all else "")))
        return 0

    async def search(self) -> int:
        assert self.store.catalog is not None
        text = " ".join(self.args.text)
        cwd = os.getcwd() if self.args.here else None
        await self.index(cwd)
        hits = await self.store.catalog.search(text, cwd=cwd, limit=self.args.limit)
        if not hits:
            print(f"Nothing found for {text!r}.")
        for hit in hits:
            snippet = " ".join(hit.snippet.split())
            print(visible(f"{hit.session_id[:8]}  seq {hit.seq:<5} {hit.type:<17} {snippet}"))
        return 0

    async def export(self) -> int:
        loaded = await self.read(self.args.id)
        if self.args.format == "markdown":
            text = to_markdown(loaded.header, loaded.events)
        elif self.args.format == "replay":
            from dsh.replay.export import (
                build_replay_file,
                first_checkpoint_files,
                known_secrets,
            )

            cwd = Path(loaded.header.cwd) if loaded.header.cwd else Path.cwd()
            # The user's own settings go along (a replay needs their plugins and MCP
            # servers), with every value that looks secret in them replaced.
            own = self.home / "settings.toml"
            settings = await asyncio.to_thread(own.read_text) if own.is_file() else ""
            secrets = await asyncio.to_thread(known_secrets, self.home, cwd)
            text = build_replay_file(
                loaded.header,
                loaded.events,
                workspace=await first_checkpoint_files(self.home, loaded.events),
                secrets=secrets,
                settings=settings,
            )
            if self.args.output:
                await asyncio.to_thread(Path(self.args.output).write_text, text)
            else:
                sys.stdout.write(text)
            return 0
        else:
            text = export_jsonl(loaded.header, loaded.events)
        if self.args.output:
            await asyncio.to_thread(Path(self.args.output).write_text, text)
            if self.args.format != "markdown":
                # The bytes events refer to by digest (images) go beside the file.
                source = self.store.persistence.blob_dir(loaded.header)
                await asyncio.to_thread(copy_blobs, source, blobs_beside(self.args.output))
        else:
            sys.stdout.write(text)
        return 0

    async def fork(self) -> int:
        """A new session holding the conversation up to a turn; the source is only read
        (so it can be forked while another dsh writes it)."""
        await self.vocabulary()
        turn = self.args.at
        if turn is not None and turn < 1:
            print(f"dsh: --at takes a turn number (1 or more), not {turn}", file=sys.stderr)
            return 1
        forked = await self.store.fork(self.args.id, at_turn=turn)
        source = forked.header.parent_session or self.args.id
        code = await self._restore_code(forked, source) if self.args.code else 0
        await self.store.close(forked)
        where = f"turn {turn}" if turn is not None else "its last finished turn"
        print(f"Forked session {source} at {where} into {forked.id}.")
        print(f"Resume it with: dsh --resume {forked.id}")
        return code

    async def _restore_code(self, forked: Session, source: str) -> int:
        """``--code``: the files back as the fork's last turn left them, logged in the
        fork (the command line is the confirmation; conflicts are left alone)."""
        from dsh.checkpoints import CheckpointError, Checkpoints
        from dsh.checkpoints.commands import restore_fork_files
        from dsh.kernel import Context

        cwd = Path(forked.header.cwd or Path.cwd())
        table = load_settings(self.home, cwd, check=False).checkpoints
        checkpoints = Checkpoints(table, home=self.home)
        owner = _ForkOwner(forked, self.store.sink(forked), cwd, Context(name="fork"))

        async def confirm() -> bool:
            return True  # the command line said --code

        try:
            source_events = (await self.read(source)).events
            print(
                await restore_fork_files(
                    checkpoints, owner, source_events, show=print, confirm=confirm
                )
            )
        except CheckpointError as error:
            print(f"dsh: the files were not restored: {error}", file=sys.stderr)
            return 1
        finally:
            await checkpoints.aclose()
        return 0

    async def import_file(self) -> int:
        await self.vocabulary()
        path = Path(self.args.file)
        loaded, _ = parse_jsonl(await asyncio.to_thread(path.read_bytes), str(path))
        for issue in loaded.issues:
            print(f"note: {issue}", file=sys.stderr)
        persistence = self.store.persistence
        if await persistence.exists(loaded.header.id):
            print(f"dsh: session {loaded.header.id} is already stored", file=sys.stderr)
            return 1
        await persistence.create(loaded.header)
        await persistence.append(loaded.header.id, loaded.events)
        target = persistence.blob_dir(loaded.header)
        await asyncio.to_thread(copy_blobs, blobs_beside(path), target)
        if self.store.catalog is not None:
            await self.store.catalog.record(
                loaded.header,
                loaded.events,
                backend=persistence.name,
                location=persistence.location(loaded.header.id),
            )
        print(f"Imported session {loaded.header.id} ({len(loaded.events)} events).")
        return 0

    async def remove(self) -> int:
        session_id = await self.store.resolve(self.args.id)
        if not self.args.yes:
            if not sys.stdin.isatty():
                print("dsh: pass --yes to delete without a terminal to confirm", file=sys.stderr)
                return 1
            question = f"Delete session {session_id}? This cannot be undone. [y/N] "
            answer = await asyncio.to_thread(input, question)
            if answer.strip().lower() not in ("y", "yes"):
                print("Kept.")
                return 0
        await self.store.delete(session_id)
        print(f"Deleted session {session_id}.")
        return 0

    async def reindex(self) -> int:
        assert self.store.catalog is not None
        await self.vocabulary()
        backends = [JsonlPersistence(self.home)]
        sqlite = SqlitePersistence(self.home)
        if sqlite.path.exists():
            backends.append(sqlite)  # type: ignore[arg-type]
        try:
            count = await self.store.catalog.rebuild(backends)
        finally:
            for backend in backends:
                await backend.close()
        print(f"Indexed {count} session(s).")
        return 0


@dataclass
class _ForkOwner:
    """A fork this command has open, as the checkpoints service sees its writer."""

    session: Session
    sink: SessionSink
    cwd: Path
    ctx: Context

    @property
    def id(self) -> SessionId:
        return self.session.id

    @property
    def parent(self) -> None:
        return None  # no agent runs the fork here

    async def flush(self, *, sync: bool = True) -> bool:
        return await self.sink.flush(sync=sync)


def run_sessions(args: argparse.Namespace) -> int:
    home = dsh_home()
    try:
        # Only [storage] is read: a problem elsewhere in the settings is no reason
        # not to show the sessions.
        backend = load_settings(home, Path.cwd(), check=False).storage.backend
    except SettingsError as error:
        print(f"dsh: {error}", file=sys.stderr)
        return 1
    return asyncio.run(_Cli(args, home, backend).run())
