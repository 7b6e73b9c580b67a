"""Web tools: ``web_search`` and ``web_fetch``.

Search is DeepSeek's Search API; fetch is DeepSeek's Fetch API when the session talks
to DeepSeek, else made from this machine with the address checks of
:mod:`dsh_plugins.web.addresses`. Settings are ``[plugins.web]`` (:class:`Config`);
``docs/web.md`` has them all.

Modules: ``addresses`` (which hosts a local fetch may reach), ``local`` (the local
fetch), ``markdown`` (pages to Markdown), ``deepseek`` (the provider's Search and Fetch),
``events`` (the priced ``web/request`` event), ``tools`` (the two tools).
"""

from __future__ import annotations

from dsh.kernel import Context, Plugin
from dsh.services import LLM, TOOLS
from dsh.session import register_events
from dsh_plugins.web.events import WEB_REQUEST, WebRequest
from dsh_plugins.web.tools import Config, WebTools, definitions

__all__ = ["WEB_REQUEST", "Config", "WebRequest", "WebTools", "plugin"]


def vocabulary(ctx: Context) -> None:
    register_events(ctx, WEB_REQUEST)


def apply(ctx: Context, config: Config) -> None:
    for tool in definitions(WebTools(ctx, config)):
        ctx.get(TOOLS).register(tool.name, tool)


plugin = Plugin(
    name="web",
    description="web_search (DeepSeek Search) and web_fetch (DeepSeek Fetch, or local)",
    inject=(TOOLS, LLM),
    config=Config,
    vocabulary=vocabulary,
    apply=apply,
)
