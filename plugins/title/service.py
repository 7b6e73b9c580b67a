"""The ``session-titles`` service: titles a session once its first turn has completed,
and sets or reads the title on request.

It watches each agent go idle (``agent/status``). When the session's first turn has
completed and it has no title, a fallback (the first prompt's opening words) is logged
at once, so the picker and the terminal title have something to show; then, in a task
owned by that agent (cancelled when it goes), a model writes a better one. A title the
person set (``source: user``) is pinned: nothing automatic replaces it.

Which agents are titled automatically is this plugin's ``auto`` setting: by default
those an interactive front end shows (:mod:`dsh.frontend`), since a person wants a
title and a script usually does not want to pay for one. ``dsh -p --title`` asks for
one with :meth:`TitleService.title_now`.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, PositiveFloat, PositiveInt

from dsh.agent import AgentHandle
from dsh.frontend import front_end
from dsh.kernel import Context, ServiceKey
from dsh.session import Session
from dsh_plugins.title.events import TITLE, TITLE_REQUEST, SessionTitle, SessionTitleRequest
from dsh_plugins.title.facts import TitleFacts, latest_title, read_facts
from dsh_plugins.title.generate import ask_for_title
from dsh_plugins.title.text import clean_title, fallback_title, title_prompt, user_title

_log = logging.getLogger("dsh.plugins.title")

SERVICE: ServiceKey[TitleService] = ServiceKey("session-titles")


class Config(BaseModel):
    model_config = {"extra": "forbid"}

    auto: Literal["interactive", "always", "never"] = "interactive"
    """Which sessions are titled by themselves after their first completed turn: those
    shown in the TUI or plain mode, every one (headless runs too), or none (only
    ``/title``, and ``dsh -p --title``, which asks)."""
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
        agent.session.append(TITLE.name, event)
        watch = self._watches.get(str(agent.id))
        if watch is not None:
            watch.done = True
        return event

    async def title_now(self, agent: AgentHandle) -> SessionTitle | None:
        """Title an idle agent's session as an interactive one is titled by itself (if
        its first turn has completed and it has no title that counts), whatever
        ``auto`` says, and wait for the title: what ``dsh -p --title`` asks, once its
        turns are over and before it exits (or the request would be cancelled)."""
        if agent.status == "idle":
            self._title_if_due(agent)
        return await self.settle(agent)

    async def answer_title_now(self, agent: AgentHandle) -> bool:
        """The ``session/title-now`` listener: title the session, then say it was seen to."""
        await self.title_now(agent)
        return True

    async def settle(self, agent: AgentHandle) -> SessionTitle | None:
        """Wait for the agent's title request, if one is running (it gives up by itself
        after ``timeout_s``), then return the title."""
        watch = self._watches.get(str(agent.id))
        task = watch.task if watch is not None else None
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=self._config.timeout_s + 1.0)
        return self.current(agent)

    # ------------------------------------------------------------------ automatic titles

    def on_status(self, agent: AgentHandle, status: str) -> None:
        """``agent/status`` listener: an agent that went idle may be due a title."""
        if status == "idle" and self._automatic(agent):
            self._title_if_due(agent)

    def _automatic(self, agent: AgentHandle) -> bool:
        match self._config.auto:
            case "always":
                return True
            case "interactive":
                shown = front_end(agent)
                return shown is not None and shown.interactive
        return False

    def _title_if_due(self, agent: AgentHandle) -> None:
        """Once the first turn has completed: a fallback at once, and the model's title
        in the background, unless the session has one that counts already."""
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
                    TITLE.name,
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
            TITLE_REQUEST.name,
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
            TITLE.name,
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
