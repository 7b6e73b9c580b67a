"""The OpenAI-style chat-completions protocol, as DeepSeek and compatible servers speak it.

Each piece is a module of its own, usable alone:

- :mod:`~dsh_plugins._shared.chat_models`: :class:`ChatModel`, what a provider knows
  about one model;
- :mod:`~dsh_plugins._shared.chat_request`: :func:`request_body`, a
  :class:`~dsh.llm.GenerateOptions` as the JSON body;
- :mod:`~dsh_plugins._shared.chat_stream`: :class:`ChatStreamTranslator`, the streamed
  JSON events as :data:`~dsh.llm.StreamChunk` values;
- :mod:`~dsh_plugins._shared.chat_errors`: :func:`http_failure`, an HTTP error as an
  :class:`~dsh.llm.LlmFailure`;
- :mod:`~dsh_plugins._shared.chat_body`: the response body read with every wait
  bounded, a batch of events at a time;
- :mod:`~dsh_plugins._shared.chat_adapter`: :class:`ChatCompletionsAdapter`, which
  joins them over one shared ``httpx.AsyncClient`` (the DeepSeek and
  OpenAI-compatible plugins configure it), and :func:`connection_test` for their setup
  forms.

This module gathers what the plugins import, so they import from one place. A library
those plugins share (see :mod:`dsh_plugins._shared`), built on dsh's public API.
"""

from __future__ import annotations

from dsh_plugins._shared.chat_adapter import (
    HEADERS_TIMEOUT_S,
    STREAM_IDLE_TIMEOUT_S,
    USER_AGENT,
    ApiKey,
    ChatCompletionsAdapter,
    connection_test,
)
from dsh_plugins._shared.chat_body import END_GRACE_S, READ_PAUSE_S
from dsh_plugins._shared.chat_errors import http_failure, reset_at_ms, retry_after_ms
from dsh_plugins._shared.chat_models import EFFORT_NAMES, ChatModel
from dsh_plugins._shared.chat_request import request_body, serialize_messages, thinking_mode
from dsh_plugins._shared.chat_stream import ChatStreamTranslator, map_usage

__all__ = [
    "EFFORT_NAMES",
    "END_GRACE_S",
    "HEADERS_TIMEOUT_S",
    "READ_PAUSE_S",
    "STREAM_IDLE_TIMEOUT_S",
    "USER_AGENT",
    "ApiKey",
    "ChatCompletionsAdapter",
    "ChatModel",
    "ChatStreamTranslator",
    "connection_test",
    "http_failure",
    "map_usage",
    "request_body",
    "reset_at_ms",
    "retry_after_ms",
    "serialize_messages",
    "thinking_mode",
]
