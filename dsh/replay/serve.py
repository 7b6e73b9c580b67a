"""The stand-in for everything outside the loop during a replay.

One :class:`StandIn` per replay, listening on the replaying runtime's seams:

- ``llm/stream`` (global): each conversation request is answered with the recorded
  chunks of the recorded request in the same place, paced so that each content chunk
  is logged before the next is served (so the person's inputs land between the same
  two chunks as they did); a call beside the conversation (a summary, a title) gets
  the next recorded answer of its purpose. Nothing reaches a network. Every request
  is kept, to be compared with the recorded one.
- ``tool/pre-execute`` (the agent's scope), with ``--tools recorded``: the recorded
  result answers the call, and the tool does not run.
- ``system-prompt/assemble`` (the agent's scope): each context entry's text is the
  one the log entered by that step. A context entry reports the world (the date, the
  git status, AGENTS.md), which a replay takes as input, not as the code's output.
  The system prompt names the recorded folder where it would name the scratch one,
  and a tool the recording offered that this runtime lacks is offered as recorded
  (:mod:`dsh.replay.absent`).

Inputs due at a point (before a chunk, before a tool's result) are applied there.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn

from dsh.agent import PreRequest, PromptAllow, PromptDecision, PromptSubmit
from dsh.agent_handle import AgentHandle
from dsh.kernel import Context, Disposer
from dsh.llm import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishError,
    FinishStop,
    GenerateOptions,
    LlmCallConfig,
    LlmError,
    LlmFailure,
    PluginSource,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallDelta,
    ToolSchema,
    UsageChunk,
    UserMessage,
)
from dsh.prompt import Assembly, AssemblyDraft
from dsh.replay.absent import first_definitions, stood_in
from dsh.replay.front_end import RecordedRewindAsker, ReplayHost
from dsh.replay.recorded import (
    Cancel,
    ChunkPoint,
    Edit,
    IdlePoint,
    Input,
    Kill,
    Point,
    RecordedRewind,
    Recording,
    RunCommand,
    Send,
    SetMode,
    SetOptions,
    ToolPoint,
    Withdraw,
)
from dsh.session import SessionEvent
from dsh.session.payloads import CancelByUser, InboxEnqueued, TurnFailed
from dsh.session.writer import SESSION_WRITE_FAILED
from dsh.tools import CallOutcome, ToolContext, ToolDefinition, ToolOutput
from dsh.tools.approval import ApprovalDecision, ApprovalOutcome, ApprovalRequest

_CONTENT = (BlockStart, TextDelta, ReasoningDelta, ToolCallDelta, BlockEnd)

PACE_CAP_S = 2.0
"""The longest pause between two chunks with recorded pacing: a person's coffee break
in a log is not replayed."""


class StandIn:
    def __init__(
        self,
        recording: Recording,
        *,
        recorded_tools: bool,
        pace: bool = False,
        live_after: int | None = None,
        switch: dict[str, str] | None = None,
        folder: tuple[str, str] | None = None,
    ) -> None:
        self.recording = recording
        self.live_after = live_after
        """Turns after this one go to the model for real (a fork), with ``switch``
        (``model``, ``provider``) from the first of them on."""
        self.switch = switch or {}
        self._switched = False
        self.folder = folder
        """(the scratch working folder, the recorded one): the system prompt names the
        recorded one, as the recording's did."""
        self.stood_in: dict[str, ToolSchema] = {}
        """The tools the recording offered that this runtime lacks, by name, once a
        request offered them as recorded (:mod:`dsh.replay.absent`)."""
        self._offered = first_definitions(r.options.tools for r in recording.requests)
        self.live_requests: list[GenerateOptions] = []
        self.recorded_tools = recorded_tools
        self.pace = pace
        self.requests: list[GenerateOptions] = []
        """Every conversation request the replaying loop made, in order."""
        self.side_requests: list[GenerateOptions] = []
        self.unserved: list[str] = []
        """What the recording could not answer, in words."""
        self.applied: set[Point] = set()
        self.agent: AgentHandle | None = None
        self._items: dict[str, str] = {}
        """Recorded inbox item ids to this replay's."""
        self._sides = 0
        self._calls_seen: dict[str, int] = {}
        self._logged = 0
        """Chunks logged for the current request."""
        self._logged_changed = asyncio.Event()
        self._retrying = False
        """The agent logged ``llm/retry``: the next stream is the same request again."""
        self._running: RunCommand | None = None
        """The recorded command run last (what a front end's command asks is its)."""
        self._attempt = 0
        """Of the current request: 0 its first attempt, 1 its first retry..."""
        self.hang_s = 60.0
        self.host = ReplayHost()
        self.dead = asyncio.Event()
        """The runtime reached a point where the recorded process was killed: it is
        stopped there (nothing it logs from then on is stored, nothing is served)."""
        self._root: Context | None = None
        self._kills = 0
        """How many of the recording's kills the replay has reached."""
        self._counts: Counter[str] = Counter()
        """The replay's session's events, by type."""
        self._matched: int | None = None
        """Past the next kill's anchor: how many of the events it names after it have
        been logged."""
        self._waiting: set[asyncio.Future[None]] = set()
        """Where the loop waits for what a killed process never got."""
        self._released = False

    # ------------------------------------------------------------------ wiring

    def attach(self, root: Context) -> None:
        """Serve the model's side from the recording, for every agent of ``root``."""
        from dsh.hooks import LLM_STREAM

        self._root = root
        self.dead = asyncio.Event()  # a new process: alive
        self._matched = None
        self._released = False
        root.on(LLM_STREAM, self._stream)
        if not self.recorded_tools:
            from dsh.services import APPROVALS

            # Approvals are asked of every agent on the root (the dialog's seam).
            root.get(APPROVALS).add_approver(self._approve)

    def attach_agent(self, agent: AgentHandle, ctx: Context) -> None:
        """The agent's own seams: its tool results and its context entries."""
        from dsh.hooks import (
            AGENT_PROMPT_SUBMIT,
            AGENT_REQUEST,
            SYSTEM_PROMPT_ASSEMBLE,
            TOOL_ANSWER,
        )

        self.agent = agent
        self._stand_ins_made = False
        self._standing: dict[str, Disposer] = {}
        """The stand-ins registered on this agent, by name (its scope drops them)."""
        # What a resume's store wrote before the session was handed over (a repair,
        # its end-seed) is counted too: a later kill's place counts it as recorded.
        self._counts = Counter(event.type for event in agent.session.events)
        agent.session.subscribe(self._count)
        self._front_end_commands(ctx)
        ctx.on(TOOL_ANSWER, self._answer)
        ctx.on(SYSTEM_PROMPT_ASSEMBLE, self._pin_context)
        ctx.on(AGENT_PROMPT_SUBMIT, self._pin_attached, prepend=True)
        ctx.on(AGENT_REQUEST, self._unstored, prepend=True)

    def live(self) -> bool:
        """Whether the turn running now is past the fork."""
        if self.live_after is None or self.agent is None:
            return False
        turn = self.agent.session.open_turn
        return turn is not None and turn > self.live_after

    def _count(self, event: SessionEvent) -> None:
        if event.type == "request/header":
            self._logged = 0
        elif event.type == "llm/retry":
            self._retrying = True
        elif event.type == "assistant/chunk":
            self._logged += 1
            self._logged_changed.set()
            self._at_stream_end()
        self._counts[event.type] += 1
        self._at_kill(event.type)

    # ------------------------------------------------------------------ kills

    @property
    def _kill(self) -> Kill | None:
        kills = self.recording.kills
        return kills[self._kills] if self._kills < len(kills) else None

    def _at_kill(self, kind: str) -> None:
        """Stop the runtime once it has logged what the recorded process had when it
        was killed: its last event of the loop's own (the anchor), then the others
        it wrote after that."""
        kill = self._kill
        if kill is None or self.dead.is_set() or self.live():
            return
        if self._matched is None:
            if kind == kill.anchor and self._counts[kind] == kill.count:
                self._matched = 0
        elif self._matched < len(kill.then) and kind == kill.then[self._matched]:
            self._matched += 1
        if self._matched == len(kill.then):
            self.die()

    def die(self) -> None:
        """The recorded process was killed here: its session is stored no further
        (the store writes what was logged so far and nothing after it, no closing
        events), and nothing more is served. Reached by the log's events, or, where the
        world's events the recording had after its last loop event do not come in the
        replay, when the loop asks for what the killed process never got."""
        if self.dead.is_set():
            return
        self._kills += 1
        self._matched = None
        agent, root = self.agent, self._root
        if agent is not None and root is not None:
            from dsh.services import SESSIONS

            root.get(SESSIONS).sever(agent.session)
        self.dead.set()

    async def _frozen(self) -> NoReturn:
        """Wait as a killed process does, for ever: until the replay closes the
        runtime (:meth:`release`)."""
        if not self._released:
            waiting = asyncio.get_running_loop().create_future()
            self._waiting.add(waiting)
            try:
                await waiting
            finally:
                self._waiting.discard(waiting)
        raise Killed("the runtime stopped where the recorded process was killed")

    def release(self) -> None:
        """Let the loop go from where it waits at a kill (it gets :class:`Killed`),
        so the runtime can close: what it does from then on is stored nowhere."""
        self._released = True
        for waiting in self._waiting:
            if not waiting.done():
                waiting.set_result(None)

    def _at_stream_end(self) -> None:
        """Apply what came as the stream being served ended (a cancel once the answer
        was whole, before the loop looked at it): as its last chunk is logged, since the
        loop asks nothing of the stream after its finish."""
        index = len(self.requests) - 1
        if index < 0 or index >= len(self.recording.requests) or self.live():
            return
        if self._logged == len(self.recording.requests[index].chunks):
            self.apply(ChunkPoint(index, self._logged))

    async def _until_logged(self, count: int) -> None:
        async with asyncio.timeout(self.hang_s):
            while self._logged < count:
                self._logged_changed.clear()
                await self._logged_changed.wait()

    # ------------------------------------------------------------------ inputs

    def apply(self, point: Point) -> None:
        """Apply the person's inputs the log has at ``point`` (inside a turn: a command
        among them runs beside the turn, as a front end runs one)."""
        inputs = self.recording.inputs.get(point)
        if not inputs or point in self.applied:
            return
        self.applied.add(point)
        for item in inputs:
            if isinstance(item, RunCommand):
                assert self.agent is not None
                self.agent.ctx.spawn(self._command(item), name=f"replay:/{item.name}")
            else:
                self._apply(item)

    async def apply_idle(self, point: IdlePoint) -> None:
        """Apply the inputs due while the agent is idle, each command run to its end
        before the next input, as a front end does."""
        inputs = self.recording.inputs.get(point)
        if not inputs or point in self.applied:
            return
        self.applied.add(point)
        for item in inputs:
            if isinstance(item, RunCommand):
                await self._command(item)
            else:
                self._apply(item)

    def _front_end_commands(self, ctx: Context) -> None:
        """``/rewind``, which every front end has (the session controller registers
        it), with the recorded command's outcome as the person's answers."""
        from dsh.services import COMMANDS
        from dsh.ui.rewinding import register_rewind

        register_rewind(
            ctx.get(COMMANDS),
            lambda: RecordedRewindAsker(self._rewind(), live=not self.recorded_tools),
        )

    def _rewind(self) -> RecordedRewind | None:
        running = self._running
        return None if running is None else self.recording.rewinds.get(running.command_id)

    async def _command(self, item: RunCommand) -> None:
        from dsh.commands import CommandContext
        from dsh.services import COMMANDS

        agent = self.agent
        assert agent is not None
        self._running = item
        context = CommandContext(agent=agent, root=agent.ctx, host=self.host)
        text = f"/{item.name} {item.args}".rstrip()
        if await agent.ctx.get(COMMANDS).run(text, context):
            return
        sent = self.recording.command_sends.get(item.command_id)
        if not sent:
            self.unserved.append(f"/{item.name}: no such command in this dsh")
            return
        # A command of the person's own (a Markdown file in their home or project,
        # not in the replay's scratch folders): what it sent is the world's input,
        # as a context entry's text is, and goes in as it went then.
        self.host.shown.append(f"(/{item.name} is not in this dsh: what it sent is sent again)")
        for send in sent:
            self._apply(send)

    def _apply(self, item: Input) -> None:
        agent = self.agent
        assert agent is not None
        match item:
            case Send(item_id=item_id, message=message, placement=placement):
                made = self._made_by_the_loop(message, placement)
                if made is not None:
                    self._items[item_id] = made
                    return
                sent = agent.steer(message) if placement == "steering" else agent.followup(message)
                if sent is not None:
                    self._items[item_id] = sent.id
            case Edit(item_id=item_id, message=message):
                from dsh.agent_handle import Edit as EditAction

                mine = self._items.get(item_id)
                if mine is not None:
                    agent.update_inbox(mine, EditAction(message.content))
            case Withdraw(item_id=item_id):
                from dsh.agent_handle import Remove

                mine = self._items.get(item_id)
                if mine is not None:
                    agent.update_inbox(mine, Remove())
            case Cancel():
                agent.cancel(CancelByUser())
            case SetMode(mode=mode):
                from dsh.services import APPROVALS

                agent.ctx.get(APPROVALS).mode = mode
            case SetOptions(changes=changes):
                agent.set_options(**changes)

    def _made_by_the_loop(self, message: UserMessage, placement: str) -> str | None:
        """The item the replaying loop queued itself with the same message, not yet
        matched to a recorded one (a Stop hook's "go on", which the log holds as it
        holds a person's steering): the hook, run again, has sent it already, and
        sending the recorded one too would ask the model twice."""
        agent = self.agent
        assert agent is not None
        taken = set(self._items.values())
        for event in agent.session.events:
            data = event.data
            if (
                isinstance(data, InboxEnqueued)
                and data.item_id not in taken
                and data.placement == placement
                and data.message.content == message.content
            ):
                return data.item_id
        return None

    # ------------------------------------------------------------------ the model

    async def _unstored(
        self, request: PreRequest, next: Callable[..., Awaitable[LlmCallConfig]]
    ) -> LlmCallConfig:
        """The recorded turn stopped here because its log could not be written (a
        full disk): the replay's storage is sound, so the stop is the world's input,
        served as recorded, where the recording has no more requests for the turn."""
        index = len(self.requests)
        turn = request.agent.session.open_turn
        if not self.live() and turn is not None and turn <= len(self.recording.turn_ends):
            end = self.recording.turn_ends[turn - 1].reason
            asked = index < len(self.recording.requests)
            if (
                isinstance(end, TurnFailed)
                and end.error.code == SESSION_WRITE_FAILED
                and not (asked and self.recording.requests[index].turn == turn)
            ):
                raise LlmError(end.error)
        return await next()

    async def _stream(
        self,
        options: GenerateOptions,
        next: Callable[..., Awaitable[AsyncIterator[StreamChunk]]],
    ) -> AsyncIterator[StreamChunk]:
        if options.purpose is not None:
            self.side_requests.append(options)
            return self._side(options)
        if self.live():
            self.live_requests.append(options)
            return await next()
        if self._retrying:
            # The service tries the request it just made again (it logged llm/retry):
            # the next recorded attempt, not a request of its own.
            self._retrying = False
            self._attempt += 1
            return self._serve(len(self.requests) - 1, self._attempt)
        index = len(self.requests)
        self.requests.append(options)
        self._attempt = 0
        return self._serve(index, 0)

    async def _serve(self, index: int, attempt: int) -> AsyncIterator[StreamChunk]:
        if self.dead.is_set():
            await self._frozen()
        if index >= len(self.recording.requests):
            text = f"the recording has no request {index + 1} (it has {index})"
            self.unserved.append(text)
            yield Finish(reason=FinishError(failure=LlmFailure(message=text, code="REPLAY")))
            return
        recorded = self.recording.requests[index]
        if attempt < len(recorded.failures):
            # An attempt that failed before any content, as it did (the service retries
            # it, or not: what this dsh does with the failure is what is compared).
            yield Finish(reason=FinishError(failure=recorded.failures[attempt]))
            return
        started = False
        previous_time: int | None = None
        for position, chunk in enumerate(recorded.chunks):
            point = ChunkPoint(index, position)
            if started:
                # Served one at a time: the loop logs each before the next comes, so
                # a chunk is logged as it was and inputs land where they did.
                await self._until_logged(position)
            if self.pace and previous_time is not None:
                pause = (recorded.times[position] - previous_time) / 1000
                await asyncio.sleep(min(max(pause, 0.0), PACE_CAP_S))
            previous_time = recorded.times[position]
            if self.dead.is_set():
                await self._frozen()
            self.apply(point)
            if isinstance(chunk, _CONTENT):
                started = True
            yield chunk
        kill = self._kill
        if self.dead.is_set() or (kill is not None and kill.request == index):
            # The stream the recorded process was killed in: it never ended.
            self.die()
            await self._frozen()

    async def _side(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        if self.dead.is_set():
            await self._frozen()
        purpose = str(options.purpose)
        answers = [a for a in self.recording.side_answers if a.purpose == purpose]
        served = sum(1 for o in self.side_requests[:-1] if str(o.purpose) == purpose)
        if served >= len(answers):
            text = f"the recording has no answer for {purpose} call {served + 1}"
            self.unserved.append(text)
            yield Finish(reason=FinishError(failure=LlmFailure(message=text, code="REPLAY")))
            return
        answer = answers[served]
        block = TextBlock(text=answer.text)
        yield BlockStart(index=0, block_type="text")
        yield TextDelta(index=0, text=answer.text)
        yield BlockEnd(index=0, block=block)
        if answer.usage is not None:
            yield UsageChunk(usage=answer.usage)
        yield Finish(reason=FinishStop())

    # ------------------------------------------------------------------ tools

    async def _answer(
        self, tool: ToolDefinition, arguments: Any, context: ToolContext
    ) -> CallOutcome | None:
        if self.live():
            return None  # past the fork the calls are the new model's: they run
        call_id = str(context.call_id)
        occurrence = self._calls_seen.get(call_id, 0)
        self._calls_seen[call_id] = occurrence + 1
        recorded = self.recording.result_for(call_id, occurrence)
        if self.dead.is_set() or (recorded is not None and recorded.repaired):
            # The recorded process was killed while this call ran, or before it did:
            # it does not run, and no result comes.
            self.die()
            await self._frozen()
        if not self.recorded_tools:
            return None  # the tool runs
        self.apply(ToolPoint(call_id, occurrence))
        if recorded is None or recorded.result is None:
            text = f"the recording has no result for call {call_id} ({tool.name})"
            self.unserved.append(text)
            from dsh.llm import tool_result

            message = tool_result(context.call_id, f"Error: {text}", is_error=True)
            return CallOutcome(message, "REPLAY")
        result = recorded.result
        message = result.message
        block = message.result
        output = ToolOutput(content=block.content, is_error=bool(block.is_error), meta=result.meta)
        code = result.error.code if result.error is not None else None
        return CallOutcome(message, code, output)

    async def _approve(self, request: ApprovalRequest) -> ApprovalDecision:
        """With live tools, each call is approved or denied as it was: the recorded
        outcome, whoever gave it (the person, a rule, the mode); a call the log shows
        no decision for ran unasked, and is let run."""
        recorded = self.recording.approvals.get(request.call_id, "allow-once")
        outcome: ApprovalOutcome = {
            "allow-once": "allow_once",
            "allow-session": "allow_session",
            "deny": "deny",
        }.get(recorded, "allow_once")  # type: ignore[assignment]
        return ApprovalDecision(outcome=outcome)

    # ------------------------------------------------------------------ context

    async def _pin_attached(
        self, submit: PromptSubmit, next: Callable[..., Awaitable[PromptDecision]]
    ) -> PromptDecision:
        """What the listeners add to a prompt from the world (a mentioned file as it
        was, its listing), as the log entered it: each plugin the log shows adding
        something to this prompt has its additions replaced by the recorded ones; what
        a plugin the log never heard from adds stays (a difference to show).

        Before them, what is due as the prompt is about to open a turn: a fork's switch
        of model, and the options or mode the log changed between the last turn and
        this one where the loop went on without waiting (a queued prompt). After them
        (an MCP server's tools are known once they let the prompt through), the
        stand-ins for the recorded tools this runtime lacks."""
        self._before_turn(submit.agent)
        decision = await next()
        self._make_stand_ins()
        prompt = str(submit.message.id)
        recorded = self.recording.prompt_contexts.get(prompt)
        if not isinstance(decision, PromptAllow) or recorded is None:
            return decision
        plugins = {_plugin_of(m) for m in recorded}
        kept = [m for m in decision.additional_contexts if _plugin_of(m) not in plugins]
        decision = dataclasses.replace(decision, additional_contexts=(*recorded, *kept))
        # What a listener attached to the prompt's own content came from the world (an
        # image pasted in the TUI, which this replay never pastes): the log's content,
        # unless a listener here changes the content itself (a difference to show).
        content = self.recording.prompt_contents.get(prompt)
        if decision.content is None and content is not None and content != submit.message.content:
            decision = dataclasses.replace(decision, content=content)
        return decision

    def _before_turn(self, agent: AgentHandle) -> None:
        session = agent.session
        if (
            self.live_after is not None
            and self.switch
            and not self._switched
            and session.last_turn == self.live_after
        ):
            # Logged (``agent/options``) before the turn starts, as a person's switch
            # between turns is: a replay of the fork switches there too.
            self._switched = True
            agent.set_options(**self.switch)
        point = IdlePoint(self._counts["turn/end"])  # counted as logged: no reread
        inputs = self.recording.inputs.get(point, [])
        if (
            inputs
            and point.turns not in self.recording.resumes
            and all(isinstance(item, SetOptions | SetMode) for item in inputs)
        ):
            # The loop did not wait between the turns (the prompt was queued), so the
            # run's wait for idleness comes only after this turn: applied now, where
            # the log has them.
            self.apply(point)

    def _make_stand_ins(self) -> None:
        """Register a stand-in for each tool the recording offered that this runtime
        lacks, on the agent (once an agent): offered by :meth:`_pin_context` in the
        requests whose recorded ones offered it."""
        agent = self.agent
        if agent is None or self._stand_ins_made:
            return
        self._stand_ins_made = True
        from dsh.services import TOOLS

        tools = agent.ctx.get(TOOLS)
        for name, schema in self._offered.items():
            if name in tools:
                continue
            self._standing[name] = tools.register(stood_in(schema))

    async def _offered_now(self, tools: tuple[ToolSchema, ...]) -> tuple[ToolSchema, ...]:
        """``tools`` with each stand-in the recorded request in this place did not
        offer taken out (past a fork: the last replayed request's), and any whose tool
        has come since (a server that added it later) replaced by it: a stand-in never
        hides the definition this dsh gives."""
        agent = self.agent
        if agent is None or not self._standing:
            return tools
        from dsh.services import TOOLS

        service = agent.ctx.get(TOOLS).service
        for name in list(self._standing):
            real = service.get(name, None)  # registered for every agent: not a stand-in
            if real is not None:
                gone = self._standing.pop(name)()
                if gone is not None:
                    await gone
                tools = tuple(real.schema if tool.name == name else tool for tool in tools)
        stand_ins = set(self._standing)
        index = len(self.requests) - 1 if self.live() else len(self.requests)
        index = min(index, len(self.recording.requests) - 1)
        recorded = self.recording.requests[index].options.tools or () if index >= 0 else ()
        keep = {tool.name for tool in recorded}
        offered = tuple(t for t in tools if t.name not in stand_ins or t.name in keep)
        for tool in offered:
            if tool.name in stand_ins:
                self.stood_in.setdefault(tool.name, tool)
        return offered

    def _named(self, text: str) -> str:
        """``text`` naming the recorded folder where it names the scratch one."""
        if self.folder is None:
            return text
        scratch, recorded = self.folder
        return text.replace(scratch, recorded)

    def _named_tool(self, tool: ToolSchema) -> ToolSchema:
        """``tool``, copied only where its description names the scratch folder."""
        named = self._named(tool.description)
        return tool if named == tool.description else tool.model_copy(update={"description": named})

    async def _pin_context(
        self, draft: AssemblyDraft, next: Callable[..., Awaitable[Assembly]]
    ) -> Assembly:
        assembly = await next()
        agent = self.agent
        if agent is None:
            return assembly
        # The folder the recording worked in, where the prompt names this replay's: a
        # fork's later turns are sent so and a kept fork reads as if it ran there (the
        # two paths are as long, so what the loop measures is the same).
        assembly = dataclasses.replace(
            assembly,
            system=self._named(assembly.system),
            tools=tuple(self._named_tool(tool) for tool in await self._offered_now(assembly.tools)),
        )
        step = sum(1 for e in agent.session.events if e.type == "step/start") + 1
        known = self.recording.context_at(step)
        # The entries the log knows, as it entered them, in the order it first did;
        # then any entry this dsh adds that the log never had (a difference to show).
        pinned = [(name, form, text) for name, (form, text) in known.items()]
        pinned.extend(entry for entry in assembly.context if entry[0] not in known)
        return dataclasses.replace(assembly, context=tuple(pinned))


class Killed(Exception):
    """Raised where the replaying loop waited when its runtime was stopped at a kill:
    the runtime is being closed, and whatever the loop logs now is stored nowhere."""


def _plugin_of(message: UserMessage) -> str | None:
    source = message.source
    return source.plugin if isinstance(source, PluginSource) else None
