"""dsh.llm.prefix: what keeps a request from beginning as the one before it did, and
the words dsh says about it."""

from __future__ import annotations

from dsh.llm import GenerateOptions, ToolSchema, prefix_changes, user_text
from dsh.session import CacheIdle, PrefixChanged, PromptCost


def _tool(name: str, description: str = "does a thing") -> ToolSchema:
    return ToolSchema(name=name, description=description, parameters={"type": "object"})


def _request(**changes: object) -> GenerateOptions:
    base: dict[str, object] = {
        "provider": "deepseek",
        "model": "deepseek-flash",
        "system": "You are dsh.\n\nEnvironment: /work",
        "tools": (_tool("read"), _tool("write")),
        "messages": HISTORY,
    }
    return GenerateOptions.model_validate(base | changes)


HISTORY = (user_text("one"), user_text("two"), user_text("three"))


def test_a_request_that_extends_the_one_before_changes_nothing() -> None:
    before = _request()
    # Equal messages that are other objects (a history read again) still match.
    after = _request(messages=(*(m.model_copy() for m in HISTORY), user_text("four")))
    assert prefix_changes(before, after) == ()


def test_each_part_is_named_with_what_changed() -> None:
    before = _request()
    model = prefix_changes(before, _request(model="deepseek-v4-pro"))
    assert [(c.part, c.detail) for c in model] == [
        ("model", "deepseek/deepseek-flash → deepseek/deepseek-v4-pro")
    ]
    system = prefix_changes(before, _request(system="You are dsh.\n\nPlan mode: propose."))
    assert [(c.part, c.detail) for c in system] == [
        ("system", "changed from “Plan mode: propose.”")
    ]
    tools = prefix_changes(before, _request(tools=(_tool("read", "reads"), _tool("mcp__x__y"))))
    assert [(c.part, c.detail) for c in tools] == [("tools", "+mcp__x__y, -write, read changed")]
    order = prefix_changes(before, _request(tools=(_tool("write"), _tool("read"))))
    assert [c.detail for c in order] == ["the same tools in another order"]
    rewritten = prefix_changes(
        before, _request(messages=(HISTORY[0], user_text("summary"), HISTORY[2]))
    )
    assert [(c.part, c.detail) for c in rewritten] == [
        ("history", "rewritten from message 2 of 3 on")
    ]
    cut = prefix_changes(before, _request(messages=HISTORY[:1]))
    assert [c.detail for c in cut] == ["cut to 1 of 3 messages"]
    both = prefix_changes(before, _request(model="other", messages=()))
    assert [c.part for c in both] == ["model", "history"]


def test_the_notices_say_what_is_read_without_the_cache() -> None:
    [change] = prefix_changes(_request(), _request(model="deepseek-v4-pro"))
    cost = PromptCost(tokens=84_213, uncached=0.02526, cached=0.000505)
    whole = PrefixChanged(turn=3, step=1, changes=(change,), cost=cost).notice()
    assert whole == (
        "The prompt cache starts over (the model: deepseek/deepseek-flash → "
        "deepseek/deepseek-v4-pro): this request reads about 84,213 tokens without the "
        "cache: about $0.0253 (from the cache, $0.0005)."
    )
    [history] = prefix_changes(_request(), _request(messages=HISTORY[:2]))
    kept = PrefixChanged(
        turn=3, step=1, changes=(history,), kept_messages=2, cost=PromptCost(tokens=12)
    ).notice()
    assert kept.startswith("The prompt cache holds only the first 2 messages (the conversation:")
    assert kept.endswith("this request reads about 12 tokens without the cache.")
    none_kept = PrefixChanged(
        turn=3, step=1, changes=(history,), kept_messages=0, cost=PromptCost(tokens=12)
    ).notice()
    assert none_kept.startswith("The prompt cache holds only the system prompt and tools")
    tiny = PromptCost(tokens=10, uncached=0.00003, cached=0.0000006).phrase()
    assert tiny == "about 10 tokens without the cache"  # too little money to name
    small_hit = PromptCost(tokens=1000, uncached=0.0003, cached=0.000006).phrase()
    assert small_hit.endswith("about $0.0003 (from the cache, under $0.0001)")
    idle = CacheIdle(turn=4, idle_s=2 * 3600 + 5 * 60, cost=cost).notice()
    assert idle.startswith("2 h 5 min since the last request: the provider may have dropped")
    assert CacheIdle(turn=4, idle_s=3 * 86_400, cost=cost).notice().startswith("3 d since")
