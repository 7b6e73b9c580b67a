"""What the file tools tell the model about a file they cannot use: a path that is
missing, a folder, a device, unreadable, or not text (an image, a binary).

The fs and lsp plugins read files the model names; both answer in these words and
codes (``FS_NOT_FOUND``, ``FS_NOT_TEXT``...), so the model hears one story whichever
tool it used.
"""

from __future__ import annotations

import errno
import os
import stat

from dsh.tools import ToolError
from dsh.tools.files import Target

SNIFF_BYTES = 8 * 1024
"""How much of a file's head decides whether it is text (a NUL there means binary)."""


def os_error(error: OSError, target: Target) -> ToolError:
    """The model's version of an OS failure, with what it can do about it."""
    where = target.display
    if isinstance(error, FileNotFoundError):
        return ToolError(
            f"{where} does not exist. Check the path (glob finds files by name).", "FS_NOT_FOUND"
        )
    if isinstance(error, NotADirectoryError) or error.errno == errno.EEXIST:
        return ToolError(
            f"a parent of {where} is a file, not a directory; choose another path.",
            "FS_NOT_DIRECTORY",
        )
    if isinstance(error, IsADirectoryError):
        return ToolError(
            f"{where} is a directory, not a file; use glob to list its files.",
            "FS_NOT_REGULAR_FILE",
        )
    if isinstance(error, PermissionError):
        return ToolError(
            f"permission denied for {where}; it cannot be accessed by this user.",
            "FS_PERMISSION_DENIED",
        )
    reason = error.strerror or str(error)
    return ToolError(f"cannot access {where}: {reason}.", "FS_IO_ERROR")


# Signatures of the image formats a model is most often pointed at, so it hears
# "a PNG image" rather than "binary". BMP's two-byte tag is too weak alone; it counts
# only together with a NUL, which every real BMP header has.
_SIGNATURES: tuple[tuple[int, bytes, str], ...] = (
    (0, b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (0, b"\xff\xd8\xff", "a JPEG image"),
    (0, b"GIF87a", "a GIF image"),
    (0, b"GIF89a", "a GIF image"),
    (0, b"II*\x00", "a TIFF image"),
    (0, b"MM\x00*", "a TIFF image"),
    (0, b"\x00\x00\x01\x00", "an ICO image"),
    (4, b"ftypavif", "an AVIF image"),
    (4, b"ftypheic", "a HEIC image"),
    (0, b"%PDF-", "a PDF document"),
)


def sniff(head: bytes) -> str | None:
    """What a file is when it is not text (``"a PNG image"``, ``"a binary file"``), or None."""
    for offset, signature, kind in _SIGNATURES:
        if head[offset : offset + len(signature)] == signature:
            return kind
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "a WebP image"
    if b"\x00" in head[:SNIFF_BYTES]:
        return "a BMP image" if head[:2] == b"BM" else "a binary file"
    return None


def not_text(target: Target, kind: str, size: int) -> ToolError:
    return ToolError(
        f"{target.display} is {kind} ({format_size(size)}), not text; these tools read and "
        "edit text files only.",
        "FS_NOT_TEXT",
    )


def format_size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


def require_regular(status: os.stat_result, target: Target) -> None:
    if stat.S_ISDIR(status.st_mode):
        raise ToolError(
            f"{target.display} is a directory, not a file; use glob to list its files.",
            "FS_NOT_REGULAR_FILE",
        )
    if not stat.S_ISREG(status.st_mode):
        raise ToolError(
            f"{target.display} is not a regular file (a device, socket or pipe); "
            "only regular files can be read or changed.",
            "FS_NOT_REGULAR_FILE",
        )
