"""The ``session-titles`` service: titles a session once its first turn has completed,
and sets or reads the title on request.

It watches each agent go idle (``agent/status``). When the session's first turn has
completed and it has no title, a fallback (the first prompt's opening words) is logged
at once, so the picker and the terminal title have something to show; then, in a task
owned by that agent (cancelled when it goes), a model writes a better one. A title the
person set (``source: user``) is pinned: nothing automatic replaces it.

Only agents whose options say ``auto_title`` are titled automatically: the UI decides,
since an interactive session wants a title and a script usually does not want to pay
for one.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from pydantic import BaseModel, PositiveFloat, PositiveInt

from dsh.agent import AgentHandle
from dsh.kernel import Context
from dsh.session import Session, SessionTitle, SessionTitleRequest
from plugins.title.facts import TitleFacts, latest_title, read_facts
from plugins.title.generate import ask_for_title
from plugins.title.text import clean_title, fallback_title, title_prompt, user_title

_log = logging.getLogger("dsh.plugins.title")

SERVICE = "session-titles"


class Config(BaseModel):
    model_config = {"extra": "forbid"}

    generate: bool = True
    """Ask a model for the title of sessions titled automatically; false keeps the
    fallback (the first prompt's opening words) and makes no call."""
    provider: str | None = None
    """The provider route of title requests; the agent's own when unset."""
    model: str | None = None
    """The model of title requests; the agent's own when unset."""
    max_tokens: PositiveInt = 64
    timeout_s: PositiveFloat = 30.0
    """How long a title request may take before it is given up (the fallback stays)."""


@dataclass
class _Watch:
    """One agent's titling: the context owning its request, and whether anything is
    left to do for it automatically."""

    ctx: Context
    done: bool = False
    task: asyncio.Task[None] | None = None


class TitleService:
    def __init__(self, ctx: Context, config: Config) -> None:
        self._ctx = ctx
        self._config = config
        self._watches: dict[str, _Watch] = {}

    # ------------------------------------------------------------------ reading, setting

    def current(self, agent: AgentHandle) -> SessionTitle | None:
        """The session's title as the log has it now (the latest ``session/title``)."""
        return latest_title(agent.session.events)

    def set(self, agent: AgentHandle, text: str) -> SessionTitle:
        """Name the session as the person asked; the title is pinned from now on."""
        title = user_title(text)
        if title is None:
            raise ValueError("a title needs some text")
        event = SessionTitle(title=title, source="user")
        agent.session.append("session/title", event)
        watch = self._watches.get(str(agent.id))
        if watch is not None:
            watch.done = True
        return event

    async def settle(self, agent: AgentHandle) -> SessionTitle | None:
        """Wait for the agent's title request, if one is running (it gives up by itself
        after ``timeout_s``), then return the title. A headless run that asked for a
        title calls this before it exits, or the request would be cancelled."""
        watch = self._watches.get(str(agent.id))
        task = watch.task if watch is not None else None
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=self._config.timeout_s + 1.0)
        return self.current(agent)

    # ------------------------------------------------------------------ automatic titles

    def on_status(self, agent: AgentHandle, status: str) -> None:
        """``agent/status`` listener: an agent that went idle may be due a title."""
        if status != "idle" or not getattr(agent.options, "auto_title", False):
            return
        watch = self._watch(agent)
        if watch is None or watch.done:
            return
        session = agent.session
        facts = read_facts(session.events)
        if facts.completed_turn is None:
            return  # not yet: a title comes after the first completed turn
        watch.done = True
        if facts.title is not None and facts.title.source != "fallback":
            return  # named by the person, or by a model already
        if facts.title is None and facts.prompt is not None:
            fallback = fallback_title(facts.prompt.text)
            if fallback is not None:
                session.append(
                    "session/title",
                    SessionTitle(
                        title=fallback, message_seqs=(facts.prompt.seq,), source="fallback"
                    ),
                )
        if self._config.generate and not facts.requested and facts.prompt is not None:
            watch.task = watch.ctx.spawn(
                self._generate(agent, facts), name=f"session-title:{agent.id}"
            )

    def _watch(self, agent: AgentHandle) -> _Watch | None:
        key = str(agent.id)
        watch = self._watches.get(key)
        if watch is not None:
            return watch
        agent_ctx = agent.ctx
        if self._ctx.disposed or agent_ctx.disposed:
            return None
        # Owned by this plugin (unloading it cancels the request) and gone with the
        # agent too, before its session closes.
        owner = self._ctx.child(agent, name=f"title:{key}")
        watch = self._watches[key] = _Watch(owner)

        def forget() -> None:
            if self._watches.get(key) is watch:
                del self._watches[key]

        owner.effect(lambda: forget)
        agent_ctx.effect(lambda: owner.dispose)
        return watch

    async def _generate(self, agent: AgentHandle, facts: TitleFacts) -> None:
        assert facts.prompt is not None
        session = agent.session
        config = self._config
        provider = config.provider or agent.options.provider
        model = config.model or agent.options.model
        if _pinned(session):
            return  # renamed by the person before the request started
        quoted = tuple(q.seq for q in (facts.prompt, facts.answer) if q is not None)
        session.append(
            "session/title-llm-request",
            SessionTitleRequest(provider=provider, model=model, message_seqs=quoted),
        )
        prompt = title_prompt(facts.prompt.text, facts.answer.text if facts.answer else None)
        try:
            async with asyncio.timeout(config.timeout_s):
                reply, usage = await ask_for_title(
                    agent.llm,
                    provider=provider,
                    model=model,
                    prompt=prompt,
                    max_tokens=config.max_tokens,
                    session_id=session.id,
                )
        except Exception as error:  # a title is a nicety: the fallback stays
            _log.warning("session %s: no title from %s/%s: %s", session.id, provider, model, error)
            return
        title = clean_title(reply)
        if title is None:
            _log.warning("session %s: the title reply was empty", session.id)
            return
        if _pinned(session):
            return  # renamed by the person while the model thought
        session.append(
            "session/title",
            SessionTitle(
                title=title,
                message_seqs=quoted,
                source="provider",
                provider=provider,
                model=model,
                usage=usage,
            ),
        )


def _pinned(session: Session) -> bool:
    title = latest_title(session.events)
    return title is not None and title.source == "user"
