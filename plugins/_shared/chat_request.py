"""The request: a :class:`~dsh.llm.GenerateOptions` as a chat-completions JSON body.

:func:`request_body` builds the body for one model (reasoning replayed, DeepSeek's
thinking switch, tools, images as ``data:`` URLs or placeholders); :func:`json_body`
encodes it so that any session can be sent.

Part of the chat-completions library (see :mod:`dsh_plugins._shared.chat_completions`).
"""

from __future__ import annotations

import json
from typing import Any

from dsh.llm import (
    GenerateOptions,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from dsh_plugins._shared.chat_models import ChatModel
from dsh_plugins._shared.images import ImageBlock, data_url, placeholder


def _text(blocks: tuple[Any, ...]) -> str:
    return "".join(block.text for block in blocks if isinstance(block, TextBlock))


def serialize_messages(
    options: GenerateOptions,
    *,
    replay_reasoning: bool,
    thinking: bool = False,
    vision: bool = False,
) -> list[dict[str, Any]]:
    """The ``messages`` array: the system prompt first, then the history.

    With ``replay_reasoning``, an assistant message whose answer carried reasoning sends
    it back as ``reasoning_content``; with ``thinking`` too (a request in thinking mode)
    every assistant message carries the field, empty when there was no reasoning. A
    tool result becomes a ``tool`` message; blocks of unknown types are skipped.

    Images go as ``image_url`` parts with a ``data:`` URL when ``vision`` says the model
    takes them, else as a placeholder text. A ``tool`` message can hold text alone, so
    an image a tool returned is sent as OpenAI-compatible agents send it: the tool
    message says it follows, and a user message holding the images comes right after
    the run of tool messages (tool messages must directly follow their call).
    """
    out: list[dict[str, Any]] = []
    if options.system:
        out.append({"role": "system", "content": options.system})
    deferred: list[dict[str, Any]] = []
    for message in options.messages:
        entries = _serialize(message, replay_reasoning, thinking, vision, deferred)
        if deferred and any(entry["role"] != "tool" for entry in entries):
            out.extend(deferred)
            deferred.clear()
        out.extend(entries)
    out.extend(deferred)
    return out


def _reasoning(message: Message) -> str:
    return "".join(b.text for b in message.content if isinstance(b, ReasoningBlock))


def _image_part(block: ImageBlock, vision: bool) -> dict[str, Any]:
    url = data_url(block) if vision else None
    if url is None:
        return {"type": "text", "text": placeholder(block, vision=vision)}
    return {"type": "image_url", "image_url": {"url": url}}


def _user_content(blocks: tuple[Any, ...], vision: bool) -> str | list[dict[str, Any]]:
    """A plain string, or the parts of a message that holds images."""
    if not any(isinstance(b, ImageBlock) for b in blocks):
        return _text(blocks)
    parts: list[dict[str, Any]] = []
    for item in blocks:
        if isinstance(item, TextBlock) and item.text:
            parts.append({"type": "text", "text": item.text})
        elif isinstance(item, ImageBlock):
            parts.append(_image_part(item, vision))
    return parts


def _serialize(
    message: Message,
    replay_reasoning: bool,
    thinking: bool,
    vision: bool,
    deferred: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    if message.role == "assistant":
        calls = [b for b in message.content if isinstance(b, ToolCallBlock)]
        reasoning = _reasoning(message)
        entry: dict[str, Any] = {"role": "assistant", "content": _text(message.content)}
        # DeepSeek's thinking mode answers 400 unless reasoning comes back, and some
        # deployments reject an assistant message without the field at all.
        if replay_reasoning and (reasoning or thinking):
            entry["reasoning_content"] = reasoning
        if calls:
            entry["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in calls
            ]
        return [entry]
    results = [b for b in message.content if isinstance(b, ToolResultBlock)]
    out: list[dict[str, Any]] = []
    for result in results:
        text = _text(result.content)
        images = [b for b in result.content if isinstance(b, ImageBlock)]
        if images and vision:
            names = ", ".join(image.name for image in images)
            note = f"(The image {names} follows in the next message.)"
            text = f"{text}\n{note}" if text else note
            deferred.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "text",
                            "text": f"The image from tool call {result.tool_call_id}:",
                        },
                        *(_image_part(image, vision) for image in images),
                    ],
                }
            )
        elif images:
            shown = "\n".join(placeholder(image, vision=False) for image in images)
            text = f"{text}\n{shown}" if text else shown
        out.append(
            {"role": "tool", "tool_call_id": result.tool_call_id, "content": text or "(no output)"}
        )
    content = _user_content(message.content, vision)
    # Tool messages must follow the assistant message that called them, so any text
    # sent with results goes after them.
    if content or not results:
        out.append({"role": message.role, "content": content})
    return out


def thinking_mode(options: GenerateOptions, effort: str | None) -> bool:
    """Whether a request is in thinking mode: the request turns thinking on (an effort
    other than ``off``), or it leaves thinking to the server and the conversation shows
    the model thinks (an earlier answer carried reasoning). Decided by the request and
    the conversation, never by a list of model ids."""
    if effort == "off":
        return False
    if effort is not None:
        return True
    return any(message.role == "assistant" and _reasoning(message) for message in options.messages)


def request_body(
    options: GenerateOptions, model: ChatModel, *, replay_reasoning: bool = True
) -> dict[str, Any]:
    """The JSON body for ``options``. Absent fields are left out, never sent as null.

    ``replay_reasoning`` is the provider's setting; the model's own can turn it off too.
    """
    effort = options.reasoning_effort
    if options.purpose == "session-title":
        effort = "off" if model.thinking else None  # titles never need thinking
    thinking = thinking_mode(options, effort)
    body: dict[str, Any] = {
        "model": model.sent_as or options.model,
        "messages": serialize_messages(
            options,
            replay_reasoning=replay_reasoning and model.replay_reasoning,
            thinking=thinking,
            vision=model.vision,
        ),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if options.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in options.tools
        ]
    if model.thinking:
        if effort == "off":
            body["thinking"] = {"type": "disabled"}
        elif effort is not None:
            body["thinking"] = {"type": "enabled"}
            body["reasoning_effort"] = effort
    elif effort is not None and effort != "off":
        body["reasoning_effort"] = effort
    # DeepSeek's docs: thinking mode ignores temperature, presence_penalty and
    # frequency_penalty (dsh sends only the first), so none is sent with it on.
    if options.temperature is not None and not thinking:
        body["temperature"] = options.temperature
    if options.max_tokens is not None:
        body["max_tokens"] = options.max_tokens
    if options.stop:
        body["stop"] = list(options.stop)
    return body


def json_body(body: dict[str, Any]) -> bytes:
    """The request body as httpx's ``json=`` would send it, except that a lone
    surrogate (a model's cut escape, echoed back in history) goes as its JSON escape
    rather than failing to encode, so the session can always be sent."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Only unpaired surrogates fail, and only inside JSON strings, where "\\udXXX"
        # is the escape that reads back as the same character.
        return text.encode("utf-8", "backslashreplace")
