"""A server's prompts as slash commands: ``/mcp__<server>__<prompt> args``.

The command asks the server for the prompt (``prompts/get``) with the arguments typed
after it, and sends what comes back as the person's next message. Arguments are the
prompt's own, in the order it declares them: ``/mcp__docs__review src/app.py "be
brief"`` or by name, ``focus=tests``; words beyond the last argument go to it.
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable

from mcp import types

from dsh.commands import Command, CommandContext, CommandError
from dsh.llm import user_text
from dsh_plugins.mcp.schema import tool_name

MAX_DESCRIPTION = 200


def command_name(server: str, prompt: str) -> str:
    """``mcp__<server>__<prompt>``, lower case (commands are), at most 64 characters."""
    return tool_name(server.lower(), prompt.lower())


def arguments_of(prompt: types.Prompt, text: str) -> dict[str, str]:
    declared = [a.name for a in prompt.arguments or []]
    try:
        words = shlex.split(text)
    except ValueError as error:
        raise CommandError(f"cannot read the arguments: {error}") from None
    values: dict[str, str] = {}
    positional: list[str] = []
    for word in words:
        key, sep, value = word.partition("=")
        if sep and key in declared:
            values[key] = value
        else:
            positional.append(word)
    free = [name for name in declared if name not in values]
    for index, word in enumerate(positional):
        if not free:
            raise CommandError(f"{prompt.name} takes no more arguments ({word!r} is left)")
        if index < len(free) - 1:
            values[free[index]] = word
        else:  # the last one takes the rest
            values[free[-1]] = " ".join(positional[index:])
            break
    missing = [a.name for a in prompt.arguments or [] if a.required and a.name not in values]
    if missing:
        raise CommandError(f"{prompt.name} needs {', '.join(missing)}")
    return values


def prompt_text(result: types.GetPromptResult) -> str:
    parts: list[str] = []
    for message in result.messages:
        content = message.content
        if isinstance(content, types.TextContent):
            text = content.text
        elif isinstance(content, types.EmbeddedResource) and isinstance(
            content.resource, types.TextResourceContents
        ):
            text = f'<resource uri="{content.resource.uri}">\n{content.resource.text}\n</resource>'
        else:
            text = f"[{content.type} content, not shown]"
        parts.append(text if message.role == "user" else f"({message.role}:) {text}")
    return "\n\n".join(parts)


Get = Callable[[str, dict[str, str]], Awaitable[types.GetPromptResult]]


class PromptCall:
    """One prompt of a server: its command, and the text it expands to."""

    def __init__(self, server: str, prompt: types.Prompt, get: Get) -> None:
        self.server = server
        self.prompt = prompt
        self._get = get
        self.name = command_name(server, prompt.name)

    async def text(self, args: str) -> str:
        result = await self._get(self.prompt.name, arguments_of(self.prompt, args))
        text = prompt_text(result)
        if not text.strip():
            raise CommandError(f"the prompt {self.prompt.name} of {self.server} is empty")
        return text

    def command(self) -> Command:
        async def run(context: CommandContext, args: str) -> None:
            context.agent.followup(user_text(await self.text(args)))

        prompt = self.prompt
        hint = " ".join(a.name if a.required else f"[{a.name}]" for a in prompt.arguments or [])
        description = (prompt.description or prompt.title or "").strip()
        first = description.splitlines()[0] if description else f"MCP prompt of {self.server}"
        return Command(name=self.name, description=first[:MAX_DESCRIPTION], run=run, arguments=hint)
