"""Images for vision models: the ``image`` content block, ``/image PATH``, and the
bytes of every image loaded from the session's blobs just before a request.

The block and the reading, checking and storing of images are in
:mod:`plugins._shared.images`, which the mentions plugin (``@shot.png``), the ``read``
tool and the UIs' paste use too. This plugin makes the block type known (its
vocabulary), shows ``images/attached`` and ``images/missing`` in transcripts, and,
on the ``llm/stream`` waterfall, puts each image's bytes into the request, read in a
thread; an image whose stored copy is gone goes as a placeholder text and a notice.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import AsyncIterator
from pathlib import Path

from dsh.commands import Command, CommandContext, CommandError
from dsh.hooks import LLM_STREAM
from dsh.kernel import Context, Next, Plugin
from dsh.llm import GenerateOptions, StreamChunk
from dsh.services import AGENTS, APPROVALS, COMMANDS, SESSIONS
from dsh.session import SessionEvent, register_events
from dsh.tools.protected import read_protection
from dsh.transcript import Transcript, register_entries
from plugins._shared.images import (
    IMAGE_ATTACHED,
    IMAGE_MISSING,
    ImageAttached,
    ImageBlock,
    ImageError,
    ImageMissing,
    attach_file,
    image_message,
    images_in,
    label,
    no_vision,
    register_block,
    vision_of,
    with_images,
)

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


def resolve_path(text: str, cwd: Path) -> Path:
    path = Path(text).expanduser()
    return path if path.is_absolute() else cwd / path


def apply(ctx: Context, config: object) -> None:
    async def load(options: GenerateOptions) -> tuple[GenerateOptions, list[ImageBlock]]:
        """The request with each image's bytes loaded, and the images whose bytes are gone."""
        if not options.session_id or not any(images_in(m) for m in options.messages):
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

    async def on_stream(
        options: GenerateOptions, next_: Next[GenerateOptions, AsyncIterator[StreamChunk]]
    ) -> AsyncIterator[StreamChunk]:
        loaded, missing = await load(options)
        if missing and options.session_id:
            agents = ctx.get(AGENTS, None)
            agent = agents.get(options.session_id) if agents is not None else None
            if agent is not None:
                for image in missing:
                    agent.session.append(
                        IMAGE_MISSING.name, ImageMissing(name=image.name, digest=image.digest)
                    )
        return await next_(loaded)

    ctx.on(LLM_STREAM, on_stream)

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
