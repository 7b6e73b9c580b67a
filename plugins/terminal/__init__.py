"""Programs in pseudo-terminals: the ``terminal_*`` tools and the ``terminals`` service.

A terminal runs one program (an interactive bash by default) in a pty sized like a
real screen. The model types text and named keys, reads the output (waiting for
quiet, a pattern or the exit), looks at the rendered screen of full-screen programs,
and sends signals. Terminals belong to the session that opened them and are closed,
with everything they started, when it ends. UIs can paint a terminal's screen from
the ``terminals`` service, or from the screen each tool result carries.

Modules: ``keys`` (named keys), ``terminal`` (one pty, its screen and its log),
``tools`` (the tools and the service).
"""

from __future__ import annotations

from dsh.agent import AgentHandle
from dsh.hooks import AGENT_DISPOSED
from dsh.kernel import Context, Plugin, ServiceKey
from dsh.services import SETTINGS, TOOLS
from dsh.tools import user_passthrough
from dsh_plugins.terminal.tools import Settings, Terminals, terminal_tools

TERMINALS: ServiceKey[Terminals] = ServiceKey("terminals")


def apply(ctx: Context, config: Settings) -> None:
    service = Terminals(config, user_passthrough(ctx.get(SETTINGS, None)))
    ctx.effect(lambda: service.aclose)
    ctx.provide(TERMINALS, service)
    for tool in terminal_tools(service):
        ctx.get(TOOLS).register(tool.name, tool)

    def on_disposed(agent: AgentHandle) -> None:
        ctx.spawn(service.close_owner(str(agent.id)), name="terminal:close-owner")

    ctx.on(AGENT_DISPOSED, on_disposed)


plugin = Plugin(
    name="terminal",
    description="Programs in pseudo-terminals: terminal_open, _send, _read, _snapshot, ...",
    inject=(TOOLS,),
    optional=(SETTINGS,),
    provides=(TERMINALS,),
    config=Settings,
    apply=apply,
)
