"""web_search and web_fetch end to end: ``dsh -p`` as a child process, the scripted
server standing in for DeepSeek (chat, Search and Fetch), the requests it logged, the
stored session and ``/cost``."""

from __future__ import annotations

from typing import Any

from dsh.testing import FakeLLM, Page, Reply, SearchResult, ToolCallSpec
from tests.e2e.harness import SETTINGS, Dsh, of_type, text_of
from tests.support.web_server import Answer, PageServer


def tool_outputs(server: FakeLLM) -> list[str]:
    """The tool results the last request sent (each request carries all before it)."""
    last = server.chat_requests[-1].body
    return [text_of(message) for message in last["messages"] if message["role"] == "tool"]


def call(name: str, **arguments: Any) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name=name, arguments=arguments)])


def settings(dsh: Dsh, extra: str) -> None:
    (dsh.home / "settings.toml").write_text(SETTINGS + extra)


async def test_search_and_fetch_go_to_deepseek_with_the_users_key_and_are_priced(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    settings(dsh, '[permissions]\nallow = ["web_fetch(docs.example.com)"]\n')
    fake_llm.script.search_results.append(
        SearchResult(
            title="dsh 2.0 released",
            url="https://docs.example.com/news",
            summary="Adds web tools.",
            site_name="Example",
            date="2026-12-01",
        )
    )
    fake_llm.script.pages["https://docs.example.com/news"] = Page(
        title="News", content="# News\n\nWeb tools arrived."
    )
    fake_llm.add(
        call("web_search", query="dsh release", count=3),
        call("web_fetch", url="https://docs.example.com/news"),
        Reply(text="dsh 2.0 adds web tools."),
    )

    done = await dsh.run("-p", "what is new in dsh?", "--output-format", "json")

    assert done.code == 0, done.stderr
    [search] = fake_llm.search_requests
    [fetch] = fake_llm.fetch_requests
    for request in (search, fetch):
        assert request.headers["authorization"] == "Bearer sk-test"
    assert search.body == {"query": "dsh release", "count": 3, "need_content": False}
    assert fetch.body == {"url": "https://docs.example.com/news"}
    found, page = tool_outputs(fake_llm)
    assert "1. dsh 2.0 released (Example, 2026-12-01)" in found
    assert "https://docs.example.com/news" in found
    assert page.startswith("# News\nURL: https://docs.example.com/news")
    assert "Web tools arrived." in page
    [result] = done.json_lines()
    assert result["costUsd"] > 0.0015  # the two requests, at $0.75 per 1,000, and tokens

    events = await dsh.checked_events()
    logged = [event.data for event in of_type(events, "web/request")]
    assert [(w.tool, w.backend, w.ok, w.cost) for w in logged] == [
        ("search", "provider", True, 0.00075),
        ("fetch", "provider", True, 0.00075),
    ]

    [session_id] = await dsh.session_ids()
    cost = await dsh.run("-p", "/cost", "--resume", session_id)
    assert cost.code == 0, cost.stderr
    assert "web search: 1 request $0.0008" in cost.stdout
    assert "web fetch: 1 request $0.0008" in cost.stdout


async def test_fetch_asks_per_domain_so_headless_default_mode_refuses_it(
    dsh: Dsh, fake_llm: FakeLLM
) -> None:
    settings(dsh, '[permissions]\nallow = ["web_fetch(docs.example.com)"]\n')
    fake_llm.script.pages["https://elsewhere.example/x"] = Page(content="never read")
    fake_llm.add(
        call("web_fetch", url="https://elsewhere.example/x"),
        Reply(text="Could not read it."),
    )

    done = await dsh.run("-p", "read elsewhere")

    assert done.code == 0, done.stderr
    assert fake_llm.fetch_requests == []  # not granted: asked, and no one could answer
    [output] = tool_outputs(fake_llm)
    assert "approval" in output.lower() or "permission" in output.lower()


async def test_deny_rules_stop_both_tools_even_in_bypass_mode(dsh: Dsh, fake_llm: FakeLLM) -> None:
    settings(dsh, '[permissions]\ndeny = ["web_search", "web_fetch(*.evil.example)"]\n')
    fake_llm.add(
        Reply(
            tool_calls=[
                ToolCallSpec(name="web_search", arguments={"query": "x"}),
                ToolCallSpec(name="web_fetch", arguments={"url": "https://a.evil.example/"}),
            ]
        ),
        Reply(text="Both were denied."),
    )

    done = await dsh.run("-p", "go", "--permission-mode", "bypass")

    assert done.code == 0, done.stderr
    assert fake_llm.search_requests == []
    assert fake_llm.fetch_requests == []
    assert all("denied by the rule" in output for output in tool_outputs(fake_llm))


async def test_search_runs_unasked_in_read_only_mode(dsh: Dsh, fake_llm: FakeLLM) -> None:
    fake_llm.add(call("web_search", query="python 3.14"), Reply(text="No results."))

    done = await dsh.run("-p", "search", "--permission-mode", "read-only")

    assert done.code == 0, done.stderr
    assert len(fake_llm.search_requests) == 1
    assert tool_outputs(fake_llm) == ["No results for 'python 3.14'."]


async def test_loopback_is_refused_before_anything_is_sent(dsh: Dsh, fake_llm: FakeLLM) -> None:
    async with PageServer(pages={"/": Answer(body=b"admin panel")}) as local:
        fake_llm.add(
            call("web_fetch", url=local.url("/")),
            call("web_fetch", url="http://[::1]/"),
            Reply(text="Refused."),
        )

        done = await dsh.run("-p", "read it", "--permission-mode", "bypass")

        assert done.code == 0, done.stderr
        assert local.requests == []
        assert fake_llm.fetch_requests == []  # not even handed to DeepSeek's fetch
        first, second = tool_outputs(fake_llm)
        assert "refused: 127.0.0.1 is a loopback address" in first
        assert "refused: ::1 is a loopback address" in second


async def test_local_fetch_refuses_a_redirect_to_loopback(dsh: Dsh, fake_llm: FakeLLM) -> None:
    async with PageServer(host="127.0.0.2", pages={"/": Answer(body=b"internal")}) as inside:
        hop = Answer(302, headers=(("Location", f"http://127.0.0.1:{inside.port}/"),))
        async with PageServer(host="127.0.0.3", pages={"/go": hop}) as outside:
            # The first host is let through by name, as an intranet host would be.
            settings(
                dsh,
                f'[plugins.web]\nfetch = "local"\nprivate_hosts = ["127.0.0.3:{outside.port}"]\n',
            )
            fake_llm.add(call("web_fetch", url=outside.url("/go")), Reply(text="Refused."))

            done = await dsh.run("-p", "read it", "--permission-mode", "bypass")

        assert done.code == 0, done.stderr
        assert [path for _, path, _ in outside.requests] == ["/go"]
        assert inside.requests == []
        [output] = tool_outputs(fake_llm)
        assert "redirects to http://127.0.0.1" in output
        assert "loopback" in output
