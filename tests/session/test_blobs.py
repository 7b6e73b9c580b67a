"""Blobs beside a session's log: stored once by digest, private, never half-written,
and a damaged or foreign name is as good as missing."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from dsh.session import Blobs
from dsh.session.blobs import digest_of


def test_the_same_bytes_are_stored_once_under_their_digest(tmp_path: Path) -> None:
    blobs = Blobs(tmp_path / "blobs")
    first = blobs.put(b"picture")
    second = blobs.put(b"picture")
    assert first == second == digest_of(b"picture")
    assert [p.name for p in blobs.folder.iterdir()] == [first]
    assert blobs.get(first) == b"picture"
    assert stat.S_IMODE(blobs.path(first).stat().st_mode) == 0o600
    assert stat.S_IMODE(blobs.folder.stat().st_mode) == 0o700


def test_a_damaged_blob_reads_as_missing(tmp_path: Path) -> None:
    blobs = Blobs(tmp_path / "blobs")
    digest = blobs.put(b"picture")
    blobs.path(digest).write_bytes(b"tampered")
    assert blobs.get(digest) is None
    assert blobs.get("0" * 64) is None


def test_a_name_that_is_not_a_digest_never_becomes_a_path(tmp_path: Path) -> None:
    blobs = Blobs(tmp_path / "blobs")
    (tmp_path / "secret").write_bytes(b"do not read")
    assert blobs.get("../secret") is None
    with pytest.raises(ValueError, match="not a blob digest"):
        blobs.path("../secret")
