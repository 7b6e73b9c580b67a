"""What a turn's model request is built from, and what its failures log.

:func:`seed_config` proposes the call config of the next request from the agent's
options and what the log chose before for the same route; the rest turns a stream
that gave no usable answer into an :class:`~dsh.llm.LlmFailure`, logs a retry, and
says once that a legacy model id is sent under another.
"""

from __future__ import annotations

from typing import Any, Literal

from dsh.agent.interception import RequestError, Retry
from dsh.llm import (
    BlockAssembler,
    FinishError,
    LlmCallConfig,
    LlmFailure,
    LlmService,
    RetryNotice,
    StreamProtocolError,
)
from dsh.session import Session
from dsh.session.payloads import LlmRetry, ModelRenamed
from dsh.settings_tables import AgentOptions

__all__ = [
    "adjusted_fields",
    "log_retry",
    "no_recovery",
    "note_renamed",
    "seed_config",
    "stream_failure",
]


def seed_config(options: AgentOptions, session: Session) -> LlmCallConfig:
    """The call config proposed for the next request: the agent's options, plus what
    was chosen explicitly (not filled in by the adapter) for the same route before."""
    fields: dict[str, Any] = {
        "provider": options.provider,
        "model": options.model,
        "reasoning_effort": options.reasoning_effort,
        "temperature": options.temperature,
        "max_tokens": options.max_tokens,
    }
    header = session.request_header()
    if header is not None and (header.config.provider, header.config.model) == (
        options.provider,
        options.model,
    ):
        # Neither what the adapter filled in nor what a listener adjusted for that
        # request was chosen: the adapter and the listeners decide again.
        decided = {**(header.adapter_defaults or {}), **(header.adjusted or {})}
        logged = header.config
        if fields["reasoning_effort"] is None and not decided.get("reasoningEffort"):
            fields["reasoning_effort"] = logged.reasoning_effort
        if fields["max_tokens"] is None and not decided.get("maxTokens"):
            fields["max_tokens"] = logged.max_tokens
        if fields["temperature"] is None and not decided.get("temperature"):
            fields["temperature"] = logged.temperature
    return LlmCallConfig(**fields)


CARRIED = {
    "reasoning_effort": "reasoningEffort",
    "max_tokens": "maxTokens",
    "temperature": "temperature",
}
"""The call's fields :func:`seed_config` carries from one request to the next, by the
names a request header logs them with."""


def adjusted_fields(proposed: LlmCallConfig, sent: LlmCallConfig) -> dict[str, Literal[True]]:
    """The carried fields ``agent/request`` listeners changed from ``proposed``."""
    return {
        logged: True
        for field, logged in CARRIED.items()
        if getattr(proposed, field) != getattr(sent, field)
    }


def stream_failure(
    assembler: BlockAssembler, protocol_error: StreamProtocolError | None
) -> LlmFailure | None:
    """Why a stream gave no usable answer, or None when it did."""
    if protocol_error is not None:
        return LlmFailure(
            message=f"the model stream broke the protocol: {protocol_error}",
            code="MALFORMED_RESPONSE",
        )
    if isinstance(assembler.finish, FinishError):
        return assembler.finish.failure
    if assembler.finish is None:
        return LlmFailure(message="the model stream ended without finishing", code="STREAM_CLOSED")
    return None


def no_recovery(error: RequestError) -> Retry | None:
    """The default of ``agent/request-error``: the failure ends the turn."""
    return None


def log_retry(session: Session, retry_id: str, turn: int, step: int, notice: RetryNotice) -> None:
    session.append(
        "llm/retry",
        LlmRetry(
            retry_id=retry_id,
            turn=turn,
            step=step,
            provider=notice.provider,
            retry=notice.retry,
            max_retries=notice.max_retries,
            delay_ms=notice.delay_ms,
            failure=notice.failure,
        ),
    )


def note_renamed(session: Session, llm: LlmService, provider: str, model: str) -> None:
    """Say once per session that ``model`` is sent under another id (a legacy id)."""
    try:
        sent_as = llm.resolve(provider, model).sent_as
    except Exception:  # the request itself reports an unknown route
        return
    if sent_as is None or sent_as == model:
        return
    for event in session.scan("model/renamed"):
        if isinstance(event.data, ModelRenamed) and (event.data.provider, event.data.model) == (
            provider,
            model,
        ):
            return
    session.append("model/renamed", ModelRenamed(provider=provider, model=model, sent_as=sent_as))
