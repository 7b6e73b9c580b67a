"""``read_regular_file``: what a path from outside may be, read without hanging."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from dsh.regular_files import FileTooLarge, NotRegularFile, read_regular_file


def test_a_regular_file_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"hello\x00world")
    assert read_regular_file(path) == b"hello\x00world"
    assert read_regular_file(path, 11) == b"hello\x00world"


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    with pytest.raises(NotRegularFile, match="not a regular file"):
        read_regular_file(path)


def test_a_socket_and_a_device_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        with pytest.raises(OSError, match="No such device"):  # a socket cannot be opened
            read_regular_file(path)
    with pytest.raises(NotRegularFile):
        read_regular_file(Path("/dev/zero"))


def test_a_folder_is_refused_as_open_refuses_it(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        read_regular_file(tmp_path)


def test_a_file_over_the_limit_is_refused_with_its_size(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 100)
    with pytest.raises(FileTooLarge) as raised:
        read_regular_file(path, 99)
    assert (raised.value.size, raised.value.max_bytes) == (100, 99)


def test_a_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_regular_file(tmp_path / "none")
