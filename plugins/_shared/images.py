"""Images in a conversation: the ``image`` content block, and reading, checking,
scaling and storing image files for it.

The block holds what identifies the image (the sha256 digest its bytes are stored
under beside the session's log, :mod:`dsh.session.blobs`), its media type, a name to
show, its size and dimensions; never the bytes. Just before a request the images
plugin loads each block's bytes from the session's blobs (in a thread) into
:attr:`ImageBlock.data`, a field that is never written to the log; an adapter turns a
loaded block into its wire form (:func:`data_url`), and one it cannot load into a
placeholder text (:func:`placeholder`).

Formats are told by their first bytes, never by the name: JPEG, PNG, GIF and WebP,
what DeepSeek and OpenAI-compatible vision models take. An image is sent at most
:data:`MAX_SIDE` pixels on its long side and :data:`MAX_IMAGE_BYTES` in size (as
Claude Code and Codex do: larger images cost tokens without helping the model, and
DeepSeek caps a whole request at 48 MiB); a larger one is scaled down, and a file over
:data:`MAX_FILE_BYTES` is refused without being decoded.

A library plugins import (see :mod:`dsh_plugins._shared`); the ``images`` plugin registers
the block type, so without it an image block loads as an unknown block and is skipped.
"""

from __future__ import annotations

import asyncio
import base64
import io
import os
import stat
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

from pydantic import Field

from dsh.llm import (
    Block,
    Message,
    Source,
    TextBlock,
    ToolResultBlock,
    UserMessage,
    UserSource,
    content_blocks,
)
from dsh.services import SESSIONS
from dsh.session import Blobs, EventType
from dsh.wire import Frozen

if TYPE_CHECKING:
    from dsh.agent import AgentHandle

MAX_SIDE = 2048
"""Pixels on an image's long side, at most; a larger image is scaled down."""
MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""Bytes of one image as sent, at most (before base64)."""
MAX_FILE_BYTES = 50 * 1024 * 1024
"""An image file larger than this is refused unread."""
MAX_PIXELS = 100_000_000
"""Decoded pixels, at most: a small file that would decode to gigabytes is refused."""

MediaType = Literal["image/png", "image/jpeg", "image/gif", "image/webp"]
FORMATS = "JPEG, PNG, GIF or WebP"


class ImageBlock(Block):
    """An image in a message or a tool result."""

    type: Literal["image"] = "image"
    media_types: ClassVar[tuple[str, ...]] = get_args(MediaType)
    digest: str
    """sha256 of the bytes, the name they are stored under in the session's blobs."""
    media_type: str
    name: str
    """What to call it: the file's name as the user gave it, ``clipboard.png``..."""
    size: int
    """Bytes, as stored (after any scaling)."""
    width: int | None = None
    height: int | None = None
    data: bytes | None = Field(default=None, exclude=True, repr=False)
    """The bytes, loaded for one request; never stored in the log."""


class ImageError(ValueError):
    """An image that cannot be attached, with the reason in words for the user."""


def media_type(head: bytes) -> MediaType | None:
    """The image format the first bytes say, or None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def format_size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def label(block: ImageBlock) -> str:
    """``[image shot.png 1280x720 84 KB]``: how a transcript shows an image."""
    dims = f" {block.width}x{block.height}" if block.width and block.height else ""
    return f"[image {block.name}{dims} {format_size(block.size)}]"


@dataclass(frozen=True)
class Prepared:
    data: bytes
    media_type: MediaType
    width: int
    height: int
    scaled: bool


_PIL_FORMATS: dict[str, MediaType] = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "GIF": "image/gif",
    "WEBP": "image/webp",
}


def prepare(data: bytes, name: str) -> Prepared:
    """Check ``data`` is an image in a format models take and fit it within the limits.
    Blocking (it decodes the image). Raises :class:`ImageError` saying why not."""
    kind = media_type(data[:16])
    if kind is None:
        raise ImageError(f"{name} is not a {FORMATS} image (judged by its content)")
    if kind == "image/png":
        data = _without_damaged_ancillary_chunks(data, name)
    from PIL import Image

    try:
        with warnings.catch_warnings():
            # Pillow warns past its own limit; dsh refuses past MAX_PIXELS itself.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            opened = Image.open(io.BytesIO(data))
        with opened as image:
            if _PIL_FORMATS.get(image.format or "") != kind:
                raise ImageError(f"{name} is not a {FORMATS} image (judged by its content)")
            width, height = image.size
            if width * height > MAX_PIXELS:  # from the header, before anything is decoded
                raise ImageError(f"{name} is too large to decode ({width}x{height} pixels)")
            image.load()  # a truncated or damaged file fails here, not at the model
            if max(width, height) <= MAX_SIDE and len(data) <= MAX_IMAGE_BYTES:
                return Prepared(data, kind, width, height, scaled=False)
            return _scaled(image, kind, name)
    except ImageError:
        raise
    except Image.DecompressionBombError:
        raise ImageError(f"{name} is too large to decode (over {MAX_PIXELS:,} pixels)") from None
    except (OSError, ValueError, SyntaxError) as error:
        raise ImageError(f"{name} cannot be decoded as an image ({error})") from None


def _without_damaged_ancillary_chunks(data: bytes, name: str) -> bytes:
    """The PNG without the ancillary chunks (text, colour profile...) whose checksum is
    wrong, which viewers skip and Pillow refuses the whole image for; a damaged critical
    chunk (header, palette, pixels) is refused, since no viewer would show it. Unsound
    framing is left for the decoder to report."""
    kept = [data[:8]]
    at, dropped = 8, False
    while at + 12 <= len(data):
        length = int.from_bytes(data[at : at + 4], "big")
        end = at + 12 + length
        if end > len(data):
            return data
        kind = data[at + 4 : at + 8]
        if zlib.crc32(data[at + 4 : end - 4]) != int.from_bytes(data[end - 4 : end], "big"):
            if kind[0] & 0x20:  # a lower-case first letter: an ancillary chunk
                dropped, at = True, end
                continue
            label = kind.decode("ascii") if kind.isalpha() else kind.hex()
            raise ImageError(f"{name} is a damaged PNG: its {label} chunk fails its checksum")
        kept.append(data[at:end])
        at = end
        if kind == b"IEND":
            break
    return b"".join(kept) if dropped else data


def _scaled(image: Any, kind: MediaType, name: str) -> Prepared:
    from PIL import Image

    frame = image.copy()  # an animated GIF or WebP: its first frame
    frame.thumbnail((MAX_SIDE, MAX_SIDE), Image.Resampling.LANCZOS)
    opaque = frame.mode not in ("RGBA", "LA", "P") and kind != "image/png"
    # A photo compresses far better as JPEG; one with transparency keeps it as PNG.
    attempts: list[tuple[str, MediaType, dict[str, Any]]] = (
        [("JPEG", "image/jpeg", {"quality": 85})]
        if opaque
        else [("PNG", "image/png", {"optimize": True})]
    )
    attempts.append(("JPEG", "image/jpeg", {"quality": 70}))
    for format_, out_kind, options in attempts:
        converted = frame if format_ == "PNG" or frame.mode == "RGB" else frame.convert("RGB")
        buffer = io.BytesIO()
        converted.save(buffer, format_, **options)
        if buffer.tell() <= MAX_IMAGE_BYTES:
            width, height = frame.size
            return Prepared(buffer.getvalue(), out_kind, width, height, scaled=True)
    raise ImageError(
        f"{name} is still over {format_size(MAX_IMAGE_BYTES)} scaled down to "
        f"{MAX_SIDE} pixels, so it is not attached"
    )


def read_image_file(path: Path, name: str) -> Prepared:
    """Read and prepare the image at ``path`` (a regular file, no larger than
    :data:`MAX_FILE_BYTES`). Blocking. Raises :class:`ImageError`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise ImageError(f"{name} cannot be read ({error.strerror or error})") from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise ImageError(f"{name} is not a regular file")
        if status.st_size > MAX_FILE_BYTES:
            raise ImageError(
                f"{name} is {format_size(status.st_size)}, over the "
                f"{format_size(MAX_FILE_BYTES)} limit for an image file"
            )
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise ImageError(f"{name} cannot be read ({error.strerror or error})") from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise ImageError(f"{name} grew past {format_size(MAX_FILE_BYTES)} while it was read")
    return prepare(data, name)


def looks_like_image(path: Path) -> bool:
    """Whether a file's first bytes say it is an image a model could take. Blocking."""
    try:
        # Not a plain open: a named pipe would wait for a writer forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return media_type(os.read(fd, 16)) is not None
    except OSError:
        return False
    finally:
        os.close(fd)


def block(prepared: Prepared, digest: str, name: str) -> ImageBlock:
    return ImageBlock(
        digest=digest,
        media_type=prepared.media_type,
        name=name,
        size=len(prepared.data),
        width=prepared.width,
        height=prepared.height,
    )


def data_url(block: ImageBlock) -> str | None:
    """The ``data:`` URL of a loaded block; None when its bytes were not loaded."""
    if block.data is None:
        return None
    return f"data:{block.media_type};base64,{base64.b64encode(block.data).decode('ascii')}"


def placeholder(block: ImageBlock, *, vision: bool) -> str:
    """The text sent instead of an image the request cannot carry."""
    if not vision:
        return f"[image {block.name}: not shown, this model does not take images]"
    return f"[image {block.name}: its stored copy is missing, so it cannot be shown]"


def images_in(message: Message) -> list[ImageBlock]:
    """Every image block of a message, those inside tool results included."""
    found: list[ImageBlock] = []
    for item in message.content:
        if isinstance(item, ImageBlock):
            found.append(item)
        elif isinstance(item, ToolResultBlock):
            found.extend(b for b in item.content if isinstance(b, ImageBlock))
    return found


def with_images(message: Message, load: Callable[[ImageBlock], ImageBlock]) -> Message:
    """``message`` with each image block replaced by ``load(block)``."""

    def swap(blocks: tuple[Block, ...]) -> tuple[Block, ...]:
        out: list[Block] = []
        for item in blocks:
            if isinstance(item, ImageBlock):
                out.append(load(item))
            elif isinstance(item, ToolResultBlock):
                out.append(item.model_copy(update={"content": swap(item.content)}))
            else:
                out.append(item)
        return tuple(out)

    return message.model_copy(update={"content": swap(message.content)})


_holders = 0
_unregister: Callable[[], None] | None = None


def register_block() -> Callable[[], None]:
    """Make ``image`` a known content block until the returned function is called
    (held by count: two runtimes in one process each register it)."""
    global _holders, _unregister
    if _holders == 0:
        if content_blocks.lookup("image") is None:
            _unregister = content_blocks.register(ImageBlock)
        else:
            _unregister = None
    _holders += 1
    released = False

    def release() -> None:
        global _holders, _unregister
        nonlocal released
        if released:
            return
        released = True
        _holders -= 1
        if _holders == 0 and _unregister is not None:
            _unregister()
            _unregister = None

    return release


def registered() -> bool:
    """Whether the images plugin is loaded (the block type is known)."""
    return content_blocks.lookup("image") is ImageBlock


# ---------------------------------------------------------------------- attaching


class ImageAttached(Frozen):
    """``images/attached``: an image entered the conversation (how it shows)."""

    image: ImageBlock
    origin: str
    """How: ``mention``, ``command``, ``paste``, ``clipboard``, ``tool``, ``client`` (sent
    with a prompt by a front end's client: an editor)."""
    scaled: bool = False


class ImageMissing(Frozen):
    """``images/missing``: a request went without an image whose stored copy is gone."""

    name: str
    digest: str


IMAGE_ATTACHED = EventType("images/attached", ImageAttached)
IMAGE_MISSING = EventType("images/missing", ImageMissing)


def blobs_of(agent: AgentHandle) -> Blobs:
    store = agent.ctx.get(SESSIONS, None)
    blobs = store.blobs(agent.id) if store is not None else None
    if blobs is None:
        raise ImageError("this session is not stored, so it cannot keep images")
    return blobs


def vision_of(agent: AgentHandle) -> bool:
    """Whether the agent's model takes images, from the provider's facts."""
    options = agent.options
    try:
        return bool(agent.llm.resolve(options.provider, options.model).vision)
    except (KeyError, LookupError, ValueError):
        return False


def no_vision(agent: AgentHandle, names: list[str], *, history: bool = True) -> str:
    """What the user is told when they attach an image for a model without vision
    (``history``: the message is in dsh's prompt history, as in the terminal)."""
    shown = ", ".join(names)
    kept = " Your message is in the prompt history (Up arrow)." if history else ""
    return (
        f"{agent.options.model} does not take images, so nothing was sent ({shown}). "
        "Switch to a model with vision (/model; `dsh models` shows which have it), "
        f"or send the message without the image.{kept}"
    )


async def store_image(agent: AgentHandle, prepared: Prepared, name: str, origin: str) -> ImageBlock:
    """Store an image in the session's blobs (once per digest) and note it in the log."""
    digest = await blobs_of(agent).aput(prepared.data)
    image = block(prepared, digest, name)
    agent.session.append(
        IMAGE_ATTACHED.name, ImageAttached(image=image, origin=origin, scaled=prepared.scaled)
    )
    return image


async def attach_file(agent: AgentHandle, path: Path, name: str, origin: str) -> ImageBlock:
    """Read, check, scale and store the image at ``path``. Raises :class:`ImageError`."""
    prepared = await asyncio.to_thread(read_image_file, path, name)
    return await store_image(agent, prepared, name, origin)


def image_message(image: ImageBlock, intro: str, source: Source | None = None) -> UserMessage:
    return UserMessage(content=(TextBlock(text=intro), image), source=source or UserSource())
