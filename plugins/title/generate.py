"""One small model call that names a session (purpose ``session-title``).

The call leaves the conversation alone: nothing of it enters the session's history,
and the log records only that it was made (``session/title-llm-request``, with the
messages it quoted) and what came of it (``session/title``). Thinking is switched off
where the model allows it: a title needs no deliberation, and reasoning tokens would
eat the small output budget.
"""

from __future__ import annotations

from dsh.llm import (
    BlockAssembler,
    FinishError,
    GenerateOptions,
    LlmCallConfig,
    LlmError,
    LlmFailure,
    LlmService,
    SessionId,
    TokenUsage,
    user_text,
)
from dsh_plugins.title.events import PURPOSE
from dsh_plugins.title.text import SYSTEM


async def ask_for_title(
    llm: LlmService,
    *,
    provider: str,
    model: str,
    prompt: str,
    max_tokens: int,
    session_id: SessionId | None = None,
) -> tuple[str, TokenUsage | None]:
    """The model's raw reply to ``prompt`` and what the call used; raises
    :class:`LlmError` when the call fails."""
    resolved = llm.resolve(provider, model)
    off = resolved.reasoning is not None and resolved.reasoning.accepts("off")
    prepared = llm.prepare_call(
        LlmCallConfig(
            provider=provider,
            model=model,
            reasoning_effort="off" if off else None,
            max_tokens=max_tokens,
        )
    )
    config = prepared.config
    options = GenerateOptions(
        provider=config.provider,
        model=config.model,
        messages=(user_text(prompt),),
        system=SYSTEM,
        reasoning_effort=config.reasoning_effort,
        max_tokens=config.max_tokens,
        session_id=session_id,
        purpose=PURPOSE,
    )
    assembler = BlockAssembler()
    chunks = llm.stream(options)
    try:
        async for chunk in chunks:
            assembler.push(chunk)
    finally:
        close = getattr(chunks, "aclose", None)  # a cancelled call closes its connection now
        if close is not None:
            await close()
    if isinstance(assembler.finish, FinishError):
        raise LlmError(assembler.finish.failure)
    if assembler.failed or assembler.finish is None:
        raise LlmError(LlmFailure(message="the title request did not finish", code="NO_TITLE"))
    reply = assembler.message(provider=config.provider, model=config.model).text()
    return reply, assembler.usage
