"""What a server offers, read whole and kept in step: its lists and their changes.

:func:`every_page` reads a paginated list (tools, prompts, resources) to its last
page; :data:`LIST_CHANGES` says which list a change names (the ``list_changed``
notification of protocols up to 2025-11-25, the ``subscriptions/listen`` event of
2026-07-28); :func:`chosen` applies a server's ``include_tools`` and
``exclude_tools``. Imports the SDK: loaded with :mod:`dsh_plugins.mcp.connection`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, TypeVar

from mcp import types
from mcp.client.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged

ListKind = Literal["tools", "prompts", "resources"]
LIST_CHANGES: dict[type, ListKind] = {
    # the notification of protocols up to 2025-11-25, then the 2026-07-28 event
    types.ToolListChangedNotification: "tools",
    types.PromptListChangedNotification: "prompts",
    types.ResourceListChangedNotification: "resources",
    ToolsListChanged: "tools",
    PromptsListChanged: "prompts",
    ResourcesListChanged: "resources",
}
"""The list a change notification or subscription event names."""


_Page = TypeVar("_Page", types.ListToolsResult, types.ListPromptsResult, types.ListResourcesResult)
_Item = TypeVar("_Item")


async def every_page(
    list_page: Callable[..., Awaitable[_Page]],
    items: Callable[[_Page], list[_Item]],
    *,
    limit: int | None = None,
) -> list[_Item]:
    """Every item of a paginated list, following ``next_cursor`` to the last page (or
    the page that brings ``limit`` items)."""
    found: list[_Item] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await list_page(params=params)
        found.extend(items(page))
        cursor = page.next_cursor
        if not cursor or (limit is not None and len(found) >= limit):
            return found


def chosen(
    tools: list[types.Tool], include: Sequence[str] | None, exclude: Sequence[str]
) -> list[types.Tool]:
    """The tools a server's configuration keeps: matching an ``include`` pattern (all,
    when there is no ``include``) and no ``exclude`` pattern."""
    return [
        tool
        for tool in tools
        if (include is None or any(fnmatch.fnmatchcase(tool.name, p) for p in include))
        and not any(fnmatch.fnmatchcase(tool.name, p) for p in exclude)
    ]
