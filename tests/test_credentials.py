"""The credential seam, on real files: layers, .env parsing, the stored file, redaction.

Every value is a canary, so any test can assert it never leaked into what a caller,
a log or an error sees.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import os
import pickle
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from dsh.credentials import (
    Credential,
    CredentialError,
    CredentialRef,
    CredentialsFileError,
    CredentialSource,
    CredentialStore,
    InvalidCredentialRefError,
    Secret,
    ShadowedCredentialError,
    check_ref,
    key_reader,
    parse_env,
    redact,
)

CANARY = "sk-canary-7f3e9a"
NAME = "DEEPSEEK_API_KEY"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "state" / "dsh"  # missing, with a missing parent


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def store(home: Path, cwd: Path, environ: dict[str, str] | None = None) -> CredentialStore:
    return CredentialStore(home, cwd, {} if environ is None else environ)


def write_credentials(home: Path, content: str, mode: int = 0o600) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "credentials.json"
    path.write_text(content)
    path.chmod(mode)
    return path


def resolved(credentials: CredentialStore, name: str = NAME) -> Credential:
    found = credentials.resolve(name)
    assert found is not None, f"{name} did not resolve"
    return found


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def shown(*objects: object) -> str:
    """Every way an object is commonly turned into text."""
    parts = []
    for item in objects:
        parts += [repr(item), str(item), f"{item}", format(item, "")]
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            parts.append(repr(dataclasses.asdict(item)))
    return "\n".join(parts)


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)
    yield caplog
    everything = caplog.text + "".join(str(record.args) for record in caplog.records)
    assert CANARY not in everything


# --- Secret -------------------------------------------------------------------------


def test_a_secret_never_shows_its_value() -> None:
    secret = Secret(CANARY)
    assert secret.reveal() == CANARY
    assert repr(secret) == "Secret('********')"
    assert str(secret) == "********"
    assert CANARY not in shown(secret)
    assert CANARY not in repr([secret]) + repr({"key": secret})


def test_secrets_compare_by_value_and_copy_but_do_not_pickle() -> None:
    assert Secret(CANARY) == Secret(CANARY)
    assert Secret(CANARY) != Secret("other")
    assert Secret(CANARY) != CANARY
    assert len({Secret(CANARY), Secret(CANARY)}) == 1
    assert copy.deepcopy(Secret(CANARY)).reveal() == CANARY
    with pytest.raises(TypeError):
        pickle.dumps(Secret(CANARY))


# --- names --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["DEEPSEEK_API_KEY", "_X", "A", "KEY_2"])
def test_valid_names(name: str) -> None:
    assert check_ref(name) == name


@pytest.mark.parametrize("name", ["", "lower", "Mixed_Case", "1KEY", "A-B", "A B", " A", CANARY])
def test_invalid_names_are_refused_without_echoing_them(home: Path, cwd: Path, name: str) -> None:
    credentials = store(home, cwd)
    for call in (
        lambda: credentials.resolve(name),
        lambda: credentials.describe(name),
        lambda: credentials.set(name, "value"),
        lambda: credentials.unset(name),
    ):
        with pytest.raises(
            InvalidCredentialRefError, match="name of an environment variable"
        ) as info:
            call()
        assert CANARY not in str(info.value)
    assert not home.exists()


def test_credential_ref_validates_as_a_pydantic_field() -> None:
    class Config(BaseModel):
        api_key: CredentialRef

    assert Config(api_key=NAME).api_key == NAME
    with pytest.raises(ValidationError, match="name of an environment variable"):
        Config(api_key="not a name")


# --- layers -------------------------------------------------------------------------


def test_nothing_configured(home: Path, cwd: Path) -> None:
    credentials = store(home, cwd)
    assert credentials.resolve(NAME) is None
    status = credentials.describe(NAME)
    assert (status.configured, status.source, status.writable) == (False, None, True)
    assert status.to_dict() == {"ref": NAME, "configured": False, "writable": True}


def test_environment_layer(home: Path, cwd: Path) -> None:
    found = store(home, cwd, {NAME: CANARY}).resolve(NAME)
    assert found == Credential(Secret(CANARY), CredentialSource("environment"))


def test_credentials_file_layer(home: Path, cwd: Path) -> None:
    path = write_credentials(home, json.dumps({NAME: CANARY}))
    found = store(home, cwd).resolve(NAME)
    assert found == Credential(Secret(CANARY), CredentialSource("credentials-file", path))


def test_project_env_file_layer(home: Path, cwd: Path) -> None:
    (cwd / ".env").write_text(f"{NAME}={CANARY}\n")
    found = store(home, cwd).resolve(NAME)
    assert found == Credential(Secret(CANARY), CredentialSource("project-env-file", cwd / ".env"))


def test_home_env_file_layer(home: Path, cwd: Path) -> None:
    home.mkdir(parents=True)
    (home / ".env").write_text(f"{NAME}={CANARY}\n")
    found = store(home, cwd).resolve(NAME)
    assert found == Credential(Secret(CANARY), CredentialSource("home-env-file", home / ".env"))


def test_the_first_layer_with_a_value_wins(home: Path, cwd: Path) -> None:
    environ = {NAME: "from-environment"}
    credentials = store(home, cwd, environ)
    credentials_file = write_credentials(home, json.dumps({NAME: "from-credentials-file"}))
    (cwd / ".env").write_text(f"{NAME}=from-project-env\n")
    (home / ".env").write_text(f"{NAME}=from-home-env\n")
    expected = [
        ("environment", "from-environment"),
        ("credentials-file", "from-credentials-file"),
        ("project-env-file", "from-project-env"),
        ("home-env-file", "from-home-env"),
    ]
    removals = [
        lambda: environ.clear(),
        lambda: credentials_file.unlink(),
        lambda: (cwd / ".env").unlink(),
        lambda: (home / ".env").unlink(),
    ]
    for (kind, value), remove in zip(expected, removals, strict=True):
        found = credentials.resolve(NAME)
        assert found is not None
        assert (found.source.kind, found.value.reveal()) == (kind, value)
        remove()
    assert credentials.resolve(NAME) is None


def test_an_empty_value_counts_as_absent_in_every_layer(home: Path, cwd: Path) -> None:
    write_credentials(home, json.dumps({NAME: ""}))
    (cwd / ".env").write_text(f"{NAME}=\n")
    (home / ".env").write_text(f'{NAME}=""\n')
    credentials = store(home, cwd, {NAME: ""})
    assert credentials.resolve(NAME) is None
    assert not credentials.describe(NAME).configured
    (home / ".env").write_text(f"{NAME}={CANARY}\n")
    found = credentials.resolve(NAME)
    assert found is not None
    assert found.source.kind == "home-env-file"


def test_each_resolve_reads_afresh(home: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NAME, raising=False)
    credentials = CredentialStore(home, cwd)  # the real os.environ
    assert credentials.resolve(NAME) is None
    monkeypatch.setenv(NAME, CANARY)
    found = credentials.resolve(NAME)
    assert found is not None
    assert found.source.kind == "environment"
    monkeypatch.delenv(NAME)
    (cwd / ".env").write_text(f"{NAME}=first\n")
    assert resolved(credentials).value.reveal() == "first"
    (cwd / ".env").write_text(f"{NAME}=second\n")
    assert resolved(credentials).value.reveal() == "second"


def test_a_dot_env_directory_is_ignored(
    home: Path, cwd: Path, logs: pytest.LogCaptureFixture
) -> None:
    (cwd / ".env" / "bin").mkdir(parents=True)  # a virtualenv named .env
    assert store(home, cwd).resolve(NAME) is None
    assert not logs.records


def test_describe_never_shows_the_value(home: Path, cwd: Path) -> None:
    setups = [
        lambda: store(home, cwd, {NAME: CANARY}),
        lambda: (write_credentials(home, json.dumps({NAME: CANARY})), store(home, cwd))[1],
        lambda: ((cwd / ".env").write_text(f"{NAME}={CANARY}"), store(home, cwd))[1],
        lambda: ((home / ".env").write_text(f"{NAME}={CANARY}"), store(home, cwd))[1],
    ]
    kinds = ["environment", "credentials-file", "project-env-file", "home-env-file"]
    for setup, kind in zip(setups, kinds, strict=True):
        for path in (home / "credentials.json", cwd / ".env", home / ".env"):
            path.unlink(missing_ok=True)
        credentials = setup()
        status = credentials.describe(NAME)
        assert status.configured
        assert status.source is not None
        assert status.source.kind == kind
        found = credentials.resolve(NAME)
        assert found is not None
        assert found.value.reveal() == CANARY
        assert CANARY not in shown(status, status.source, found, found.source, found.value)
        assert CANARY not in json.dumps(status.to_dict())


def test_describe_reports_where_and_whether_writable(home: Path, cwd: Path) -> None:
    path = write_credentials(home, json.dumps({NAME: CANARY}))
    status = store(home, cwd).describe(NAME)
    assert status.to_dict() == {
        "ref": NAME,
        "configured": True,
        "source": "credentials-file",
        "path": str(path),
        "writable": True,
    }
    shadowed = store(home, cwd, {NAME: "x"}).describe(NAME)
    assert shadowed.to_dict() == {
        "ref": NAME,
        "configured": True,
        "source": "environment",
        "writable": False,
    }


# --- set and unset ------------------------------------------------------------------


def test_set_and_unset_round_trip(home: Path, cwd: Path) -> None:
    credentials = store(home, cwd)
    credentials.set(NAME, CANARY)
    credentials.set("OTHER_KEY", Secret("other-value"))
    path = home / "credentials.json"
    assert mode_of(path) == 0o600
    assert mode_of(home) == 0o700
    assert mode_of(home.parent) == 0o700
    assert json.loads(path.read_text()) == {NAME: CANARY, "OTHER_KEY": "other-value"}
    found = credentials.resolve(NAME)
    assert found == Credential(Secret(CANARY), CredentialSource("credentials-file", path))

    credentials.set(NAME, "rotated")
    assert resolved(credentials).value.reveal() == "rotated"

    assert credentials.unset(NAME) is True
    assert credentials.unset(NAME) is False
    assert credentials.resolve(NAME) is None
    assert json.loads(path.read_text()) == {"OTHER_KEY": "other-value"}
    assert mode_of(path) == 0o600
    assert not [p for p in home.iterdir() if p.name.endswith(".tmp")]


def test_set_is_private_whatever_the_umask(home: Path, cwd: Path) -> None:
    previous = os.umask(0)
    try:
        store(home, cwd).set(NAME, CANARY)
    finally:
        os.umask(previous)
    assert mode_of(home / "credentials.json") == 0o600
    assert mode_of(home) == 0o700


def test_unset_without_a_file_writes_nothing(home: Path, cwd: Path) -> None:
    assert store(home, cwd).unset(NAME) is False
    assert not home.exists()


def test_set_refuses_an_empty_value(home: Path, cwd: Path) -> None:
    with pytest.raises(CredentialError, match="empty"):
        store(home, cwd).set(NAME, "")
    assert not home.exists()


def test_writes_are_refused_while_the_environment_shadows_the_name(home: Path, cwd: Path) -> None:
    path = write_credentials(home, json.dumps({NAME: "stored"}))
    before = path.read_bytes()
    credentials = store(home, cwd, {NAME: CANARY})
    with pytest.raises(ShadowedCredentialError, match=f"environment variable {NAME}") as info:
        credentials.set(NAME, "new-value")
    assert CANARY not in str(info.value)
    assert "new-value" not in str(info.value)
    with pytest.raises(ShadowedCredentialError):
        credentials.unset(NAME)
    assert path.read_bytes() == before
    assert not credentials.describe(NAME).writable


def test_an_empty_environment_value_does_not_shadow(home: Path, cwd: Path) -> None:
    credentials = store(home, cwd, {NAME: ""})
    assert credentials.describe(NAME).writable
    credentials.set(NAME, CANARY)
    assert resolved(credentials).source.kind == "credentials-file"


def test_a_wide_credentials_file_is_read_with_a_warning_and_rewritten_private(
    home: Path, cwd: Path, logs: pytest.LogCaptureFixture
) -> None:
    path = write_credentials(home, json.dumps({NAME: CANARY}), mode=0o644)
    credentials = store(home, cwd)
    assert resolved(credentials).value.reveal() == CANARY
    status = credentials.describe(NAME)
    assert len(status.warnings) == 1
    assert "0644" in status.warnings[0]
    assert str(path) in status.warnings[0]
    assert "0644" in logs.text
    # Also when the environment wins and the file is not otherwise read.
    assert store(home, cwd, {NAME: "x"}).describe(NAME).warnings == status.warnings

    credentials.set("OTHER_KEY", "other-value")
    assert mode_of(path) == 0o600
    assert credentials.describe(NAME).warnings == ()
    assert resolved(credentials).value.reveal() == CANARY


def test_concurrent_sets_keep_every_name(home: Path, cwd: Path) -> None:
    names = [f"KEY_{index}" for index in range(16)]
    threads = [
        threading.Thread(target=store(home, cwd).set, args=(name, f"value-{name}"))
        for name in names
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stored = json.loads((home / "credentials.json").read_text())
    assert stored == {name: f"value-{name}" for name in names}


# --- a malformed credentials.json ---------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (f'{{"{NAME}": "{CANARY}"', "not valid JSON"),
        (f'{{"{NAME}": {CANARY}}}', "not valid JSON"),
        (f'["{CANARY}"]', "JSON object"),
        (f'{{"{NAME}": ["{CANARY}"]}}', f"value of {NAME} is not a string"),
        (f'{{"{CANARY}": "x"}}', "entry 1 is not named"),
        ("", "not valid JSON"),
    ],
)
def test_a_malformed_credentials_file_is_an_error_naming_it_not_its_content(
    home: Path, cwd: Path, content: str, message: str
) -> None:
    path = write_credentials(home, content)
    credentials = store(home, cwd)
    for call in (
        lambda: credentials.resolve(NAME),
        lambda: credentials.describe(NAME),
        lambda: credentials.set(NAME, "new-value"),
        lambda: credentials.unset(NAME),
    ):
        with pytest.raises(CredentialsFileError, match=message) as info:
            call()
        assert str(path) in str(info.value)
        assert CANARY not in str(info.value)
        # Nor anywhere in what a traceback or error reporter could walk.
        assert info.value.__cause__ is None
        assert info.value.__context__ is None
    assert path.read_text() == content  # never overwritten


def test_a_credentials_file_that_is_not_utf8(home: Path, cwd: Path) -> None:
    home.mkdir(parents=True)
    (home / "credentials.json").write_bytes(b'{"KEY": "\xff\xfe' + CANARY.encode() + b'"}')
    with pytest.raises(CredentialsFileError, match="not UTF-8") as info:
        store(home, cwd).resolve(NAME)
    assert CANARY not in str(info.value)


def test_the_environment_wins_without_reading_a_malformed_file(home: Path, cwd: Path) -> None:
    write_credentials(home, "{not json")
    found = store(home, cwd, {NAME: CANARY}).resolve(NAME)
    assert found is not None
    assert found.source.kind == "environment"


# --- .env parsing -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ("KEY=plain", "plain"),
        ("KEY=  padded  ", "padded"),
        ("KEY = spaced", "spaced"),
        ("export KEY=exported", "exported"),
        ("  export   KEY=indented", "indented"),
        ("KEY=with spaces inside", "with spaces inside"),
        ("KEY=value # a comment", "value"),
        ("KEY=value\t# a tab comment", "value"),
        ("KEY=value#not-a-comment", "value#not-a-comment"),
        ("KEY=#starts-with-hash", "#starts-with-hash"),
        ("KEY= # only a comment", ""),
        ("KEY=", ""),
        ('KEY="double quoted"', "double quoted"),
        ('KEY="a\\nb"', "a\nb"),
        ('KEY="say \\"hi\\""', 'say "hi"'),
        ('KEY="back\\\\slash"', "back\\slash"),
        ('KEY="keep \\t unknown"', "keep \\t unknown"),
        ('KEY="# not a comment"', "# not a comment"),
        ('KEY="quoted" # a comment', "quoted"),
        ('KEY=""', ""),
        ("KEY='single quoted'", "single quoted"),
        ("KEY='no \\n escapes'", "no \\n escapes"),
        ("KEY='has \"double\" inside'", 'has "double" inside'),
        ("KEY='single' # a comment", "single"),
        ("KEY=unquoted'quote", "unquoted'quote"),
        ("KEY=a=b=c", "a=b=c"),
        ("KEY=crlf\r", "crlf"),
        ("key_lower=allowed in files", "allowed in files"),
    ],
)
def test_env_values(line: str, value: str) -> None:
    values, problems = parse_env(line + "\n")
    assert problems == []
    assert list(values.values()) == [value]


def test_env_file_structure() -> None:
    text = "\n".join(
        [
            "# a comment",
            "   # an indented comment",
            "",
            "   ",
            "FIRST=1",
            "SECOND=2",
            "FIRST=3",
        ]
    )
    values, problems = parse_env(text)
    assert problems == []
    assert values == {"FIRST": "3", "SECOND": "2"}  # the last assignment wins, as in sh


def test_env_file_with_bom_and_crlf(home: Path, cwd: Path) -> None:
    (cwd / ".env").write_bytes(b"\xef\xbb\xbf" + f"{NAME}={CANARY}\r\nOTHER=x\r\n".encode())
    found = store(home, cwd).resolve(NAME)
    assert found is not None
    assert found.value.reveal() == CANARY


MALFORMED = [
    CANARY,  # a bare value, no name
    f"export {CANARY}",
    f"1BAD={CANARY}",
    f"BAD-NAME={CANARY}",
    f'UNCLOSED="{CANARY}',
    f"UNCLOSED_SINGLE='{CANARY}",
    f'TRAILING="{CANARY}" junk',
    f'ESCAPED_END="{CANARY}\\"',
]


def test_malformed_env_lines_are_skipped_with_a_warning_naming_only_file_and_line(
    home: Path, cwd: Path, logs: pytest.LogCaptureFixture
) -> None:
    lines = ["# header", *MALFORMED, f"{NAME}=good-value"]
    path = cwd / ".env"
    path.write_text("\n".join(lines) + "\n")
    found = store(home, cwd).resolve(NAME)
    assert found is not None
    assert found.value.reveal() == "good-value"
    warned = [record.getMessage() for record in logs.records if record.levelno == logging.WARNING]
    assert [message.split(": ")[0] for message in warned] == [
        f"{path}:{number}" for number in range(2, 2 + len(MALFORMED))
    ]
    assert all("skipped" in message for message in warned)
    assert all(record.name == "dsh.credentials" for record in logs.records)


def test_malformed_lines_are_reported_by_describe_and_warned_once(
    home: Path, cwd: Path, logs: pytest.LogCaptureFixture
) -> None:
    (cwd / ".env").write_text(f"{CANARY}\n")
    credentials = store(home, cwd)
    assert credentials.resolve(NAME) is None
    assert credentials.resolve(NAME) is None
    assert len(logs.records) == 1
    status = credentials.describe(NAME)
    assert status.warnings == (f"{cwd / '.env'}:1: not a NAME=VALUE line; line skipped",)
    assert CANARY not in shown(status)


def test_an_env_file_that_is_not_utf8_is_skipped_with_a_warning(
    home: Path, cwd: Path, logs: pytest.LogCaptureFixture
) -> None:
    (cwd / ".env").write_bytes(f"{NAME}={CANARY}\xff".encode("latin-1"))
    home.mkdir(parents=True)
    (home / ".env").write_text(f"{NAME}=from-home\n")
    found = store(home, cwd).resolve(NAME)
    assert found is not None
    assert found.source.kind == "home-env-file"
    assert "not UTF-8" in logs.text


# --- redact -------------------------------------------------------------------------


def test_redact_replaces_every_occurrence() -> None:
    text = f"401: key {CANARY} rejected (key={CANARY})"
    assert redact(text, Secret(CANARY)) == "401: key *** rejected (key=***)"


def test_redact_handles_several_secrets_longest_first() -> None:
    outer, inner = Secret(CANARY), Secret("canary")
    assert redact(f"{CANARY} and canary", inner, outer) == "*** and ***"
    assert redact("a-secret b-secret", Secret("a-secret"), Secret("b-secret")) == "*** ***"


def test_redact_leaves_short_values_and_text_without_secrets() -> None:
    assert redact("abc abcd", Secret("abc")) == "abc abcd"
    assert redact("abc abcd", Secret("abcd")) == "abc ***"
    assert redact("nothing here", Secret(CANARY)) == "nothing here"
    assert redact("no secrets given") == "no secrets given"
    assert redact("empty", Secret("")) == "empty"


def test_a_project_env_file_is_read_only_when_the_project_is_trusted(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text("DEEPSEEK_API_KEY=sk-from-the-repo\n")
    trusted = CredentialStore(home, project, environ={})
    assert trusted.resolve("DEEPSEEK_API_KEY") is not None
    assert trusted.withheld("DEEPSEEK_API_KEY") is None
    untrusted = CredentialStore(home, project, environ={}, project_env=False)
    assert untrusted.resolve("DEEPSEEK_API_KEY") is None
    assert untrusted.withheld("DEEPSEEK_API_KEY") == project / ".env"
    assert untrusted.withheld("OTHER_KEY") is None
    with pytest.raises(CredentialError, match=r"reads only in a folder you trust") as raised:
        key_reader(untrusted, "DEEPSEEK_API_KEY")()
    assert "sk-from-the-repo" not in str(raised.value)
    assert key_reader(untrusted, "OTHER_KEY")() is None
