"""The adapter: :class:`ChatCompletionsAdapter` joins request, stream and errors over
one shared ``httpx.AsyncClient``; :func:`connection_test` makes one for a provider's
setup form.

The DeepSeek and OpenAI-compatible plugins configure it. Part of the
chat-completions library (see :mod:`dsh_plugins._shared.chat_completions`).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

if "httpx" not in sys.modules:  # its command-line client left out: see chat_body
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

if TYPE_CHECKING:
    import httpx

from dsh import __version__
from dsh.credentials import CredentialError, KeyDestination
from dsh.llm import (
    GenerateOptions,
    LlmAdapter,
    LlmError,
    LlmFailure,
    ModelInfo,
    Price,
    ProviderReply,
    ResolvedModel,
    RetryPolicy,
    StreamChunk,
    api_path,
)
from dsh.llm.sse import SseParser
from dsh.llm.tls import TlsContext
from dsh.setup import ConnectionTest, ProviderSetup, SetupChoice
from dsh_plugins._shared.chat_body import ResponseBody, Silence, not_an_event_stream, sse_lines
from dsh_plugins._shared.chat_errors import http_failure, malformed
from dsh_plugins._shared.chat_models import ChatModel
from dsh_plugins._shared.chat_request import json_body, request_body
from dsh_plugins._shared.chat_stream import ChatStreamTranslator

USER_AGENT = f"dsh/{__version__}"

HEADERS_TIMEOUT_S = 60.0
"""The default bound on the wait for the response headers (see docs/settings.md)."""
STREAM_IDLE_TIMEOUT_S = 120.0
"""The default bound on a silence once the headers came (see docs/settings.md)."""

ApiKey = Callable[[], str | None]


class ChatCompletionsAdapter(LlmAdapter):
    """An adapter for any server speaking chat completions over SSE.

    ``api_key`` is asked at every request (keys can change while dsh runs) and never
    stored; every message that leaves the adapter has it redacted.
    """

    def __init__(
        self,
        *,
        base_url: str,
        models: Mapping[str, ChatModel],
        fallback: ChatModel | None = None,
        api_key: ApiKey | None = None,
        credential: str | None = None,
        key_required: bool = True,
        headers: Mapping[str, str] | None = None,
        headers_timeout: float = HEADERS_TIMEOUT_S,
        stream_idle_timeout: float = STREAM_IDLE_TIMEOUT_S,
        connect_timeout: float = 30.0,
        retry_policy: RetryPolicy | None = None,
        list_models_path: str | None = "/models",
        client: httpx.AsyncClient | None = None,
        key_destination: KeyDestination | None = None,
        replay_reasoning: bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.key_destination = key_destination or KeyDestination(self.base_url)
        """Where the key may go; a request to any other origin carries none."""
        self._key_withheld = not self.key_destination.allows(self.base_url)
        self.models = dict(models)
        self.replay_reasoning = replay_reasoning
        """Send reasoning back as ``reasoning_content`` (see :func:`request_body`)."""
        self.fallback = fallback or ChatModel()
        self._api_key = api_key or (lambda: None)
        self.credential = credential
        self.key_required = key_required
        self._headers = dict(headers or {})
        self._list_models_path = list_models_path
        if retry_policy is not None:
            self.retry_policy = retry_policy
        self.headers_timeout = headers_timeout
        """From sending a request to its response headers, at most (seconds)."""
        self.stream_idle_timeout = stream_idle_timeout
        """A silence of the stream once the headers came, at most (seconds); any byte
        breaks it, keep-alive comments included."""
        self.connect_timeout = connect_timeout
        self._client = client
        self._owns_client = client is None
        self._tls = TlsContext(self.base_url) if client is None else None

    def _stream_timeout(self) -> httpx.Timeout:
        """The stream's own waits are bounded here (headers, silence, the end's grace),
        so httpx's read timeout is left off for it; every other request has the
        client's (:meth:`_http`)."""
        import httpx

        return httpx.Timeout(
            None,
            connect=self.connect_timeout,
            write=self.headers_timeout,
            pool=self.headers_timeout,
        )

    async def _http(self) -> httpx.AsyncClient:
        """The client, made at the first request, once the TLS context has loaded.
        httpx is imported then too, not when the plugin loads: about 40 ms of a
        start-up that makes no request before the person types."""
        import httpx

        if self._client is None:
            assert self._tls is not None
            try:
                context = await self._tls.get()
            except (OSError, ValueError) as error:  # ssl.SSLError is an OSError
                raise LlmError(
                    LlmFailure(
                        message=f"cannot set up TLS to verify {self.base_url}: {error}",
                        code="TRANSPORT",
                    )
                ) from None
            if self._client is None:  # another request may have made it meanwhile
                timeout = httpx.Timeout(
                    max(self.headers_timeout, self.stream_idle_timeout),
                    connect=self.connect_timeout,
                    pool=self.headers_timeout,
                )
                self._client = httpx.AsyncClient(timeout=timeout, verify=context)
        return self._client

    def model(self, model: str) -> ChatModel:
        return self.models.get(model, self.fallback)

    def resolve_model(self, provider: str, model: str) -> ResolvedModel:
        return self.model(model).resolved(provider, model)

    def price(self, provider: str, model: str) -> Price | None:
        return self.model(model).price

    def _request_headers(self, provider: str) -> tuple[dict[str, str], str | None]:
        destination = self.key_destination
        if self._key_withheld and self.key_required:
            where = self.credential or "the API key"
            if destination.base_url is None:
                why = (
                    f"your own settings do not give {provider} the key {where} (a "
                    "project's settings chose it), so it is not sent"
                )
            else:
                why = (
                    f"{where} is sent only to {destination.base_url}, the address your own "
                    f"settings give {provider}, not to {self.base_url}, which a project's "
                    "settings chose"
                )
            fix = "configure it" if destination.base_url is None else "set its base_url"
            raise LlmError(
                LlmFailure(
                    message=f"{why}; {fix} in $DSH_HOME/settings.toml to use that server",
                    code="KEY_WITHHELD",
                )
            )
        try:
            key = None if self._key_withheld else self._api_key()
        except CredentialError as error:  # a key in a project .env not read, say
            raise LlmError(LlmFailure(message=str(error), code="MISSING_CREDENTIAL")) from None
        if not key and self.key_required:
            where = f"set {self.credential}" if self.credential else "configure an API key"
            raise LlmError(
                LlmFailure(
                    message=(
                        f"no API key for {provider}: {where} in the environment or in "
                        "$DSH_HOME/credentials.json, or run `dsh` once to set up a "
                        "provider interactively"
                    ),
                    code="MISSING_CREDENTIAL",
                )
            )
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "User-Agent": USER_AGENT,
            **self._headers,
        }
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers, key

    async def list_models(self, provider: str) -> list[ModelInfo]:
        import httpx

        listed: list[ModelInfo] = []
        read = False
        if self._list_models_path is not None:
            try:
                headers, _ = self._request_headers(provider)
                client = await self._http()
                response = await client.get(
                    self.base_url + self._list_models_path, headers=headers, timeout=10.0
                )
                if response.status_code == 200:
                    for entry in response.json().get("data", []):
                        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                            listed.append(
                                ModelInfo(
                                    provider=provider,
                                    id=entry["id"],
                                    name=entry["id"],
                                    offered=True,
                                )
                            )
                    read = True
            except (httpx.HTTPError, LlmError, ValueError, AttributeError):
                listed, read = [], False
        known = {info.id for info in listed}
        # What only dsh knows is listed too, and says whether the server offers it.
        listed.extend(
            ModelInfo(
                provider=provider,
                id=model,
                name=settings.name or model,
                offered=False if read else None,
            )
            for model, settings in self.models.items()
            if model not in known
        )
        return listed

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """One attempt. The response's connection is released (read to its end and
        back in the pool, or closed) before the finish is handed on: a consumer that
        stops reading at the finish, as every consumer does, leaves nothing open."""
        import httpx

        headers, key = self._request_headers(options.provider)
        body = request_body(
            options, self.model(options.model), replay_reasoning=self.replay_reasoning
        )
        provider = options.provider
        translator = ChatStreamTranslator()

        def hide(text: str) -> str:
            return text.replace(key, "***") if key and len(key) >= 4 else text

        def failure(message: str, code: str) -> LlmFailure:
            return LlmFailure(message=hide(message), code=code)

        client = await self._http()
        request = client.build_request(
            "POST",
            self.base_url + "/chat/completions",
            content=json_body(body),
            headers=headers,
            timeout=self._stream_timeout(),
        )
        response = await self._send(client, request, provider, failure)
        closing: list[StreamChunk] | None = None
        try:
            if response.status_code != 200:
                raise LlmError(await self._refusal(response, provider, hide))
            reader = ResponseBody(response, self.stream_idle_timeout)
            try:
                instead = await not_an_event_stream(
                    reader, response.headers.get("content-type", "")
                )
                if instead is not None:
                    raise LlmError(
                        failure(f"{provider} answered 200 with {instead}", "NOT_EVENT_STREAM")
                    )
                parser = SseParser()
                ended = False  # [DONE] came
                async for line in sse_lines(reader):
                    data = parser.feed(line)
                    if data is None:
                        continue
                    if data == "[DONE]":
                        ended = True
                        break
                    try:
                        chunks = translator.event(json.loads(data))
                    except ValueError:
                        problem = malformed(f"an event that is not JSON: {data[:200]!r}")
                        closing = translator.failed(problem)
                        break
                    except LlmError as error:
                        closing = translator.failed(error.failure)
                        break
                    for chunk in chunks:
                        yield chunk
                    if translator.finish_reason is not None:
                        reader.grace()  # what may follow a finish comes at once or never
                else:
                    ended = parser.end() == "[DONE]"
                if closing is None and ended:
                    closing = translator.done()
                    await reader.drain()
            except Silence:
                if translator.finish_reason is None:
                    message = (
                        f"{provider} sent nothing for {self.stream_idle_timeout:g} s "
                        "(stream_idle_timeout)"
                    )
                    closing = translator.failed(failure(message, "TIMEOUT"))
            except httpx.TransportError as error:
                if translator.finish_reason is None:
                    detail = str(error) or type(error).__name__
                    if not translator.events:
                        message = f"the connection to {provider} broke before its answer: {detail}"
                        raise LlmError(failure(message, "TRANSPORT")) from None
                    message = f"the connection to {provider} broke: {detail}"
                    closing = translator.failed(failure(message, "STREAM_CLOSED"))
            if closing is None:
                if translator.finish_reason is not None:
                    # It said how it finished, then ended or went quiet without
                    # [DONE]: the answer is whole, and is not called interrupted.
                    closing = translator.done()
                else:
                    message = "the model server closed the stream before it finished"
                    closing = translator.failed(failure(message, "STREAM_CLOSED"))
        finally:
            await response.aclose()  # back to the pool when read to its end, else closed
        for chunk in closing:
            yield chunk

    async def _send(
        self,
        client: httpx.AsyncClient,
        request: httpx.Request,
        provider: str,
        failure: Callable[[str, str], LlmFailure],
    ) -> httpx.Response:
        """Send ``request``, waiting for the response headers at most
        ``headers_timeout``."""
        import httpx

        try:
            async with asyncio.timeout(self.headers_timeout):
                return await client.send(request, stream=True)
        except TimeoutError:
            message = (
                f"{provider} did not answer within {self.headers_timeout:g} s (headers_timeout)"
            )
            raise LlmError(failure(message, "TIMEOUT")) from None
        except httpx.PoolTimeout:
            message = (
                f"no free connection to {provider} within {self.headers_timeout:g} s: "
                "every one is in use"
            )
            raise LlmError(failure(message, "TIMEOUT")) from None
        except httpx.ConnectTimeout:
            message = (
                f"cannot reach {provider} at {self.base_url}: no connection within "
                f"{self.connect_timeout:g} s"
            )
            raise LlmError(failure(message, "TRANSPORT")) from None
        except httpx.TimeoutException as error:
            message = f"no answer from {provider} in time ({type(error).__name__})"
            raise LlmError(failure(message, "TIMEOUT")) from None
        except httpx.TransportError as error:
            message = f"cannot reach {provider} at {self.base_url}: {error}"
            raise LlmError(failure(message, "TRANSPORT")) from None

    async def _refusal(
        self, response: httpx.Response, provider: str, hide: Callable[[str], str]
    ) -> LlmFailure:
        """What an HTTP error status means; its body is read within the idle bound."""
        import httpx

        try:
            async with asyncio.timeout(self.stream_idle_timeout):
                raw = await response.aread()
        except (TimeoutError, httpx.HTTPError):
            raw = b""
        problem = http_failure(
            response.status_code,
            response.headers,
            hide(raw.decode("utf-8", errors="replace")),
            provider=provider,
            credential=self.credential,
        )
        if problem.request_id is not None:  # a proxy may echo the key anywhere
            problem = problem.model_copy(update={"request_id": hide(problem.request_id)})
        return problem

    def api_base_url(self, provider: str) -> str | None:
        return self.base_url

    async def post_json(
        self, provider: str, path: str, body: Mapping[str, Any], *, timeout_s: float
    ) -> ProviderReply:
        import httpx

        url = f"{self.base_url}/{api_path(path)}"
        # The same checks as a model call: the key goes only where the user's own
        # settings send it, and the path cannot leave the base URL.
        headers, key = self._request_headers(provider)
        headers["Accept"] = "application/json"

        def hide(text: str) -> str:
            return text.replace(key, "***") if key and len(key) >= 4 else text

        client = await self._http()
        try:
            response = await client.post(
                url, content=json_body(dict(body)), headers=headers, timeout=timeout_s
            )
        except httpx.TimeoutException as error:
            message = f"no answer from {provider} in {timeout_s:g} s ({type(error).__name__})"
            raise LlmError(LlmFailure(message=message, code="TIMEOUT")) from None
        except httpx.TransportError as error:
            message = hide(f"cannot reach {provider} at {self.base_url}: {error}")
            raise LlmError(LlmFailure(message=message, code="TRANSPORT")) from None
        text = hide(response.text)
        try:
            parsed: Any = json.loads(text) if text.strip() else None
        except ValueError:
            parsed = None
        return ProviderReply(status=response.status_code, body=parsed, text=text)

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.aclose()


def connection_test(
    form: ProviderSetup, choice: SetupChoice, key: str | None, timeout_s: float, *, base_url: str
) -> ConnectionTest:
    """What a provider's setup form asks for its connection test: an adapter for
    ``base_url`` with the key given, no model catalog, and timeouts within the test's."""
    adapter = ChatCompletionsAdapter(
        base_url=base_url,
        models={},
        api_key=lambda: key,
        credential=form.key_ref(choice),
        key_required=form.key_required,
        headers_timeout=timeout_s,
        stream_idle_timeout=timeout_s,
        connect_timeout=min(timeout_s, 10.0),
        list_models_path=None,
    )
    return ConnectionTest(adapter, base_url)
