"""Files through the ``workspace-files`` service when a front end stands in for the
disk (an editor under ``dsh acp``: its unsaved text is read, and changes land in it).

The disk stays the tools' own otherwise, with everything a text cannot carry
(versions from the inode, modes, streaming, binary content). Through a stand-in, a
file's version is its text's digest, and what the model read is kept (see
:mod:`dsh_plugins.fs.observed`) so ``describe`` plans a change from it without asking the
stand-in anything: every check on a call comes before the first request it sends.
A file the disk holds as something other than text (an image, a folder) is read
from the disk as before.
"""

from __future__ import annotations

import hashlib
import os
import stat

from dsh.services import WORKSPACE_FILES
from dsh.tools import ToolContext
from dsh.tools.files import Target, WorkspaceFiles
from dsh_plugins._shared.files import SNIFF_BYTES, sniff
from dsh_plugins.fs.files import Current


def stand_in(context: ToolContext) -> WorkspaceFiles | None:
    """What holds the text of files for the calling agent, when it is not the disk."""
    if context.services is None:
        return None
    files = context.services.get(WORKSPACE_FILES, None)
    return None if files is None or files.on_disk else files


def text_version(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()
    return f"text:{digest}"


def as_current(text: str) -> Current:
    """A text as the change planners take a file."""
    data = text.encode("utf-8", errors="surrogatepass")
    return Current(version=text_version(text), mode=0, size=len(data), data=data)


def text_or_missing(target: Target) -> bool:
    """Whether the disk has a regular file of text at ``target``, or nothing: what a
    stand-in is asked for. Anything else is the disk's to report. Blocking."""
    try:
        fd = os.open(target.real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return sniff(os.read(fd, SNIFF_BYTES)) is None
    except OSError:
        return False
    finally:
        os.close(fd)
