"""A scripted reply as the wire carries it: the streamed chat-completion chunks (or a
whole completion) and the usage the server reports, a prompt-cache hit included.

Part of the scripted model server (:mod:`dsh.testing.fake_llm`), which answers each
request with one :class:`Rendering`.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from dsh.testing.script import JsonObject, Reply, Usage

MALFORMED_LINE = b"data: {this is not json\n\n"


def json_bytes(value: Any) -> bytes:
    # DeepSeek sends compact JSON with non-ASCII text as UTF-8. A lone surrogate (a
    # script sending hostile text) has no UTF-8 form: it goes as a \u escape, which is
    # valid JSON that a client must cope with.
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":")).encode("ascii")


def _pieces(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def estimated_usage(reply: Reply, request_raw: bytes) -> Usage:
    prompt = max(1, len(request_raw.decode("utf-8", "replace")) // 4)
    reply_chars = len(reply.reasoning) + len(reply.text)
    reply_chars += sum(len(c.name) + len(c.arguments_text) for c in reply.tool_calls)
    completion = max(1, reply_chars // 4)
    reasoning = min(completion, max(1, len(reply.reasoning) // 4)) if reply.reasoning else None
    return Usage(prompt_tokens=prompt, completion_tokens=completion, reasoning_tokens=reasoning)


class PrefixCache:
    """The prompt prefixes this server has seen, as a chain of digests: the digest of
    parts 0..i of every request, so a new request's longest seen prefix is found in
    one pass over its parts. DeepSeek keeps cached units at request boundaries, at
    prefixes common to several requests and at fixed intervals; a unit at every message
    boundary is near enough for a client's test, and never counts a changed part."""

    def __init__(self) -> None:
        self._seen: set[bytes] = set()

    def hit(self, body: JsonObject) -> tuple[int, int]:
        """(prompt tokens, of which cached) for ``body``, remembering its prefixes."""
        digest = b""
        prompt = cached = 0
        matching = True
        for part in _prompt_parts(body):
            digest = hashlib.sha256(digest + part).digest()
            size = max(1, len(part) // 4)
            prompt += size
            if matching and digest in self._seen:
                cached += size
            else:
                matching = False
                self._seen.add(digest)
        return prompt, cached


def _prompt_parts(body: JsonObject) -> list[bytes]:
    """What a prefix cache keys on, in prompt order: the model and the tool list (which
    the server renders into the prompt's head), then each message as sent."""
    messages = body.get("messages")
    head = json_bytes({"model": body.get("model"), "tools": body.get("tools")})
    return [head, *(json_bytes(m) for m in (messages if isinstance(messages, list) else []))]


def cached_usage(reply: Reply, request_raw: bytes, cache: PrefixCache, body: JsonObject) -> Usage:
    estimate = estimated_usage(reply, request_raw)
    prompt, cached = cache.hit(body)
    return estimate.model_copy(update={"prompt_tokens": prompt, "cache_hit_tokens": cached})


@dataclass
class Rendering:
    """The per-response values shared by every chunk of one answer."""

    reply: Reply
    model: str
    usage: Usage
    call_ids: list[str]
    fingerprint: str
    completion_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created: int = field(default_factory=lambda: int(time.time()))

    def chunk(self, delta: JsonObject, finish: str | None) -> JsonObject:
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": self.fingerprint,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    def stream_events(self, include_usage: bool) -> list[bytes]:
        """Every ``data:`` event of the stream, ``[DONE]`` and any malformed line included."""
        reply = self.reply
        if reply.events is not None:
            events = [
                b"data: " + (e.encode("utf-8") if isinstance(e, str) else json_bytes(e)) + b"\n\n"
                for e in reply.events
            ]
            if reply.malformed_at is not None:
                events.insert(min(reply.malformed_at, len(events)), MALFORMED_LINE)
            return events
        size = reply.chunk_size
        reasoning = bool(reply.reasoning)
        deltas: list[JsonObject] = [
            {"role": "assistant", "content": None, "reasoning_content": ""}
            if reasoning
            else {"role": "assistant", "content": ""}
        ]
        deltas.extend(
            {"content": None, "reasoning_content": p} for p in _pieces(reply.reasoning, size)
        )
        deltas.extend(
            {"content": p, "reasoning_content": None} if reasoning else {"content": p}
            for p in _pieces(reply.text, size)
        )
        deltas.extend({"content": None, "refusal": p} for p in _pieces(reply.refusal, size))
        for index, (call, call_id) in enumerate(zip(reply.tool_calls, self.call_ids, strict=True)):
            function = {"name": call.name, "arguments": ""}
            deltas.append(
                {
                    "tool_calls": [
                        {"index": index, "id": call_id, "type": "function", "function": function}
                    ]
                }
            )
            deltas.extend(
                {"tool_calls": [{"index": index, "function": {"arguments": p}}]}
                for p in _pieces(call.arguments_text, size)
            )
        chunks = [self.chunk(delta, None) for delta in deltas]
        last_delta: JsonObject = (
            {"content": "", "reasoning_content": None} if reasoning else {"content": ""}
        )
        last = self.chunk(last_delta, reply.resolved_finish_reason)
        if include_usage:
            last["usage"] = self.usage.to_wire()
        chunks.append(last)
        events = [b"data: " + json_bytes(c) + b"\n\n" for c in chunks]
        events.append(b"data: [DONE]\n\n")
        if reply.malformed_at is not None:
            events.insert(min(reply.malformed_at, len(events) - 1), MALFORMED_LINE)
        return events

    def completion(self) -> JsonObject:
        reply = self.reply
        message: JsonObject = {"role": "assistant", "content": reply.text}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if reply.refusal:
            message["refusal"] = reply.refusal
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_text},
                }
                for call, call_id in zip(reply.tool_calls, self.call_ids, strict=True)
            ]
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": reply.resolved_finish_reason,
                }
            ],
            "usage": self.usage.to_wire(),
            "system_fingerprint": self.fingerprint,
        }
