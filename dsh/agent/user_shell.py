"""A shell command the person types at the prompt (``!git status``), run as the model's
commands are and put in front of the model.

The command goes through the tools pipeline as a call of the shell tool (:data:`TOOL`),
so everything that guards the model's commands guards it: the ``tool/pre-execute``
hooks, the deny rules and protected paths, the front end's command runner, the
tool's timeout. What the person typed is their own intent, so it counts as allowed
by a rule naming the tool (``allow = ["bash"]``, for this call alone): it runs
without asking in every mode, while a deny rule still refuses it and what asks
whatever the rules say (a protected file, a write outside the project, a deny rule
that cannot be checked) still asks.

Its command and output become one ``user/message`` whose source is a
:class:`~dsh.llm.ShellSource`: the model reads it before the next prompt (or at the
next step of a turn that runs meanwhile: :meth:`Agent.inject`), and the UIs show it
as the tool's card, live and when a session is resumed, from that one event.

Public API:

- ``run_user_command(agent, command, signal) -> UserMessage``: run it, log it, and
  return the message logged (or staged).
- ``shell_command(text) -> str | None``: the command a prompt's text asks to run.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import TYPE_CHECKING

from dsh.llm import (
    CallId,
    ShellSource,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMessage,
)
from dsh.policy.rules import Rule
from dsh.tools import ToolContext

if TYPE_CHECKING:
    from dsh.agent.agent import Agent

TOOL = "bash"
"""The tool a ``!`` command runs through: the one the model's commands use."""
PREFIX = "!"
DESCRIPTION = "typed at the prompt with !"


def shell_command(text: str) -> str | None:
    """The command ``text`` asks to run (what follows a leading ``!``), else None. An
    empty command is ``""``: the caller says what is missing."""
    text = text.strip()
    if not text.startswith(PREFIX):
        return None
    return text[len(PREFIX) :].strip()


def model_text(command: str, result: str) -> str:
    """What the model reads of a command the person ran."""
    return (
        f"The user ran this shell command themselves (typed as !{command} at the prompt):\n"
        f"$ {command}\n{result}"
    )


async def run_user_command(agent: Agent, command: str, signal: asyncio.Event) -> UserMessage:
    """Run ``command`` as the shell tool would for the model, then log it (or stage it
    for the running turn's next step) as a ``user/message`` the model reads; returns
    that message. ``signal`` set stops the command."""
    tools = agent.tools
    call_id = CallId(f"user-{uuid.uuid4().hex[:12]}")
    arguments = json.dumps({"command": command, "description": DESCRIPTION})
    call = ToolCallBlock(id=call_id, name=TOOL, arguments=arguments)
    spill = tools.spill
    session_id = agent.id
    context = ToolContext(
        call_id=call_id,
        agent=agent,
        cwd=agent.cwd,
        signal=signal,
        session_id=session_id,
        services=agent.ctx,
        spill=(lambda text, label: spill.save(session_id, label, text)) if spill else None,
        allow=(Rule(TOOL),),
    )
    outcome = await tools.run(call, context, agent)
    result = "".join(
        part.text
        for block in outcome.message.content
        if isinstance(block, ToolResultBlock)
        for part in block.content
        if isinstance(part, TextBlock)
    )
    source = ShellSource(
        call_id=call_id,
        tool=TOOL,
        arguments=arguments,
        result=result,
        error_code=outcome.error_code,
        meta=outcome.output.meta if outcome.output else None,
    )
    message = UserMessage(content=(TextBlock(text=model_text(command, result)),), source=source)
    agent.inject(message)
    return message
