"""Model providers for direct completions.

A tool asks a model for text through ``call.context.direct_completions()``; the engine
supplies the provider. The call runs inside the open attempt (no journal entry of its
own) and its token usage is added to that attempt's record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from lashflow.errors import LashflowError

from ..slotted import Frozen, Slotted

__all__ = [
    "CompletionRequest", "CompletionResponse", "ModelProvider", "ModelProviderError",
    "OpenAICompatibleProvider", "ScriptedProvider", "TokenUsage",
]


class TokenUsage(Frozen):
    __slots__ = ("input_tokens", "output_tokens")
    input_tokens: int
    output_tokens: int

    def __init__(self, input_tokens: int = 0, output_tokens: int = 0) -> None:
        setter = object.__setattr__
        setter(self, "input_tokens", input_tokens)
        setter(self, "output_tokens", output_tokens)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class CompletionRequest(Slotted):
    """A chat request: OpenAI-style ``messages`` (``{"role", "content"}`` dicts)."""

    __slots__ = ("messages", "model", "max_tokens", "temperature", "extra")

    def __init__(
            self,
            messages: list[dict[str, Any]],
            model: str | None = None,
            max_tokens: int | None = None,
            temperature: float | None = None,
            extra: dict[str, Any] | None = None,
    ) -> None:
        self.messages = messages
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.extra = {} if extra is None else extra

    @classmethod
    def coerce(cls, request: "CompletionRequest | dict[str, Any] | str") -> "CompletionRequest":
        """Accept a request, a dict of its fields, or a bare user prompt."""
        if isinstance(request, CompletionRequest):
            return request
        if isinstance(request, str):
            return cls([{"role": "user", "content": request}])
        data = dict(request)
        known = {k: data.pop(k) for k in ("messages", "model", "max_tokens", "temperature") if k in data}
        extra = dict(data.pop("extra", {}) or {})
        extra.update(data)
        return cls(extra=extra, **known)


class CompletionResponse(Frozen):
    __slots__ = ("text", "usage", "finish_reason", "raw")
    text: str
    usage: TokenUsage
    finish_reason: str | None
    raw: Any

    def __init__(
            self,
            text: str,
            usage: TokenUsage = TokenUsage(),
            finish_reason: str | None = None,
            raw: Any = None,
    ) -> None:
        setter = object.__setattr__
        setter(self, "text", text)
        setter(self, "usage", usage)
        setter(self, "finish_reason", finish_reason)
        setter(self, "raw", raw)


@runtime_checkable
class ModelProvider(Protocol):
    async def complete(self, request: CompletionRequest) -> CompletionResponse: ...


class ModelProviderError(LashflowError):
    """The provider refused or failed; ``retryable`` marks 429/5xx/transport errors."""

    code = "model_provider_error"

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status


def _approx_tokens(text: str) -> int:
    return -(-len(text.encode("utf-8", "surrogatepass")) // 4)


ScriptedReply = str | CompletionResponse | Exception | Callable[[CompletionRequest], Any]


class ScriptedProvider:
    """Answers from a script, in order, and remembers every request (for tests).

    A ``str`` reply gets approximate usage (ceil(bytes / 4) for prompt and reply);
    an exception is raised; a callable is called with the request.
    """

    def __init__(self, replies: Iterable[ScriptedReply] = ()) -> None:
        self._replies = list(replies)
        self.requests: list[CompletionRequest] = []

    def add(self, *replies: ScriptedReply) -> "ScriptedProvider":
        self._replies.extend(replies)
        return self

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.requests.append(request)
        if not self._replies:
            raise ModelProviderError("scripted provider has no reply left")
        reply = self._replies.pop(0)
        if callable(reply) and not isinstance(reply, (str, CompletionResponse, Exception)):
            reply = reply(request)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, CompletionResponse):
            return reply
        prompt = "".join(str(m.get("content", "")) for m in request.messages)
        text = str(reply)
        return CompletionResponse(text, TokenUsage(_approx_tokens(prompt), _approx_tokens(text)), "stop")


class OpenAICompatibleProvider:
    """``POST {base_url}/chat/completions`` on any OpenAI-compatible server, over httpx."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        headers: dict[str, str] | None = None,
        client: Any = None,
    ) -> None:
        import httpx  # imported here: httpx is slow to import and most runs never need it

        self.model = model
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._headers = dict(headers or {})
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout, trust_env=False)
        self._httpx = httpx

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        body: dict[str, Any] = {"model": request.model or self.model, "messages": request.messages}
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        body.update(request.extra)
        try:
            response = await self._client.post(self._url, json=body, headers=self._headers)
        except self._httpx.HTTPError as exc:
            raise ModelProviderError(f"model request failed: {exc}", retryable=True) from exc
        if response.status_code >= 400:
            retryable = response.status_code == 429 or response.status_code >= 500
            raise ModelProviderError(
                f"model provider answered {response.status_code}: {response.text[:500]}",
                retryable=retryable,
                status=response.status_code,
            )
        try:
            data = response.json()
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ModelProviderError(f"malformed model response: {exc!r}") from exc
        usage = data.get("usage") or {}
        return CompletionResponse(
            text,
            TokenUsage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)),
            choice.get("finish_reason"),
            data,
        )

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> "OpenAICompatibleProvider":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
