"""``dsh doctor``'s check of a chat-completions provider: its ``GET /models`` asked
with the key, where the key may go (the adapter's :class:`KeyDestination`), the
status and how many models it lists; every problem said with its fix, the key never."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from dsh.credentials import CredentialError
from dsh.doctor import Check, DoctorAsk, fail, ok
from dsh.llm.tls import TlsContext
from dsh_plugins._shared.chat_completions import USER_AGENT, ChatCompletionsAdapter

_FIXES = {
    401: "the key was refused: check {credential} (a new key from the provider's console)",
    402: "the account has no balance left: top it up with the provider",
    403: "the key may not list models: check its permissions with the provider",
    404: "nothing answers /models there: check base_url (it usually ends in /v1 or nothing)",
}


async def endpoint_check(
    route: str,
    adapter: ChatCompletionsAdapter,
    key: Callable[[], str | None],
    ask: DoctorAsk,
    *,
    headers: Mapping[str, str] | None = None,
    models_path: str | None = "/models",
) -> Check:
    """Ask ``models_path`` below the adapter's base URL, with the key ``key`` reads when
    the adapter may send it there."""
    name = f"{route} endpoint"
    address = adapter.base_url + (models_path or "")
    if models_path is None:
        return ok("endpoint", name, f"{adapter.base_url} (it lists no models: not asked)")
    credential = adapter.credential or "the API key"
    sent: dict[str, str] = {"Accept": "application/json", "User-Agent": USER_AGENT}
    sent.update(headers or {})
    if adapter.key_destination.allows(adapter.base_url):
        try:
            value = key()
        except CredentialError as error:
            return fail("endpoint", name, f"not asked: {error}", f"make {credential} readable")
        if value:
            sent["Authorization"] = f"Bearer {value}"
        elif adapter.key_required:
            return fail(
                "endpoint",
                name,
                f"{address} not asked: no key",
                f"set {credential} (see the key's line)",
            )
    elif adapter.key_required:
        return fail(
            "endpoint",
            name,
            f"{address} not asked: a project's settings chose this address, and the key "
            "goes only where your own settings point",
            f"set base_url for {route} in $DSH_HOME/settings.toml, or `dsh trust` is not "
            "enough: the address must be your own setting",
        )
    import httpx  # here, not when the plugin loads: see chat_adapter's _http

    try:
        context = await TlsContext(adapter.base_url).get() if address.startswith("https") else None
        async with httpx.AsyncClient(
            timeout=ask.timeout_s, verify=context if context is not None else True
        ) as client:
            response = await client.get(address, headers=sent)
    except httpx.TimeoutException:
        return fail(
            "endpoint",
            name,
            f"{address}: no answer within {ask.timeout_s:g} s",
            "check the network (a proxy?) and base_url",
        )
    except (httpx.HTTPError, OSError, ValueError) as error:
        reason = str(error) or type(error).__name__
        return fail(
            "endpoint",
            name,
            f"{address} unreachable: {reason}",
            "check the provider's base_url in settings and the network",
        )
    if response.status_code != 200:
        fix = _FIXES.get(response.status_code, "see the provider's status page, then try again")
        return fail(
            "endpoint",
            name,
            f"{address} answered {response.status_code}",
            fix.format(credential=credential),
        )
    try:
        listed = [m for m in response.json().get("data", []) if isinstance(m, dict)]
    except (ValueError, AttributeError):
        return fail(
            "endpoint",
            name,
            f"{address} answered 200 but not with a model list",
            "check base_url: it should be the API's root, not a web page",
        )
    count = f"{len(listed)} model{'s' * (len(listed) != 1)}"
    offered = {m.get("id") for m in listed}
    detail = f"{address} answered 200, {count}"
    if ask.provider == route and listed:
        asked_as = adapter.resolve_model(route, ask.model).sent_as or ask.model
        if asked_as not in offered:
            detail += f" ({asked_as} not among them)"
    return ok("endpoint", name, detail)
