"""The ``tools`` service: registered tools, and the guarded pipeline one call goes through.

1. parse the model's argument text and validate it against the tool's model;
2. describe what the call would do (:class:`~dsh.tools.definition.Action`);
3. the ``tool/pre-execute`` hooks, side by side: any may deny (the first denial in
   listener order wins) or ask for approval;
4. permission: the mode, the rules and the person (:mod:`dsh.tools.approval`); for a
   call the OS sandbox contains, its status too (:mod:`dsh.policy.escalation`): what
   the person approved beyond the policy reaches execute as ``ToolContext.widening``;
5. execute, within the tool's timeout, stopped at once by a cancel;
6. the ``tool/post-execute`` hooks, side by side: any may turn the result into an error
   with feedback (the first in listener order wins), or add to it;
7. a large text result is saved to a spill file and the model gets a preview.

The hooks are dispatched on the kernel the service was made with (none without one),
so a hook registered from an agent's context hears only that agent's calls.

A call never raises into the loop: every failure becomes an error result, ``Error: …``,
with a code the loop logs on ``tool/result``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from dsh.checkpoints.service import CHECKPOINTS
from dsh.kernel import Context, Disposer, First, Gather, RegistryView, ScopedRegistry, ServiceKey
from dsh.llm import (
    Block,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    ToolSchema,
    UserMessage,
    tool_result,
)
from dsh.policy.rules import Rule
from dsh.sandbox.service import SANDBOX
from dsh.tools.approval import ApprovalService
from dsh.tools.definition import Action, ToolContext, ToolDefinition, ToolError, ToolOutput
from dsh.tools.spill import MAX_INLINE_BYTES, SpillStore, preview

if TYPE_CHECKING:
    from dsh.sandbox.service import SandboxStatus


@dataclass(frozen=True)
class CallOutcome:
    message: ToolResultMessage
    error_code: str | None = None
    output: ToolOutput | None = None


@dataclass(frozen=True)
class Deny:
    reason: str


@dataclass(frozen=True)
class Ask:
    reason: str


@dataclass(frozen=True)
class Allow:
    """A pre hook vouches for the call as an allow rule would, for this call alone: a
    deny rule, a protected path, a write outside the folder, the read-only mode or a
    command no rule can vouch for still decide as before."""

    reason: str


@dataclass(frozen=True)
class Rewrite:
    """A pre hook replaces the call's arguments: they are validated and described
    again, and the permissions judge the call as rewritten."""

    arguments: dict[str, Any]
    reason: str = ""


@dataclass(frozen=True)
class BlockResult:
    """A post hook turns the result into an error the model reads as feedback."""

    feedback: str


@dataclass(frozen=True)
class Amend:
    """A post hook accepts the result and adds to it: ``append`` goes after the content
    (diagnostics after an edit), ``additional_contexts`` enter after the batch."""

    append: str = ""
    additional_contexts: tuple[UserMessage, ...] = ()


PreVerdict = Deny | Ask | Allow | Rewrite | None
PreHook = Callable[[ToolDefinition, Any, Action, ToolContext], Awaitable[PreVerdict]]
"""A ``tool/pre-execute`` listener (:data:`dsh.hooks.TOOL_PRE_EXECUTE`)."""
PostHook = Callable[
    [ToolDefinition, Any, "CallOutcome", ToolContext], Awaitable[BlockResult | Amend | None]
]
"""A ``tool/post-execute`` listener (:data:`dsh.hooks.TOOL_POST_EXECUTE`)."""


def parse_arguments(raw: str) -> Any:
    """The model's argument text as JSON: empty means ``{}``. Raises ValueError for
    anything else that is not JSON, however it fails."""
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except RecursionError:  # nested deeper than the parser recurses
        raise ValueError("the JSON is nested too deeply") from None


class ToolService(ScopedRegistry[ToolDefinition]):
    def __init__(
        self,
        ctx: Context | None = None,
        *,
        approvals: ApprovalService | None = None,
        spill: SpillStore | None = None,
        max_inline_bytes: int = MAX_INLINE_BYTES,
    ) -> None:
        super().__init__("tool")
        self._ctx = ctx
        self.approvals = approvals
        self.spill = spill
        self.max_inline_bytes = max_inline_bytes

    def bind_context(self, ctx: Context) -> ToolView:
        return ToolView(self, ctx)

    def add(self, ctx: Context, name: str, item: ToolDefinition) -> Disposer:
        # The model is offered ``item.name`` and its calls are looked up by the name
        # registered: two names would make every call "unknown".
        if name != item.name:
            raise ValueError(
                f"a tool registered as {name!r} must be named so, but its definition is "
                f"named {item.name!r}: register the definition alone (register(definition))"
            )
        return super().add(ctx, name, item)

    def schemas(self, scope: object | None) -> list[ToolSchema]:
        return [tool.schema for tool in self.visible(scope).values()]

    def concurrency_safe(self, call: ToolCallBlock, scope: object | None) -> bool:
        """Whether the call may run beside others: a read-only tool with parseable arguments."""
        tool = self.get(call.name, scope)
        if tool is None or not tool.read_only:
            return False
        try:
            parse_arguments(call.arguments)
        except ValueError:
            return False
        return True

    async def run(
        self, call: ToolCallBlock, context: ToolContext, scope: object | None
    ) -> CallOutcome:
        tool = self.get(call.name, scope)
        if tool is None:
            known = ", ".join(sorted(self.visible(scope))) or "none"
            return _failure(
                call, f"unknown tool {call.name!r}. Available tools: {known}.", "UNKNOWN_TOOL"
            )
        try:
            raw = parse_arguments(call.arguments)
        except ValueError as error:
            return _failure(
                call,
                f"the arguments are not valid JSON ({error}); send a JSON object.",
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
                call, f"the arguments do not fit {call.name}: {problems}.", "INVALID_ARGUMENTS"
            )

        if self._ctx is not None:
            # Before the tool describes the call: a call answered from a recording
            # must not depend on the state the tool would read (a file, a terminal).
            answered = await self._ctx.serial(TOOL_ANSWER, tool, arguments, context)
            if answered is not None:
                return answered

        try:
            action = await tool.action(arguments, context)
        except ToolError as error:
            return _failure(call, error.message, error.code)
        except Exception as error:
            return _failure(
                call, f"{call.name} could not prepare the call: {error}", type(error).__name__
            )

        ask: str | None = None
        allow = context.allow
        if self._ctx is not None:
            decisions = await self._ctx.parallel(TOOL_PRE_EXECUTE, tool, arguments, action, context)
            for decision in decisions:
                if isinstance(decision, Deny):
                    return _failure(call, f"{call.name} was blocked: {decision.reason}", "DENIED")
            rewrite = next((d for d in decisions if isinstance(d, Rewrite)), None)
            if rewrite is not None:
                try:
                    arguments = tool.arguments.model_validate(rewrite.arguments)
                    action = await tool.action(arguments, context)
                except (ValidationError, ToolError) as error:
                    text = error.message if isinstance(error, ToolError) else str(error)
                    return _failure(
                        call, f"a hook's rewrite of the call does not fit {call.name}: {text}",
                        "INVALID_ARGUMENTS",
                    )  # fmt: skip
                # Every guard judges the call that will run: their denials and asks
                # about the rewritten arguments count (a second rewrite does not).
                decisions = await self._ctx.parallel(
                    TOOL_PRE_EXECUTE, tool, arguments, action, context
                )
                for decision in decisions:
                    if isinstance(decision, Deny):
                        return _failure(
                            call, f"{call.name} was blocked: {decision.reason}", "DENIED"
                        )
            ask = next((d.reason for d in decisions if isinstance(d, Ask)), None)
            if ask is None and any(isinstance(d, Allow) for d in decisions):
                allow = (*allow, Rule(call.name))  # as an allow rule naming the tool, this once
        # Only what approval grants widens the sandbox: never the context the call came with.
        context = replace(context, widening=None)
        if self.approvals is not None and context.agent is not None:
            gate = await self.approvals.check(
                tool,
                action,
                session=context.agent.session,
                call_id=call.id,
                cwd=context.cwd,
                force_ask=ask,
                signal=context.signal,
                extra_allow=allow,
                agent_label=context.agent.label,
                sandbox=await _sandbox_status(action, context),
            )
            if not gate.allowed:
                return _failure(
                    call, gate.message or f"{call.name} was not allowed", gate.code or "DENIED"
                )
            if gate.widening:
                context = replace(context, widening=gate.widening)

        if action.risk != "read":
            await _checkpoint(context)
        outcome = await self._execute(tool, call, arguments, context)
        if self._ctx is not None:
            verdicts = await self._ctx.parallel(
                TOOL_POST_EXECUTE, tool, arguments, outcome, context
            )
            for verdict in verdicts:
                if isinstance(verdict, BlockResult):
                    return _failure(call, verdict.feedback, "BLOCKED")
            for verdict in verdicts:
                if isinstance(verdict, Amend):
                    outcome = _amended(call, outcome, verdict)
        return self._maybe_spill(tool, call, outcome, context)

    async def _execute(
        self, tool: ToolDefinition, call: ToolCallBlock, arguments: Any, context: ToolContext
    ) -> CallOutcome:
        async def body() -> ToolOutput | str:
            if tool.timeout_s is None:
                return await tool.execute(arguments, context)
            async with asyncio.timeout(tool.timeout_s):
                return await tool.execute(arguments, context)

        runner = asyncio.ensure_future(body())
        stopper = asyncio.ensure_future(context.signal.wait())
        try:
            await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        if not runner.done():
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            return _failure(call, "the call was cancelled before it finished.", "TOOL_CANCELLED")
        try:
            result = runner.result()
        except ToolError as error:
            return _failure(call, error.message, error.code)
        except TimeoutError:
            return _failure(
                call,
                f"{call.name} took longer than {tool.timeout_s:g} s and was stopped.",
                "TOOL_TIMEOUT",
            )
        except Exception as error:
            return _failure(call, f"{call.name} failed: {error}", type(error).__name__)
        output = ToolOutput(content=result) if isinstance(result, str) else result
        message = tool_result(call.id, output.content, is_error=True if output.is_error else None)
        return CallOutcome(message, "TOOL_ERROR" if output.is_error else None, output)

    def _maybe_spill(
        self, tool: ToolDefinition, call: ToolCallBlock, outcome: CallOutcome, context: ToolContext
    ) -> CallOutcome:
        output = outcome.output
        if (
            output is None
            or self.spill is None
            or output.spilled
            or not tool.spill_output
            or not isinstance(output.content, str)
            or len(output.content.encode("utf-8", errors="replace")) <= self.max_inline_bytes
        ):
            return outcome
        try:
            path = self.spill.save(context.session_id or "no-session", tool.name, output.content)
        except OSError:
            return outcome  # keep the whole result rather than lose it
        shown = preview(output.content, path, self.max_inline_bytes)
        spilled = ToolOutput(
            content=shown,
            is_error=output.is_error,
            meta=output.meta,
            additional_contexts=output.additional_contexts,
            spilled=True,
        )
        message = tool_result(call.id, shown, is_error=True if output.is_error else None)
        return CallOutcome(message, outcome.error_code, spilled)


class ToolView(RegistryView[ToolDefinition]):
    """The tools service as one context sees it: tools and hooks it adds go with it."""

    __slots__ = ()

    @property
    def service(self) -> ToolService:
        registry = self._registry
        assert isinstance(registry, ToolService)
        return registry

    def register(
        self, tool: ToolDefinition | str, definition: ToolDefinition | None = None
    ) -> Disposer:
        """Register ``tool`` under its own name. ``register(name, definition)`` is
        still read, but only when ``name`` is the definition's: else ``ValueError``."""
        if isinstance(tool, ToolDefinition):
            if definition is not None:
                raise TypeError("register(definition) takes the definition alone")
            return self._registry.add(self._ctx, tool.name, tool)
        if definition is None:
            raise TypeError(f"register({tool!r}) needs the tool's definition")
        return self._registry.add(self._ctx, tool, definition)

    def add_pre_hook(self, hook: PreHook) -> Disposer:
        """``ctx.on(TOOL_PRE_EXECUTE, hook)`` for this view's context."""
        return self._ctx.on(TOOL_PRE_EXECUTE, hook)

    def add_post_hook(self, hook: PostHook) -> Disposer:
        """``ctx.on(TOOL_POST_EXECUTE, hook)`` for this view's context."""
        return self._ctx.on(TOOL_POST_EXECUTE, hook)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.service, name)


async def _sandbox_status(action: Action, context: ToolContext) -> SandboxStatus | None:
    """The sandbox's status, for a call it contains (learned once, in a thread)."""
    if not action.sandboxed and action.escalation is None:
        return None
    services = context.services
    sandbox = services.get(SANDBOX, None) if services is not None else None
    return await sandbox.ready() if sandbox is not None else None


async def _checkpoint(context: ToolContext) -> None:
    """The workspace's checkpoint before a call with effects (commands included: what
    they change is covered as what the edit tools change), once per step of a turn."""
    if context.agent is None or context.turn is None or context.services is None:
        return
    checkpoints = context.services.get(CHECKPOINTS, None)
    if checkpoints is not None:
        await checkpoints.before_effect(context.agent, context.turn, context.step)


def _amended(call: ToolCallBlock, outcome: CallOutcome, amend: Amend) -> CallOutcome:
    output = outcome.output
    if output is None:  # a pipeline failure: nothing a hook may add to
        return outcome
    content: str | tuple[Block, ...] = output.content
    if amend.append:
        if isinstance(content, str):
            content = f"{content}\n\n{amend.append}" if content else amend.append
        else:
            content = (*content, TextBlock(text=amend.append))
    amended = replace(
        output,
        content=content,
        additional_contexts=(*output.additional_contexts, *amend.additional_contexts),
    )
    message = tool_result(call.id, content, is_error=True if output.is_error else None)
    return CallOutcome(message, outcome.error_code, amended)


def _failure(call: ToolCallBlock, text: str, code: str) -> CallOutcome:
    return CallOutcome(tool_result(call.id, f"Error: {text}", is_error=True), code)


# ---------------------------------------------------------------------- hook points


def _caller(tool: ToolDefinition, arguments: Any, what: object, context: ToolContext) -> object:
    """The subject of a tool hook: the agent whose turn made the call."""
    return context.agent


TOOL_ANSWER: First[[ToolDefinition, Any, ToolContext], CallOutcome] = First(
    "tool/answer",
    subject=lambda tool, arguments, context: context.agent,
    doc="a validated call, before the tool describes it: a listener may answer it with "
    "an outcome of its own (a replay serving the result a log recorded), and then the "
    "tool is not described, judged, asked about or run",
)
TOOL_PRE_EXECUTE: Gather[
    [ToolDefinition, Any, Action, ToolContext], Deny | Ask | Allow | Rewrite | None
] = Gather(
    "tool/pre-execute",
    subject=_caller,
    doc="a validated call, before permission: Deny it, Ask the person even where rules "
    "allow it, Allow it as an allow rule would (this call alone), or Rewrite its "
    "arguments (judged again as rewritten); the first denial in listener order wins, "
    "else the first rewrite applies, then the first ask, else an allow",
)
TOOL_POST_EXECUTE: Gather[
    [ToolDefinition, Any, CallOutcome, ToolContext], BlockResult | Amend | None
] = Gather(
    "tool/post-execute",
    subject=_caller,
    doc="a call ran: turn its result into an error the model reads (BlockResult, the "
    "first in listener order wins) or add to it (Amend, all in listener order)",
)


TOOLS: ServiceKey[ToolView] = ServiceKey("tools")
"""The tool registry (``register``) and the tool hooks (``add_pre_hook``, ``add_post_hook``)."""
