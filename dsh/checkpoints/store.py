"""The private git object store that holds a project's checkpoints.

One bare repository per project, ``$DSH_HOME/checkpoints/<sha256 of the root's real
path, 16 hex>/``, driven through the ``git`` binary with the project as its work tree
and a private index per session (``indexes/<session id>``): git's stat cache makes a
snapshot of an unchanged project cost the stats, and its content-addressed objects
make a snapshot of unchanged files cost nothing. Nothing here reads or writes the
project's ``.git`` (git skips any ``.git``), its index, refs or stash.

The bytes are stored as they are: ``$GIT_DIR/info/attributes`` unsets ``text``,
``filter``, ``ident``, ``eol`` and ``working-tree-encoding`` for every path (it wins
over the project's ``.gitattributes``), no user or system config is read, and hooks,
fsmonitor and every program git could be told to run are off. ``diff`` is left to
git's own detection (``!diff``) so that line counts work; no diff driver is
configured, so none can run.

Every git call goes through :class:`GitRunner` (an ``asyncio`` subprocess, started as
dsh's helpers are); its failures are :class:`CheckpointError`.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dsh.paths import private_dir
from dsh.policy.git_config import with_safe_git
from dsh.processes import helper_command
from dsh.session.checkpoint_events import LeftOut

__all__ = [
    "ABSENT",
    "LINK_MODE",
    "CheckpointError",
    "CheckpointStore",
    "Entry",
    "GitRunner",
    "LineCount",
    "Snapshot",
    "TreeChange",
    "blob_id",
    "current_blob",
    "store_folder",
]

ATTRIBUTES = b"* -text -filter -ident -eol -working-tree-encoding !diff\n"
LINK_MODE = 0o120000
GITLINK_MODE = 0o160000
ABSENT = ""
"""What :func:`current_blob` says of a path that holds no file."""
MB = 1024 * 1024
BULK_FILES = 64
BULK = (("core.bigFileThreshold", "1"), ("core.compression", "1"))
"""For a snapshot that stores many files: ``update-index`` streams every blob into
one pack (its objects transaction), lightly compressed. Only for that command: above
the threshold git also takes files for binary in diffs, and a command without such a
transaction would make a pack per blob."""
BULK_MALLOC = "glibc.malloc.trim_threshold=268435456:glibc.malloc.top_pad=67108864"
"""glibc's heap kept rather than given back after each blob: a third of such a
command's time went in growing and trimming it (``brk``) per file."""


class CheckpointError(Exception):
    """The store could not do what was asked; the message says what and why."""


# Settings of our own, at command scope after dsh's safe ones (so they win).
_OWN_SETTINGS: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", os.devnull),
    ("core.autocrlf", "false"),
    ("core.safecrlf", "false"),
    ("core.symlinks", "true"),
    ("core.filemode", "true"),
    ("core.trustctime", "true"),
    ("core.quotePath", "false"),
    ("core.attributesFile", os.devnull),
    ("core.untrackedCache", "false"),
    ("core.splitIndex", "false"),
    ("core.preloadIndex", "true"),
    ("core.bare", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("index.threads", "true"),
)


def store_folder(home: Path, root: Path) -> Path:
    """Where the checkpoints of the project at ``root`` are kept."""
    real = os.path.realpath(root)
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    return home / "checkpoints" / digest


class GitRunner:
    """Runs git on one store: ``GIT_DIR`` the store, ``GIT_WORK_TREE`` the project."""

    def __init__(self, git_dir: Path, work_tree: Path) -> None:
        self.git_dir = git_dir
        self.work_tree = work_tree
        exclude = work_tree / ".git" / "info" / "exclude"
        settings = [
            *_OWN_SETTINGS,
            ("core.excludesFile", str(exclude) if exclude.is_file() else os.devnull),
        ]
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": str(git_dir),
            "LC_ALL": "C",
            "GIT_DIR": str(git_dir),
            "GIT_WORK_TREE": str(work_tree),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_LITERAL_PATHSPECS": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_CONFIG_COUNT": str(len(settings)),
        }
        for index, (key, value) in enumerate(settings):
            env[f"GIT_CONFIG_KEY_{index}"] = key
            env[f"GIT_CONFIG_VALUE_{index}"] = value
        self._env = with_safe_git(env)

    async def run(
        self,
        *args: str,
        stdin: bytes | None = None,
        index: Path | None = None,
        bulk: bool = False,
    ) -> bytes:
        """git's standard output; raises :class:`CheckpointError` when git fails.
        ``bulk``: the command stores many blobs (see :data:`BULK`)."""
        env = self._env if index is None else {**self._env, "GIT_INDEX_FILE": str(index)}
        if bulk:
            env = {**env, "GLIBC_TUNABLES": BULK_MALLOC}
        if args[0] == "init":  # a bare repository is made without a work tree
            env = {k: v for k, v in env.items() if k not in ("GIT_WORK_TREE", "GIT_DIR")}
        settings = (
            [part for key, value in BULK for part in ("-c", f"{key}={value}")] if bulk else []
        )
        argv, options = helper_command(["git", *settings, *args])
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=self.work_tree,
                env=env,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                # Copies of the user's files: readable by the user alone, whatever
                # umask dsh was started with.
                umask=0o077,
                **options,
            )
        except OSError as error:
            raise CheckpointError(f"git could not start: {error}") from None
        try:
            out, err = await process.communicate(stdin)
        except BaseException:
            if process.returncode is None:
                process.kill()
                await process.wait()
            raise
        if process.returncode != 0:
            said = err.decode("utf-8", "replace").strip().splitlines()
            reason = said[-1] if said else f"exit status {process.returncode}"
            raise CheckpointError(f"git {args[0]} failed: {reason}")
        return out


@dataclass(frozen=True)
class Entry:
    """A path in a tree: git's mode (``0o100644``, ``0o100755``, ``0o120000``) and blob."""

    mode: int
    blob: str


@dataclass(frozen=True)
class TreeChange:
    path: str
    old: Entry | None
    new: Entry | None


@dataclass(frozen=True)
class LineCount:
    added: int
    removed: int
    binary: bool = False


@dataclass(frozen=True)
class Snapshot:
    tree: str
    modes: dict[str, int] = field(default_factory=dict)
    left_out: tuple[LeftOut, ...] = ()
    new_bytes: int = 0
    """Bytes of the files this snapshot read again (new or changed since the last)."""


def blob_id(data: bytes) -> str:
    """git's id of a blob holding ``data``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def current_blob(path: Path) -> tuple[str, int]:
    """The blob id of what ``path`` holds now and its ``st_mode`` (a symlink's target
    text for a link); ``(ABSENT, 0)`` when nothing is there; a folder is ``("dir", mode)``.
    Blocking: run it in a thread."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return ABSENT, 0
    except NotADirectoryError:
        return ABSENT, 0
    if stat.S_ISLNK(info.st_mode):
        return blob_id(os.fsencode(os.readlink(path))), info.st_mode
    if stat.S_ISDIR(info.st_mode):
        return "dir", info.st_mode
    if not stat.S_ISREG(info.st_mode):
        return "special", info.st_mode
    return blob_id(path.read_bytes()), info.st_mode


def git_default_bits(git_mode: int) -> int:
    """The permission bits a file of ``git_mode`` gets when restored without ``modes``."""
    return 0o755 if git_mode & 0o111 else 0o644


class CheckpointStore:
    """One project's store (see the module's docstring)."""

    def __init__(self, folder: Path, root: Path) -> None:
        self.folder = folder
        self.root = root
        self.git = GitRunner(folder, root)

    @classmethod
    async def open(cls, home: Path, root: Path) -> CheckpointStore:
        """The store of the project at ``root``, made on first use."""

        def prepare() -> tuple[CheckpointStore, bool]:
            folder = store_folder(home, root)
            return cls(folder, Path(os.path.realpath(root))), (folder / "HEAD").is_file()

        store, made = await asyncio.to_thread(prepare)
        if not made:
            await store._create()
        return store

    async def _create(self) -> None:
        await asyncio.to_thread(private_dir, self.folder)
        # No template: nothing (no sample hook) is copied in.
        await self.git.run("init", "--bare", "--quiet", "--template=", str(self.folder))
        for key, value in (("gc.auto", "0"), ("core.autocrlf", "false"), ("core.bare", "false")):
            await self.git.run("config", key, value)

        def finish() -> None:
            private_dir(self.folder / "info")
            private_dir(self.folder / "indexes")
            _write_private(self.folder / "info" / "attributes", ATTRIBUTES)
            _write_private(self.folder / "root", os.fsencode(self.root) + b"\n")

        await asyncio.to_thread(finish)

    def index_path(self, name: str) -> Path:
        return self.folder / "indexes" / name

    # ------------------------------------------------------------------ snapshots

    async def snapshot(
        self,
        index_name: str,
        *,
        max_file_bytes: int = 10 * MB,
        max_checkpoint_bytes: int = 200 * MB,
        exclude: Sequence[Path] = (),
    ) -> Snapshot:
        """The project's files now, as a tree. Files over ``max_file_bytes`` are left
        out, and once the bytes read again pass ``max_checkpoint_bytes`` the largest
        remaining ones; ``exclude`` (folders inside the project, such as dsh's home) is
        never looked at."""
        index = self.index_path(index_name)
        args = ["ls-files", "-z", "--others", "--modified", "--exclude-standard"]
        for folder in exclude:
            try:
                relative = folder.resolve().relative_to(self.root)
            except ValueError:
                continue
            args.append(f"--exclude=/{relative.as_posix()}/")
        listed = await self.git.run(*args, index=index)
        names = sorted({n for n in _split(listed) if n and not n.endswith("/")})
        changed = await asyncio.to_thread(_stat_all, self.root, names)
        removed = [name for name, info in changed.items() if info is None]
        present = {n: i for n, i in changed.items() if i is not None}
        left_out: list[LeftOut] = []
        small: list[tuple[int, str]] = []
        for name, info in present.items():
            if stat.S_ISREG(info.st_mode) and info.st_size > max_file_bytes:
                left_out.append(LeftOut(path=name, size=info.st_size, reason="file-too-large"))
            else:
                small.append((info.st_size, name))
        small.sort()
        added: list[str] = []
        total = 0
        for size, name in small:
            if total + size > max_checkpoint_bytes:
                left_out.append(LeftOut(path=name, size=size, reason="checkpoint-too-large"))
                continue
            total += size
            added.append(name)
        if left_out:
            # A file left out now must not keep its old content in the index.
            await self.git.run(
                "update-index", "-z", "--force-remove", "--stdin",
                stdin=_joined(item.path for item in left_out), index=index,
            )  # fmt: skip
        if removed or added:
            # Many files (the first snapshot): one command streams every blob into one
            # pack; a loose object each would cost a file created per blob.
            await self.git.run(
                "update-index", "-z", "--add", "--remove", "--replace", "--stdin",
                stdin=_joined([*removed, *added]), index=index,
                bulk=len(added) >= BULK_FILES,
            )  # fmt: skip
        tree = (await self.git.run("write-tree", index=index)).decode().strip()
        staged = await self.git.run("ls-files", "-z", "--stage", index=index)
        modes = await asyncio.to_thread(_odd_modes, self.root, staged)
        left_out.sort(key=lambda item: item.path)
        return Snapshot(tree=tree, modes=modes, left_out=tuple(left_out), new_bytes=total)

    # ------------------------------------------------------------------ reading

    async def diff(self, old: str, new: str) -> list[TreeChange]:
        """What differs between two trees, path by path (no renames)."""
        if old == new:
            return []
        out = await self.git.run("diff-tree", "-r", "-z", "--no-renames", "--raw", old, new)
        parts = out.split(b"\0")
        changes: list[TreeChange] = []
        index = 0
        while index + 1 < len(parts):
            header = parts[index].decode()
            if not header.startswith(":"):
                index += 1
                continue
            old_mode, new_mode, old_blob, new_blob, _status = header[1:].split(" ")
            path = os.fsdecode(parts[index + 1])
            index += 2
            changes.append(
                TreeChange(
                    path,
                    _entry(old_mode, old_blob),
                    _entry(new_mode, new_blob),
                )
            )
        return changes

    async def line_counts(self, old: str, new: str) -> dict[str, LineCount]:
        """Lines added and removed per path between two trees (binary files marked)."""
        if old == new:
            return {}
        out = await self.git.run("diff-tree", "-r", "-z", "--no-renames", "--numstat", old, new)
        counts: dict[str, LineCount] = {}
        for record in out.split(b"\0"):
            fields = record.split(b"\t", 2)
            if len(fields) != 3:
                continue
            added, removed, path = fields
            name = os.fsdecode(path)
            if added == b"-":
                counts[name] = LineCount(0, 0, binary=True)
            else:
                counts[name] = LineCount(int(added), int(removed))
        return counts

    async def entries(self, tree: str) -> dict[str, Entry]:
        """Every file of a tree."""
        out = await self.git.run("ls-tree", "-r", "-z", "--full-tree", tree)
        found: dict[str, Entry] = {}
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, path = record.partition(b"\t")
            mode, _kind, blob = meta.decode().split(" ")
            found[os.fsdecode(path)] = Entry(int(mode, 8), blob)
        return found

    async def folders(self, tree: str) -> set[str]:
        """Every folder a tree holds."""
        out = await self.git.run("ls-tree", "-r", "-d", "-z", "--name-only", "--full-tree", tree)
        return {os.fsdecode(name) for name in out.split(b"\0") if name}

    async def read_blob(self, blob: str) -> bytes:
        return await self.git.run("cat-file", "blob", blob)

    async def read_blobs(self, blobs: Iterable[str]) -> dict[str, bytes]:
        """The bytes of each blob, read in one ``cat-file --batch``."""
        wanted = sorted(set(blobs))
        if not wanted:
            return {}
        out = await self.git.run(
            "cat-file", "--batch", stdin="".join(f"{b}\n" for b in wanted).encode()
        )
        found: dict[str, bytes] = {}
        at = 0
        for blob in wanted:
            end = out.index(b"\n", at)
            header = out[at:end].decode().split(" ")
            if len(header) != 3:
                raise CheckpointError(f"the checkpoint store has lost object {blob}")
            size = int(header[2])
            found[blob] = out[end + 1 : end + 1 + size]
            at = end + 1 + size + 1
        return found

    async def hash_files(self, paths: Sequence[str]) -> dict[str, str]:
        """The blob id each path holds now (:data:`ABSENT` when no file is there),
        regular files hashed in one ``git hash-object --stdin-paths`` call, as stored
        (no filter); symlinks by their target's text."""
        kinds = await asyncio.to_thread(_stat_all, self.root, list(paths))
        found: dict[str, str] = {}
        regular: list[str] = []
        for path, info in kinds.items():
            if info is None:
                found[path] = ABSENT
            elif stat.S_ISLNK(info.st_mode):
                target = await asyncio.to_thread(os.readlink, self.root / path)
                found[path] = blob_id(os.fsencode(target))
            elif stat.S_ISREG(info.st_mode):
                regular.append(path)
            else:
                found[path] = "dir" if stat.S_ISDIR(info.st_mode) else "special"
        if regular:
            out = await self.git.run(
                "hash-object", "--no-filters", "--stdin-paths",
                stdin="".join(f"{p}\n" for p in regular).encode(),
            )  # fmt: skip
            for path, blob in zip(regular, out.decode().split(), strict=True):
                found[path] = blob
        return found


def _write_private(path: Path, data: bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(descriptor, 0o600)  # whatever the umask took away or left
        os.write(descriptor, data)
    finally:
        os.close(descriptor)


def _split(out: bytes) -> list[str]:
    return [os.fsdecode(name) for name in out.split(b"\0")]


def _joined(names: Iterable[str]) -> bytes:
    return b"".join(os.fsencode(name) + b"\0" for name in names)


def _entry(mode: str, blob: str) -> Entry | None:
    value = int(mode, 8)
    return None if value == 0 else Entry(value, blob)


def _stat_all(root: Path, names: Sequence[str]) -> dict[str, os.stat_result | None]:
    """lstat of each path under ``root`` (None: nothing there, or a folder)."""
    found: dict[str, os.stat_result | None] = {}
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in names:
            try:
                info = os.lstat(os.fsencode(name), dir_fd=folder)
            except (FileNotFoundError, NotADirectoryError):
                found[name] = None
                continue
            found[name] = None if stat.S_ISDIR(info.st_mode) else info
    finally:
        os.close(folder)
    return found


def _odd_modes(root: Path, staged: bytes) -> dict[str, int]:
    """The permission bits of the index's regular files that git would not restore.
    Every file is looked at (a chmod changes no content, so git's cache does not say
    it): bytes paths against the root's descriptor keep that to a bare lstat each."""
    modes: dict[str, int] = {}
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for record in staged.split(b"\0"):
            if not record.startswith(b"100"):  # not a regular file (a link, a gitlink)
                continue
            meta, _, path = record.partition(b"\t")
            try:
                info = os.lstat(path, dir_fd=folder)
            except OSError:
                continue
            bits = info.st_mode & 0o7777
            executable = meta[3] == ord("7")  # 100755
            if bits != (0o755 if executable else 0o644) and stat.S_ISREG(info.st_mode):
                modes[os.fsdecode(path)] = bits
    finally:
        os.close(folder)
    return modes


def restored_mode(entry: Entry, modes: Mapping[str, int], path: str) -> int:
    """The whole ``st_mode`` a restore gives ``path`` of a tree with ``modes``."""
    if entry.mode == LINK_MODE:
        return LINK_MODE
    return stat.S_IFREG | modes.get(path, git_default_bits(entry.mode))
