"""web_fetch from this machine: the address checks, redirects, types and limits, with
real sockets on loopback addresses (127.0.0.2 stands for a second host)."""

from __future__ import annotations

import ipaddress

import pytest

from dsh_plugins.web.addresses import BlockedAddress, resolve_public, why_private
from dsh_plugins.web.local import FetchError, LocalFetcher, Page, Redirected
from dsh_plugins.web.markdown import html_to_markdown
from tests.support.web_server import Answer, PageServer

PRIVATE = [
    "127.0.0.1",
    "127.5.5.5",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "169.254.1.1",
    "100.64.0.1",
    "100.100.100.200",
    "0.0.0.0",
    "224.0.0.1",
    "255.255.255.255",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fd00:ec2::254",
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "64:ff9b::7f00:1",
    "2002:7f00:1::1",
    "ff02::1",
]
PUBLIC = ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"]


@pytest.mark.parametrize("text", PRIVATE)
def test_private_addresses_are_named_as_such(text: str) -> None:
    assert why_private(ipaddress.ip_address(text)) is not None


@pytest.mark.parametrize("text", PUBLIC)
def test_public_addresses_pass(text: str) -> None:
    assert why_private(ipaddress.ip_address(text)) is None


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "[::1]", "localhost", "LOCALHOST.", "metadata.google.internal", "a.localhost"],
)
async def test_local_hosts_are_refused_before_any_lookup(host: str) -> None:
    with pytest.raises(BlockedAddress):
        await resolve_public(host, 80, allow_private=False)


async def test_a_name_that_resolves_to_loopback_is_refused() -> None:
    # Resolution answers 127.0.0.1 for "localhost" too; checked by address as well as name.
    with pytest.raises(BlockedAddress, match=r"loopback|local name"):
        await resolve_public("localhost", 80, allow_private=False)
    resolved = await resolve_public("localhost", 80, allow_private=True)
    assert resolved.address.is_loopback


async def test_loopback_is_refused_without_connecting() -> None:
    async with PageServer(pages={"/": Answer(body=b"secret")}) as server:
        fetcher = LocalFetcher()
        for url in (server.url("/"), f"http://localhost:{server.port}/"):
            with pytest.raises(FetchError, match=r"refused"):
                await fetcher.fetch(url)
        assert server.requests == []  # the side effect that matters: nothing reached it


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file:///etc/passwd", "only http and https"),
        ("ftp://example.com/x", "only http and https"),
        ("gopher://127.0.0.1:25/", "only http and https"),
        ("http://user:pw@example.com/", "user name or password"),
        ("not a url", "only http and https|not a URL|no host"),
    ],
)
async def test_other_schemes_and_credentials_are_refused(url: str, message: str) -> None:
    with pytest.raises(FetchError, match=message):
        await LocalFetcher().fetch(url)


async def test_a_private_host_named_in_settings_is_fetched_as_markdown() -> None:
    html = (
        b"<html><head><title>Docs</title><script>steal()</script></head>"
        b"<body><nav>menu</nav><main><h1>Install</h1><p>Run <code>pip</code>.</p>"
        b"<ul><li>one</li></ul></main></body></html>"
    )
    async with PageServer(pages={"/docs": Answer(body=html)}) as server:
        fetcher = LocalFetcher(private_hosts=(f"127.0.0.1:{server.port}",))
        page = await fetcher.fetch(server.url("/docs"))
    assert isinstance(page, Page)
    assert page.title == "Docs"
    assert "# Install" in page.text
    assert "`pip`" in page.text
    assert "- one" in page.text
    assert "steal" not in page.text
    headers = server.requests[0][2]
    assert headers["host"] == f"127.0.0.1:{server.port}"


async def test_a_redirect_on_the_same_host_is_followed_and_checked() -> None:
    pages = {
        "/old": Answer(301, headers=(("Location", "/new"),)),
        "/new": Answer(body=b"moved here", headers=(("Content-Type", "text/plain"),)),
    }
    async with PageServer(pages=pages) as server:
        fetcher = LocalFetcher(private_hosts=("127.0.0.1",))
        page = await fetcher.fetch(server.url("/old"))
    assert isinstance(page, Page)
    assert page.text == "moved here"
    assert page.url.endswith("/new")
    assert [path for _, path, _ in server.requests] == ["/old", "/new"]


async def test_a_redirect_to_a_private_host_is_refused_and_never_reached() -> None:
    async with PageServer(host="127.0.0.2", pages={"/": Answer(body=b"internal")}) as inside:
        hop = Answer(302, headers=(("Location", inside.url("/")),))
        async with PageServer(pages={"/go": hop}) as outside:
            fetcher = LocalFetcher(private_hosts=("127.0.0.1",))
            with pytest.raises(FetchError, match=r"redirects to .*127.0.0.2"):
                await fetcher.fetch(outside.url("/go"))
        assert inside.requests == []


async def test_a_redirect_to_metadata_is_refused() -> None:
    hop = Answer(302, headers=(("Location", "http://169.254.169.254/latest/meta-data/"),))
    async with PageServer(pages={"/go": hop}) as server:
        fetcher = LocalFetcher(private_hosts=("127.0.0.1",))
        with pytest.raises(FetchError, match=r"metadata"):
            await fetcher.fetch(server.url("/go"))


async def test_a_redirect_to_another_public_host_is_returned_not_followed() -> None:
    hop = Answer(302, headers=(("Location", "https://93.184.216.34/page"),))
    async with PageServer(pages={"/go": hop}) as server:
        fetcher = LocalFetcher(private_hosts=("127.0.0.1",))
        answer = await fetcher.fetch(server.url("/go"))
    assert isinstance(answer, Redirected)
    assert answer.location == "https://93.184.216.34/page"


async def test_redirect_loops_stop() -> None:
    hop = Answer(302, headers=(("Location", "/loop"),))
    async with PageServer(pages={"/loop": hop}) as server:
        fetcher = LocalFetcher(private_hosts=("127.0.0.1",), max_redirects=3)
        with pytest.raises(FetchError, match=r"more than 3 redirects"):
            await fetcher.fetch(server.url("/loop"))
        assert len(server.requests) == 4


@pytest.mark.parametrize("kind", ["application/octet-stream", "image/png", "application/zip"])
async def test_binary_types_are_refused(kind: str) -> None:
    answer = Answer(body=b"\x00\x01", headers=(("Content-Type", kind),))
    async with PageServer(pages={"/f": answer}) as server:
        with pytest.raises(FetchError, match=r"not text"):
            await LocalFetcher(private_hosts=("127.0.0.1",)).fetch(server.url("/f"))


async def test_a_large_page_is_cut_at_the_limit() -> None:
    answer = Answer(body=b"x" * 50_000, headers=(("Content-Type", "text/plain"),))
    async with PageServer(pages={"/big": answer}) as server:
        fetcher = LocalFetcher(private_hosts=("127.0.0.1",), max_bytes=10_000)
        page = await fetcher.fetch(server.url("/big"))
    assert isinstance(page, Page)
    assert page.truncated
    assert len(page.text) == 10_000


async def test_an_error_status_is_a_clear_error() -> None:
    async with PageServer() as server:
        with pytest.raises(FetchError, match=r"404"):
            await LocalFetcher(private_hosts=("127.0.0.1",)).fetch(server.url("/missing"))


def test_html_without_main_keeps_the_body_text() -> None:
    title, text = html_to_markdown("<title>T</title><p>Hello <b>there</b></p><style>x{}</style>")
    assert title == "T"
    assert text == "Hello **there**"
