"""``@path`` mentions: the files and folders a prompt names, put in front of the model.

When a person's prompt holds ``@path`` tokens (``explain @src/app.py, please``), each
that names a regular file inside the session's working directory attaches the file's
text for that turn, and each that names a folder attaches a short listing of it
(breadth first, ``.gitignore``'d entries left out). Symlinks are resolved first; what
lies outside the working directory is not read, nor are dsh's own keys and trust
store (:mod:`dsh.tools.protected`), wherever they are. A mention that cannot be
attached (not found, outside, refused, binary, over the size limit) is named in a note
with the reason, so the model knows what it did not get. A word that names nothing
and does not look like a path (``@dataclass``, ``@alice``) is left alone.

Where a front end stands in for the disk (an editor's buffers under ``dsh acp``, the
``workspace-files`` service on the agent's context), a file that passed every check
is attached with the stand-in's text, unsaved changes included; the disk's text when
the stand-in cannot give it or gives more than the size limit.

The prompt itself is sent unchanged. The attachments are the ``agent/prompt-submit``
decision's additional contexts: user messages from this plugin that the loop logs
after the prompt, so every request stays rebuildable from the session log.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from pydantic import BaseModel, PositiveInt

from dsh.agent import AgentHandle, PromptAllow, PromptBlock, PromptDecision, PromptSubmit
from dsh.hooks import AGENT_PROMPT_SUBMIT
from dsh.kernel import Context, Next, Plugin
from dsh.llm import PluginSource, UserMessage, UserSource, user_text
from dsh.services import APPROVALS, WORKSPACE_FILES
from dsh_plugins._shared.images import (
    ImageError,
    attach_file,
    image_message,
    looks_like_image,
    no_vision,
    registered,
    vision_of,
)
from dsh_plugins.mentions.attach import Attached, Attachment, Limits, attach, mentions

__all__ = ["NAME", "Config", "attach", "mentions", "messages", "plugin"]

NAME = "mentions"
"""The plugin's name, which its context messages carry as their source."""


class Config(BaseModel):
    model_config = {"extra": "forbid"}

    max_file_bytes: PositiveInt = 256 * 1024
    """A mentioned file larger than this is not attached (a note says so)."""
    max_total_bytes: PositiveInt = 1024 * 1024
    """What one prompt's mentions may attach in all."""
    max_entries: PositiveInt = 200
    """Entries of a mentioned folder's listing."""
    max_mentions: PositiveInt = 20
    """Mentions looked at in one prompt."""


def _reminder(text: str) -> str:
    return f"<system-reminder>\n{text}\n</system-reminder>"


def _message(attachment: Attachment) -> UserMessage:
    if attachment.kind == "folder":
        body = (
            f"The user mentioned the folder @{attachment.token}; its entries, breadth first "
            f"(paths relative to the working directory; .gitignore'd ones left out):\n\n"
            f"{attachment.text}"
        )
    else:
        text = attachment.text
        ends = not text or text.endswith("\n")
        lines = text.count("\n") + (not ends)
        closing = "</file>" if ends else "\n</file>"
        size = f"{lines} line{'s' if lines != 1 else ''}" if text else "empty"
        body = (
            f"The user mentioned @{attachment.token}; here is {attachment.path} ({size}) "
            f'as it is now.\n\n<file path="{attachment.path}">\n{text}{closing}'
        )
    return user_text(_reminder(body), source=PluginSource(plugin=NAME, form="snapshot"))


def messages(attached: Attached) -> tuple[UserMessage, ...]:
    """A message for each attachment, then one note for all the mentions left out."""
    out = [_message(a) for a in attached.attachments]
    if attached.notes:
        lines = "\n".join(f"- {note}" for note in attached.notes)
        text = _reminder(f"Not attached from the user's mentions:\n{lines}")
        out.append(user_text(text, source=PluginSource(plugin=NAME, form="notice")))
    return tuple(out)


def apply(ctx: Context, config: Config) -> None:
    limits = Limits(
        max_file_bytes=config.max_file_bytes,
        max_total_bytes=config.max_total_bytes,
        max_entries=config.max_entries,
        max_mentions=config.max_mentions,
    )

    async def on_prompt(
        submit: PromptSubmit, next_: Next[PromptSubmit, PromptDecision]
    ) -> PromptDecision:
        agent, message = submit.agent, submit.message
        decision = await next_()
        if not isinstance(decision, PromptAllow):
            return decision  # blocked: nothing to attach
        if not isinstance(message.source, UserSource):
            return decision  # only a person's own words: not job notices, not relays
        if decision.content is not None:
            message = message.model_copy(update={"content": decision.content})
        text = message.text()
        if "@" not in text:
            return decision
        approvals = ctx.get(APPROVALS, None)
        root = Path(agent.cwd)
        denied = (
            (lambda path: bool(approvals.read_denied(path, root)))
            if approvals is not None and approvals.deny
            else None
        )
        images = looks_like_image if registered() else None
        attached = await asyncio.to_thread(attach, text, root, limits, denied, images)
        pictures = [a for a in attached.attachments if a.kind == "image"]
        if pictures and not vision_of(agent):
            # Told before anything is sent; the prompt stays in the history.
            return PromptBlock(no_vision(agent, [f"@{a.token}" for a in pictures]))
        shown: list[UserMessage] = []
        for picture in pictures:
            try:
                image = await attach_file(agent, root / picture.path, picture.path, "mention")
            except ImageError as error:
                attached.notes.append(f"@{picture.token}: {error}")
                continue
            shown.append(
                image_message(
                    image,
                    _reminder(f"The user mentioned @{picture.token}, the image {picture.path}:"),
                    PluginSource(plugin=NAME, form="snapshot"),
                )
            )
        attached.attachments = [a for a in attached.attachments if a.kind != "image"]
        await _from_stand_in(agent, root, attached, limits.max_file_bytes)
        extra = (*shown, *messages(attached))
        if not extra:
            return decision
        return replace(decision, additional_contexts=(*decision.additional_contexts, *extra))

    ctx.on(AGENT_PROMPT_SUBMIT, on_prompt)


async def _from_stand_in(
    agent: AgentHandle, root: Path, attached: Attached, max_file_bytes: int
) -> None:
    """The files' text as the agent's stand-in for the disk holds it, if it has one."""
    files = agent.ctx.get(WORKSPACE_FILES, None)
    if files is None or files.on_disk:
        return
    for index, attachment in enumerate(attached.attachments):
        if attachment.kind != "file":
            continue
        try:
            # The path is the real one (links followed) that the checks passed.
            text = await files.read_text(root / attachment.path)
        except OSError:
            continue
        if len(text.encode(errors="surrogatepass")) <= max_file_bytes:
            attached.attachments[index] = replace(attachment, text=text)


plugin = Plugin(
    name=NAME,
    description="@path mentions in a prompt: the files' contents and folders' listings",
    config=Config,
    apply=apply,
)
