"""The ``tools`` service: registered tools, and running one call from a model.

A call never raises into the loop: unknown tools, arguments that are not JSON or do
not fit the tool's model, a tool that fails and a tool that is cancelled all come
back as error results the model can read and correct.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from dsh.kernel import ScopedRegistry
from dsh.llm import ToolCallBlock, ToolResultMessage, ToolSchema, tool_result
from dsh.tools.definition import ToolContext, ToolDefinition, ToolOutput


@dataclass(frozen=True)
class CallOutcome:
    message: ToolResultMessage
    error_code: str | None = None
    output: ToolOutput | None = None


def parse_arguments(raw: str) -> Any:
    """The model's argument text as JSON: empty means ``{}``."""
    return json.loads(raw) if raw.strip() else {}


class ToolService(ScopedRegistry[ToolDefinition]):
    def __init__(self) -> None:
        super().__init__("tool")

    def schemas(self, scope: object | None) -> list[ToolSchema]:
        return [tool.schema for tool in self.visible(scope).values()]

    async def run(
        self, call: ToolCallBlock, context: ToolContext, scope: object | None
    ) -> CallOutcome:
        tool = self.get(call.name, scope)
        if tool is None:
            known = ", ".join(sorted(self.visible(scope))) or "none"
            return _failure(
                call, f"Unknown tool {call.name!r}. Available tools: {known}.", "UNKNOWN_TOOL"
            )
        try:
            raw = parse_arguments(call.arguments)
        except ValueError as error:
            return _failure(
                call,
                f"The arguments are not valid JSON ({error}); send a JSON object.",
                "INVALID_ARGUMENTS",
            )
        try:
            arguments = tool.arguments.model_validate(raw)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in item['loc']) or 'arguments'}: {item['msg']}"
                for item in error.errors()
            )
            return _failure(
                call, f"The arguments do not fit {call.name}: {problems}.", "INVALID_ARGUMENTS"
            )
        runner = asyncio.ensure_future(tool.execute(arguments, context))
        stopper = asyncio.ensure_future(context.signal.wait())
        try:
            await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        if not runner.done():
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            return _failure(call, "The tool was cancelled before it finished.", "TOOL_CANCELLED")
        try:
            result = runner.result()
        except Exception as error:
            return _failure(call, f"{call.name} failed: {error}", "TOOL_RUNTIME_FAILURE")
        output = ToolOutput(content=result) if isinstance(result, str) else result
        message = tool_result(call.id, output.content, is_error=True if output.is_error else None)
        return CallOutcome(message, "TOOL_ERROR" if output.is_error else None, output)


def _failure(call: ToolCallBlock, text: str, code: str) -> CallOutcome:
    return CallOutcome(tool_result(call.id, text, is_error=True), code)
