"""Images for vision models: the ``image`` content block, ``/image PATH``, images an
editor sends with a prompt (``prompt/attach``), and the bytes of every image loaded
from the session's blobs just before a request.

The block and the reading, checking and storing of images are in
:mod:`dsh_plugins._shared.images`, which the mentions plugin (``@shot.png``), the ``read``
tool and the UIs' paste use too. This plugin makes the block type known (its
vocabulary), shows ``images/attached`` and ``images/missing`` in transcripts, and,
on the ``llm/stream`` waterfall, puts each image's bytes into the request, read in a
thread; an image whose stored copy is gone goes as a placeholder text and a notice.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote

from dsh.agent import (
    AgentHandle,
    Attached,
    Attachment,
    PasteResult,
    PromptAllow,
    PromptBlock,
    PromptDecision,
    PromptSubmit,
)
from dsh.commands import Command, CommandContext, CommandError
from dsh.hooks import AGENT_DISPOSED, AGENT_PROMPT_SUBMIT, LLM_STREAM, PROMPT_ATTACH, PROMPT_PASTE
from dsh.kernel import Context, Next, Plugin
from dsh.llm import GenerateOptions, Message, StreamChunk, TextBlock
from dsh.services import AGENTS, APPROVALS, COMMANDS, SESSIONS
from dsh.session import SessionEvent, register_events
from dsh.tools.protected import Protection, read_protection
from dsh.transcript import Transcript, register_entries
from dsh_plugins._shared.images import (
    IMAGE_ATTACHED,
    IMAGE_MISSING,
    MAX_FILE_BYTES,
    ImageAttached,
    ImageBlock,
    ImageError,
    ImageMissing,
    Prepared,
    attach_file,
    format_size,
    image_message,
    images_in,
    label,
    looks_like_image,
    no_vision,
    prepare,
    read_image_file,
    register_block,
    store_image,
    vision_of,
    with_images,
)
from dsh_plugins.images.clipboard import read_image as read_clipboard

NAME = "images"


def show_attached(event: SessionEvent, transcript: Transcript) -> None:
    data: ImageAttached = event.data
    scaled = " (scaled down)" if data.scaled else ""
    transcript.notice(event, "info", f"{label(data.image)}{scaled}")


def show_missing(event: SessionEvent, transcript: Transcript) -> None:
    data: ImageMissing = event.data
    transcript.notice(
        event,
        "warning",
        f"The image {data.name} was not sent: its stored copy ({data.digest[:12]}…) is missing.",
    )


def vocabulary(ctx: Context) -> None:
    ctx.effect(register_block)
    register_events(ctx, IMAGE_ATTACHED, IMAGE_MISSING)
    register_entries(ctx, IMAGE_ATTACHED.name, show_attached)
    register_entries(ctx, IMAGE_MISSING.name, show_missing)


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
"""Names a refused paste is reported for; the format itself is told by content."""
PLACEHOLDER = re.compile(r"\[image #(\d+) [^\]]*\]")


def pasted_path(text: str, cwd: Path) -> Path | None:
    """The file a one-line paste names (a file dragged onto a terminal pastes its path,
    quoted or with its spaces escaped, or as a ``file://`` URL), or None."""
    text = text.strip()
    if not text or len(text) > 4096:
        return None
    if text.startswith("file://"):
        text = unquote(text.removeprefix("file://"))
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    if len(words) != 1:
        return None
    path = resolve_path(words[0], cwd)
    try:
        return path if path.is_file() else None
    except (OSError, ValueError):
        return None


def resolve_path(text: str, cwd: Path) -> Path:
    path = Path(text).expanduser()
    return path if path.is_absolute() else cwd / path


KNOWN_MESSAGES = 100_000
"""Messages whose having images is remembered (all of them, past this: forgotten)."""


def apply(ctx: Context, config: object) -> None:
    # Every request carries the whole history, and the same message objects from one
    # request to the next: whether each holds an image is looked at once, not at every
    # step (which made the scan grow with the session, on every request). Keyed by id,
    # the message held so the id cannot be reused meanwhile.
    known: dict[int, tuple[Message, bool]] = {}
    without: set[int] = set()
    """The ids of the messages of ``known`` that hold no image (held there, so an id
    here is that message's): a history all in it is checked at C speed."""
    holding: set[int] = set()
    """The ids of the messages of ``known`` that hold one."""

    def has_images(message: Message) -> bool:
        hit = known.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        if len(known) >= KNOWN_MESSAGES:
            known.clear()
            without.clear()
            holding.clear()
        found = bool(images_in(message))
        known[id(message)] = (message, found)
        (holding if found else without).add(id(message))
        return found

    def any_images(messages: Sequence[Message]) -> bool:
        # Each step adds a message or two to a history otherwise all in ``without``:
        # those are found at C speed, then looked at from the end, where they are.
        ids = set(map(id, messages))
        if not ids.isdisjoint(holding):
            return True
        new = ids - without
        for message in reversed(messages):
            if not new:
                return False
            if id(message) in new:
                new.discard(id(message))
                if has_images(message):
                    return True
        return False

    async def load(options: GenerateOptions) -> tuple[GenerateOptions, list[ImageBlock]]:
        """The request with each image's bytes loaded, and the images whose bytes are gone."""
        if not options.session_id or not any_images(options.messages):
            return options, []
        store = ctx.get(SESSIONS, None)
        blobs = store.blobs(options.session_id) if store is not None else None
        wanted = {i.digest for m in options.messages for i in images_in(m) if i.data is None}

        def read_all() -> dict[str, bytes | None]:
            return {d: blobs.get(d) if blobs is not None else None for d in wanted}

        found = await asyncio.to_thread(read_all)
        missing: dict[str, ImageBlock] = {}

        def fill(image: ImageBlock) -> ImageBlock:
            if image.data is not None:
                return image
            data = found.get(image.digest)
            if data is None:
                missing.setdefault(image.digest, image)
                return image
            return image.model_copy(update={"data": data})

        messages = tuple(with_images(m, fill) if images_in(m) else m for m in options.messages)
        return options.model_copy(update={"messages": messages}), list(missing.values())

    noted: set[tuple[str, str]] = set()

    async def on_stream(
        options: GenerateOptions, next_: Next[GenerateOptions, AsyncIterator[StreamChunk]]
    ) -> AsyncIterator[StreamChunk]:
        loaded, missing = await load(options)
        if missing and options.session_id:
            agents = ctx.get(AGENTS, None)
            agent = agents.get(options.session_id) if agents is not None else None
            if agent is not None:
                for image in missing:
                    if (options.session_id, image.digest) in noted:
                        continue  # told once a session, not at every request
                    noted.add((options.session_id, image.digest))
                    agent.session.append(
                        IMAGE_MISSING.name, ImageMissing(name=image.name, digest=image.digest)
                    )
        return await next_(loaded)

    ctx.on(LLM_STREAM, on_stream)

    staged: dict[str, dict[int, ImageBlock]] = {}
    """Images pasted into an agent's prompt, by the number their placeholder shows."""

    async def stage(agent: AgentHandle, prepared: Prepared, name: str, origin: str) -> PasteResult:
        image = await store_image(agent, prepared, name, origin)
        mine = staged.setdefault(agent.id, {})
        number = max(mine, default=0) + 1
        mine[number] = image
        return PasteResult(text=f"[image #{number} {name}]", notice=f"Attached {label(image)}")

    async def on_paste(agent: AgentHandle, text: str | None) -> PasteResult | None:
        if text is None:
            return await from_clipboard(agent)

        def image_path() -> tuple[Path | None, Protection | None]:
            path = pasted_path(text, agent.cwd)
            if path is None:
                return None, None
            # Checked before a byte is read: a secret store named shot.png stays shut.
            refused = read_protection(path, agent.cwd)
            if refused is not None:
                return path, refused
            return (path if looks_like_image(path) else None), None

        path, refused = await asyncio.to_thread(image_path)
        if path is None:
            return None  # ordinary text
        name = path.name
        if refused is not None:
            if path.suffix.lower() not in IMAGE_SUFFIXES:
                return None  # a path pasted as text, which is the person's business
            return PasteResult(text="", notice=f"{name}: not read: {refused.why}", level="error")
        if not vision_of(agent):
            return PasteResult(text="", notice=no_vision(agent, [name]), level="error")
        try:
            prepared = await asyncio.to_thread(read_image_file, path, name)
            return await stage(agent, prepared, name, "paste")
        except ImageError as error:
            return PasteResult(text="", notice=str(error), level="error")

    async def from_clipboard(agent: AgentHandle) -> PasteResult | None:
        try:
            data = await read_clipboard()
        except LookupError as error:
            return PasteResult(text="", notice=str(error), level="warning")
        if data is None:
            return None
        if not vision_of(agent):
            return PasteResult(text="", notice=no_vision(agent, ["clipboard image"]), level="error")
        try:
            prepared = await asyncio.to_thread(prepare, data, "clipboard.png")
            return await stage(agent, prepared, "clipboard.png", "clipboard")
        except ImageError as error:
            return PasteResult(text="", notice=str(error), level="error")

    ctx.on(PROMPT_PASTE, on_paste)

    async def on_attach(agent: AgentHandle, attachments: Sequence[Attachment]) -> Attached:
        """Images an editor sent with a prompt: all of them checked (by their bytes,
        whatever type was declared) and scaled before any is stored, so a prompt
        refused for one of them leaves nothing behind."""
        names = [attachment.name for attachment in attachments]
        if not vision_of(agent):
            return Attached(refusal=no_vision(agent, names, history=False))
        prepared: list[Prepared] = []
        for attachment in attachments:
            if len(attachment.data) > MAX_FILE_BYTES:
                return Attached(
                    refusal=f"{attachment.name} is {format_size(len(attachment.data))}, over "
                    f"the {format_size(MAX_FILE_BYTES)} limit for an image, so nothing was sent"
                )
            try:
                prepared.append(await asyncio.to_thread(prepare, attachment.data, attachment.name))
            except ImageError as error:
                return Attached(refusal=f"{error}; nothing was sent")
        blocks = [
            await store_image(agent, image, attachment.name, "client")
            for image, attachment in zip(prepared, attachments, strict=True)
        ]
        return Attached(blocks=tuple(blocks))

    ctx.on(PROMPT_ATTACH, on_attach)

    async def on_prompt(
        submit: PromptSubmit, next_: Next[PromptSubmit, PromptDecision]
    ) -> PromptDecision:
        decision = await next_()
        mine = staged.get(submit.agent.id)
        if not mine or not isinstance(decision, PromptAllow):
            return decision
        content = decision.content if decision.content is not None else submit.message.content
        text = "".join(b.text for b in content if isinstance(b, TextBlock))
        used = [mine.pop(int(n)) for n in PLACEHOLDER.findall(text) if int(n) in mine]
        if not used:
            return decision
        if not vision_of(submit.agent):  # the model changed since the paste
            return PromptBlock(no_vision(submit.agent, [image.name for image in used]))
        return replace(decision, content=(*content, *used))

    ctx.on(AGENT_PROMPT_SUBMIT, on_prompt)

    def forget(agent: AgentHandle) -> None:
        staged.pop(agent.id, None)
        known.clear()  # its messages may go now; another agent's are looked at again
        without.clear()

    ctx.on(AGENT_DISPOSED, forget)

    async def image_command(command: CommandContext, args: str) -> None:
        agent = command.agent
        try:
            words = shlex.split(args)
        except ValueError:
            words = args.split()
        if not words:
            raise CommandError("usage: /image PATH [message]: attach an image to a message")
        where, text = words[0], args.split(None, 1)[1] if len(words) > 1 else ""
        if len(words) > 1 and args.strip().startswith(("'", '"')):
            text = " ".join(words[1:])
        path = resolve_path(where, agent.cwd)
        name = path.name
        if not vision_of(agent):
            raise CommandError(no_vision(agent, [name]))
        # A secret store (~/.ssh/id_rsa, whatever it is named) is not sent for an
        # image; dsh's own keys are never read at all.
        refused = await asyncio.to_thread(read_protection, path, agent.cwd)
        if refused is not None:
            raise CommandError(f"{where}: not read: {refused.why}")
        approvals = ctx.get(APPROVALS, None)
        if approvals is not None and approvals.deny and approvals.read_denied(path, agent.cwd):
            raise CommandError(f"{where}: not read: a deny rule in the settings hides it")
        try:
            image = await attach_file(agent, path, name, "command")
        except ImageError as error:
            raise CommandError(str(error)) from None
        intro = text or f"(The user attached the image {name}.)"
        agent.followup(image_message(image, intro))

    ctx.get(COMMANDS).register(
        "image",
        Command(
            name="image",
            description="attach an image (JPEG, PNG, GIF, WebP) to a message for the model",
            run=image_command,
            arguments="PATH [message]",
        ),
    )


plugin = Plugin(
    name=NAME,
    description="images for vision models: the image block, /image, and replay from blobs",
    vocabulary=vocabulary,
    apply=apply,
    inject=(COMMANDS,),
)
