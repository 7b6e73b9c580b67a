"""DeepSeek's Search and Fetch through the real chat-completions adapter, against the
scripted server: what is sent (and with which key), how answers and errors read, and
that a request made with the provider's key cannot leave the provider's base URL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dsh.credentials import KeyDestination
from dsh.llm import LlmError
from dsh.testing import FakeLLM, Page, SearchResult
from dsh_plugins._shared.chat_completions import ChatCompletionsAdapter
from dsh_plugins.web.deepseek import DeepSeekWeb, WebApiError, versioned


@pytest.fixture
async def adapter(fake_llm: FakeLLM) -> AsyncIterator[ChatCompletionsAdapter]:
    made = ChatCompletionsAdapter(
        base_url=fake_llm.base_url, models={}, api_key=lambda: "sk-user-key"
    )
    yield made
    await made.aclose()


async def test_a_search_sends_the_query_with_the_users_key(
    fake_llm: FakeLLM, adapter: ChatCompletionsAdapter
) -> None:
    fake_llm.script.search_results.extend(
        [
            SearchResult(
                title="Release notes",
                url="https://example.com/notes",
                summary="Version 2 is out.",
                date="2026-11-30",
                rerank_score=2.5,
                content="Full text",
            ),
            SearchResult(title="Other", url="https://example.org/"),
        ]
    )
    web = DeepSeekWeb(adapter, "deepseek", timeout_s=10)

    hits = await web.search("site:example.com release", count=5, need_content=False, question=None)

    [request] = fake_llm.search_requests
    assert request.path == "/v1/tools/search"
    assert request.headers["authorization"] == "Bearer sk-user-key"
    assert request.body == {"query": "site:example.com release", "count": 5, "need_content": False}
    assert [hit.title for hit in hits] == ["Release notes", "Other"]
    assert hits[0].content is None  # not asked for
    assert hits[0].rerank_score == 2.5


async def test_a_fetch_reads_the_page_as_markdown(
    fake_llm: FakeLLM, adapter: ChatCompletionsAdapter
) -> None:
    fake_llm.script.pages["https://example.com/a"] = Page(title="A", content="# A\n\ntext")
    web = DeepSeekWeb(adapter, "deepseek", timeout_s=10)

    page = await web.fetch("https://example.com/a")

    assert (page.title, page.content) == ("A", "# A\n\ntext")
    [request] = fake_llm.fetch_requests
    assert request.body == {"url": "https://example.com/a"}
    assert request.headers["authorization"] == "Bearer sk-user-key"


async def test_errors_from_the_api_are_clear(
    fake_llm: FakeLLM, adapter: ChatCompletionsAdapter
) -> None:
    web = DeepSeekWeb(adapter, "deepseek", timeout_s=10)
    with pytest.raises(WebApiError, match=r"404: cannot fetch https://nowhere.example/"):
        await web.fetch("https://nowhere.example/")


@pytest.mark.parametrize(
    "path",
    [
        "https://evil.example/collect",
        "//evil.example/collect",
        "../../evil",
        "v1/../../x",
        "v1/tools/search?x=https://evil",
        "/v1/tools/search",
        "v1//tools",
        "",
    ],
)
async def test_a_path_cannot_take_the_key_off_the_base_url(
    fake_llm: FakeLLM, adapter: ChatCompletionsAdapter, path: str
) -> None:
    with pytest.raises(LlmError) as raised:
        await adapter.post_json("deepseek", path, {}, timeout_s=5)
    assert raised.value.code == "BAD_PATH"
    assert fake_llm.requests == []


async def test_a_key_withheld_from_a_project_chosen_address_is_not_sent(
    fake_llm: FakeLLM,
) -> None:
    # A project's settings pointed the provider at this server: the key stays home.
    adapter = ChatCompletionsAdapter(
        base_url=fake_llm.base_url,
        models={},
        api_key=lambda: "sk-user-key",
        key_destination=KeyDestination("https://api.deepseek.com"),
    )
    try:
        web = DeepSeekWeb(adapter, "deepseek", timeout_s=5)
        with pytest.raises(WebApiError, match=r"sent only to https://api.deepseek.com"):
            await web.search("anything", count=1, need_content=False, question=None)
    finally:
        await adapter.aclose()
    assert fake_llm.requests == []


def test_tools_live_under_v1_whichever_base_url() -> None:
    assert versioned("tools/search", "https://api.deepseek.com") == "v1/tools/search"
    assert versioned("tools/search", "https://api.deepseek.com/v1") == "tools/search"
    assert versioned("tools/search", "https://proxy.example/deepseek/v1/") == "tools/search"
