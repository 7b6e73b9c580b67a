"""The credential seam: configuration names a credential, this module finds its value.

Configuration holds a :data:`CredentialRef`, the name of an environment variable such
as ``DEEPSEEK_API_KEY``, never the value. :meth:`CredentialStore.resolve` looks the
name up afresh for every operation, in four layers, the first non-empty value winning:

1. the process environment (never written), as dsh started with it: the secrets
   :mod:`dsh.held_secrets` took out of it at start are read from there;
2. ``$DSH_HOME/credentials.json``, a 0600 JSON object of name → value, which
   :meth:`~CredentialStore.set` and :meth:`~CredentialStore.unset` maintain;
3. ``<cwd>/.env``;
4. ``$DSH_HOME/.env``.

Values travel as :class:`Secret`, whose ``repr`` and ``str`` never show them, so a
value that reaches a log line, a traceback or an error message by accident stays
hidden; :func:`redact` scrubs values out of text that came from elsewhere (a
provider's error message). No message this module produces quotes a file's content,
since any of it may be a secret.
"""

from __future__ import annotations

import builtins
import hmac
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import AfterValidator

from dsh import held_secrets
from dsh.kernel import ServiceKey
from dsh.paths import CREDENTIALS_FILE, PRIVATE_FILE, dsh_home, private_dir, private_lock
from dsh.regular_files import read_regular_file

_log = logging.getLogger("dsh.credentials")

ENV_FILE = ".env"
LOCK_FILE = ".credentials.lock"
MIN_REDACTED = 4
"""Shorter values are left in text: replacing every ``abc`` would garble it and
hide nothing worth hiding."""

_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


class CredentialError(Exception):
    """Base of every credential failure. Messages never include a value."""


class InvalidCredentialRefError(CredentialError, ValueError):
    """A credential reference that is not an environment variable name."""


class CredentialsFileError(CredentialError):
    """``credentials.json`` cannot be read or does not hold name → value strings."""


class ShadowedCredentialError(CredentialError):
    """A write to ``credentials.json`` the process environment would make pointless."""


def check_ref(name: str) -> str:
    """``name`` if it is a valid credential reference, else a clear error."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        # The offending text is not quoted: a value pasted where its name belongs is
        # the likeliest mistake, and the error would then print the secret.
        raise InvalidCredentialRefError(
            "a credential reference must be the name of an environment variable, "
            "made of A-Z, 0-9 and _ and not starting with a digit (such as "
            "DEEPSEEK_API_KEY); the text given is not one (not shown, in case it "
            "is a secret)"
        )
    return name


CredentialRef = Annotated[str, AfterValidator(check_ref)]
"""The name of an environment variable. As a pydantic field type it is validated."""


class Secret:
    """A credential value that does not show itself; :meth:`reveal` hands it out."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('********')"

    def __str__(self) -> str:
        return "********"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        # Constant time, so comparing against a guess does not leak a prefix.
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash(self._value)

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Secret:
        return self  # immutable; and dataclasses.asdict deep-copies what it meets

    def __reduce__(self) -> Any:
        # A pickle (a cache, a worker handoff) would store the value in clear.
        raise TypeError("a Secret cannot be pickled")


SourceKind = Literal["environment", "credentials-file", "project-env-file", "home-env-file"]


@dataclass(frozen=True)
class CredentialSource:
    kind: SourceKind
    path: Path | None = None
    """The file the value came from; None for the environment."""

    def __str__(self) -> str:
        return self.kind if self.path is None else f"{self.kind} ({self.path})"


@dataclass(frozen=True)
class Credential:
    value: Secret
    source: CredentialSource


@dataclass(frozen=True)
class CredentialStatus:
    """What :meth:`CredentialStore.describe` can say about a credential without its value."""

    ref: str
    configured: bool
    source: CredentialSource | None
    writable: bool
    """Whether :meth:`CredentialStore.set` would be used: the environment does not
    shadow the name."""
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape: ``{configured, source?, path?, writable, warnings?}``."""
        shape: dict[str, Any] = {"ref": self.ref, "configured": self.configured}
        if self.source is not None:
            shape["source"] = self.source.kind
            if self.source.path is not None:
                shape["path"] = str(self.source.path)
        shape["writable"] = self.writable
        if self.warnings:
            shape["warnings"] = list(self.warnings)
        return shape


def redact(text: str, *secrets: Secret) -> str:
    """``text`` with every occurrence of each secret's value replaced by ``***``."""
    values = {secret.reveal() for secret in secrets}
    # Longest first, so a value that contains another is replaced whole.
    for value in sorted(values, key=len, reverse=True):
        if len(value) >= MIN_REDACTED:
            text = text.replace(value, "***")
    return text


# --- .env files ---------------------------------------------------------------------

_ASSIGNMENT = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)", re.S)
_AFTER_QUOTE = re.compile(r"\s*(?:#.*)?", re.S)
_UNQUOTED_COMMENT = re.compile(r"\s#")
_ESCAPES = {"n": "\n", '"': '"', "\\": "\\"}


class _MalformedError(Exception):
    """Why a line was skipped. Never carries the line's text."""


class EnvProblem(NamedTuple):
    line: int
    reason: str


def parse_env(text: str) -> tuple[dict[str, str], list[EnvProblem]]:
    """The assignments of a ``.env`` text, and the lines skipped as malformed (by
    number and reason only). A name assigned twice keeps its last value, as a shell
    sourcing the file would."""
    values: dict[str, str] = {}
    problems: list[EnvProblem] = []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _ASSIGNMENT.fullmatch(line)
        if match is None:
            problems.append(EnvProblem(number, "not a NAME=VALUE line"))
            continue
        try:
            values[match.group(1)] = _parse_value(match.group(2))
        except _MalformedError as error:
            problems.append(EnvProblem(number, str(error)))
    return values, problems


def _parse_value(raw: str) -> str:
    text = raw.lstrip()
    if text.startswith('"'):
        value, rest = _double_quoted(text)
    elif text.startswith("'"):
        end = text.find("'", 1)
        if end < 0:
            raise _MalformedError("the single-quoted value has no closing quote")
        value, rest = text[1:end], text[end + 1 :]
    else:
        # Searched in the raw text so that `NAME= # note` is an empty value with a
        # comment, while `NAME=a#b` keeps its `#`.
        comment = _UNQUOTED_COMMENT.search(raw)
        return (raw[: comment.start()] if comment else raw).strip()
    if not _AFTER_QUOTE.fullmatch(rest):
        raise _MalformedError("text follows the closing quote")
    return value


def _double_quoted(text: str) -> tuple[str, str]:
    out: list[str] = []
    index = 1
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            following = text[index + 1]
            out.append(_ESCAPES.get(following, "\\" + following))
            index += 2
        elif char == '"':
            return "".join(out), text[index + 1 :]
        else:
            out.append(char)
            index += 1
    raise _MalformedError("the double-quoted value has no closing quote")


# --- the store ----------------------------------------------------------------------


class _Notice(NamedTuple):
    message: str
    stamp: int
    """The file's modification time, so a file broken again after a fix warns again."""


class CredentialStore:
    """Credential lookup for one dsh home and one working directory.

    Nothing is cached: every call reads the environment and the files again, so a
    key set in another terminal or rotated in ``.env`` is used at the next request.
    """

    def __init__(
        self,
        home: Path,
        cwd: Path,
        environ: Mapping[str, str] | None = None,
        *,
        project_env: bool = True,
    ) -> None:
        self.home = home
        self.cwd = cwd
        self._environ = environ
        self.project_env = project_env
        """Whether ``<cwd>/.env`` is read: only in a folder the user trusts, since a
        cloned repository writes it (see :mod:`dsh.trust`)."""
        self._noticed: builtins.set[_Notice] = builtins.set()

    @classmethod
    def default(cls) -> CredentialStore:
        return cls(dsh_home(), Path.cwd())

    @property
    def credentials_path(self) -> Path:
        return self.home / CREDENTIALS_FILE

    def environ(self) -> Mapping[str, str]:
        # os.environ looked up at each call, not bound at construction, so a test's
        # monkeypatching or a late os.environ assignment is seen; beneath it, what
        # dsh took out of its environment at start (dsh.held_secrets).
        return held_secrets.environment() if self._environ is None else self._environ

    # --- reading ----------------------------------------------------------------

    def resolve(self, ref: str) -> Credential | None:
        """The value of ``ref`` and where it came from, or None where no layer has one.
        Raises :class:`CredentialsFileError` if ``credentials.json`` must be read and
        is malformed; malformed ``.env`` lines are skipped with a warning."""
        credential, notices = self._lookup(check_ref(ref))
        self._log(notices)
        return credential

    def describe(self, ref: str) -> CredentialStatus:
        """Whether ``ref`` is configured, from where, and whether :meth:`set` would be
        used. Never the value."""
        credential, notices = self._lookup(check_ref(ref))
        mode = self._mode_notice()
        if mode is not None and mode not in notices:
            notices.append(mode)
        return CredentialStatus(
            ref=ref,
            configured=credential is not None,
            source=credential.source if credential is not None else None,
            writable=not self._shadowed(ref),
            warnings=tuple(notice.message for notice in notices),
        )

    def _lookup(self, ref: str) -> tuple[Credential | None, list[_Notice]]:
        notices: list[_Notice] = []
        value = self.environ().get(ref)
        if value:
            return Credential(Secret(value), CredentialSource("environment")), notices
        stored = self._read_credentials(notices)
        value = stored.get(ref)
        if value:
            source = CredentialSource("credentials-file", self.credentials_path)
            return Credential(Secret(value), source), notices
        layers: tuple[tuple[SourceKind, Path], ...] = (
            *((("project-env-file", self.cwd / ENV_FILE),) if self.project_env else ()),
            ("home-env-file", self.home / ENV_FILE),
        )
        for kind, path in layers:
            value = self._read_env(path, notices).get(ref)
            if value:
                return Credential(Secret(value), CredentialSource(kind, path)), notices
        return None, notices

    def secrets(self) -> list[Secret]:
        """Every value the credential files hold (``credentials.json``, the ``.env``
        files read here): what an export must not carry. The environment's secrets are
        :mod:`dsh.held_secrets`'s to say."""
        notices: list[_Notice] = []
        values = list(self._read_credentials(notices).values())
        paths = [*((self.cwd / ENV_FILE,) if self.project_env else ()), self.home / ENV_FILE]
        for path in paths:
            values.extend(self._read_env(path, notices).values())
        return [Secret(value) for value in values if value]

    def withheld(self, ref: str) -> Path | None:
        """The project ``.env`` that holds ``ref`` but is not read (the folder is not
        trusted), for the error that says the key is missing."""
        if self.project_env:
            return None
        path = self.cwd / ENV_FILE
        return path if self._read_env(path, []).get(ref) else None

    def _shadowed(self, ref: str) -> bool:
        return bool(self.environ().get(ref))

    def _read_credentials(self, notices: list[_Notice]) -> dict[str, str]:
        path = self.credentials_path
        try:
            with open(path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                data = handle.read()
        except FileNotFoundError:
            return {}
        except OSError as error:
            raise CredentialsFileError(f"{path}: cannot be read ({error.strerror})") from None
        if stat.st_mode & 0o777 & ~PRIVATE_FILE:
            notices.append(_wide_mode_notice(path, stat.st_mode, stat.st_mtime_ns))
        return _parse_credentials(data, path)

    def _mode_notice(self) -> _Notice | None:
        path = self.credentials_path
        try:
            stat = path.stat()
        except OSError:
            return None
        if stat.st_mode & 0o777 & ~PRIVATE_FILE:
            return _wide_mode_notice(path, stat.st_mode, stat.st_mtime_ns)
        return None

    def _read_env(self, path: Path, notices: list[_Notice]) -> dict[str, str]:
        try:
            stamp = os.stat(path).st_mtime_ns
            data = read_regular_file(path)  # a pipe in a project must not hang start-up
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            # A `.env` directory is usually a Python virtualenv, not a mistake.
            return {}
        except OSError as error:
            notices.append(_Notice(f"{path}: cannot be read ({error.strerror}), ignored", 0))
            return {}
        text = _decode(data)
        if text is None:
            notices.append(_Notice(f"{path}: not UTF-8 text, ignored", stamp))
            return {}
        values, problems = parse_env(text)
        notices.extend(
            _Notice(f"{path}:{problem.line}: {problem.reason}; line skipped", stamp)
            for problem in problems
        )
        return values

    def _log(self, notices: list[_Notice]) -> None:
        # Lookups run per request; a broken line is worth one warning, not one a turn.
        for notice in notices:
            if notice not in self._noticed:
                self._noticed.add(notice)
                _log.warning("%s", notice.message)

    # --- writing ----------------------------------------------------------------

    def set(self, ref: str, value: str | Secret) -> None:
        """Store ``value`` for ``ref`` in ``credentials.json``."""
        check_ref(ref)
        secret = value if isinstance(value, Secret) else Secret(value)
        if not secret.reveal():
            raise CredentialError(
                f"an empty value for {ref} would count as absent; use unset to remove it"
            )
        self._refuse_if_shadowed(ref, "set")
        with private_lock(self.home, LOCK_FILE):
            stored = self._read_credentials([])
            stored[ref] = secret.reveal()
            self._write_credentials(stored)

    def unset(self, ref: str) -> bool:
        """Remove ``ref`` from ``credentials.json``; whether it was there."""
        check_ref(ref)
        self._refuse_if_shadowed(ref, "unset")
        if not self.credentials_path.exists():
            return False
        with private_lock(self.home, LOCK_FILE):
            stored = self._read_credentials([])
            if ref not in stored:
                return False
            del stored[ref]
            self._write_credentials(stored)
            return True

    def _refuse_if_shadowed(self, ref: str, action: str) -> None:
        if self._shadowed(ref):
            raise ShadowedCredentialError(
                f"cannot {action} {ref}: the environment variable {ref} is set in this "
                f"process and takes precedence over {self.credentials_path}, so the "
                f"change would not be used; unset the variable first"
            )

    def _write_credentials(self, stored: Mapping[str, str]) -> None:
        folder = private_dir(self.home)
        content = json.dumps(dict(sorted(stored.items())), indent=2, ensure_ascii=False)
        fd, temp = tempfile.mkstemp(dir=folder, prefix=".credentials-", suffix=".tmp")
        try:
            os.fchmod(fd, PRIVATE_FILE)  # mkstemp's 0600 already, but not by contract
            with os.fdopen(fd, "wb") as handle:
                fd = -1
                handle.write((content + "\n").encode())
                handle.flush()
                os.fsync(handle.fileno())
            # Replacing rather than rewriting in place also drops a too-wide mode.
            os.replace(temp, self.credentials_path)
        except BaseException:
            if fd != -1:
                os.close(fd)
            os.unlink(temp)
            raise
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _wide_mode_notice(path: Path, mode: int, stamp: int) -> _Notice:
    return _Notice(
        f"{path} has mode {mode & 0o777:04o}, wider than 0600, so others may read it; "
        f"run `chmod 600 {path}` (setting a credential also rewrites it 0600)",
        stamp,
    )


def _decode(data: bytes) -> str | None:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def _parse_credentials(data: bytes, path: Path) -> dict[str, str]:
    # Each failure is raised outside its `except`: a JSONDecodeError keeps the whole
    # document (`.doc`) and a UnicodeDecodeError the bytes, and a chained exception
    # would carry the file's secrets into any error report that walks the chain.
    problem: str | None = None
    raw: object = None
    text = _decode(data)
    if text is None:
        problem = "is not UTF-8 text"
    else:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as error:
            problem = f"is not valid JSON ({error.msg} at line {error.lineno} column {error.colno})"
    if problem is not None:
        raise CredentialsFileError(f"{path} {problem}; fix or remove the file")
    if not isinstance(raw, dict):
        raise CredentialsFileError(f"{path} must hold a JSON object of name → value")
    stored: dict[str, str] = {}
    for number, (name, value) in enumerate(raw.items(), start=1):
        if not _NAME.fullmatch(name):
            raise CredentialsFileError(
                f"{path}: entry {number} is not named like an environment variable "
                f"(the name is not shown, in case it is a secret)"
            )
        if not isinstance(value, str):
            raise CredentialsFileError(f"{path}: the value of {name} is not a string")
        stored[name] = value
    return stored


def origin(url: str) -> str:
    """``scheme://host:port`` of ``url``, lower-cased, the default port filled in: two
    URLs with one origin reach the same server."""
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    port = port or {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{(parts.hostname or '').lower()}:{port}"


@dataclass(frozen=True)
class KeyDestination:
    """Where a provider's key may be sent: the base URL the user's own layers (user
    settings, environment, flags) give that provider, never one a project set. A
    trusted project may point a provider elsewhere; the key does not follow it."""

    base_url: str | None
    """None: the user's own layers do not configure this provider, or name another key
    for it: the key goes nowhere."""

    def allows(self, url: str) -> bool:
        return self.base_url is not None and origin(url) == origin(self.base_url)


def key_reader(store: CredentialStore | None, ref: str) -> Callable[[], str | None]:
    """A function returning credential ``ref``'s value afresh at each call: from
    ``store`` (the ``credentials`` service) when there is one, else the environment.
    Adapters call it per request, so a key set while dsh runs is used at once. Raises
    :class:`CredentialError` when the key is only in a project ``.env`` not read."""
    check_ref(ref)

    def read() -> str | None:
        if store is None:
            return held_secrets.value_of(ref)
        found = store.resolve(ref)
        if found is None and (unread := store.withheld(ref)) is not None:
            raise CredentialError(
                f"{ref} is set only in {unread}, which dsh reads only in a folder you "
                "trust: run `dsh trust` there, or pass --trust for one run"
            )
        return found.value.reveal() if found is not None else None

    return read


CREDENTIALS: ServiceKey[CredentialStore] = ServiceKey("credentials")
"""API keys, resolved per use; values never print."""
