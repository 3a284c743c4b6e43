"""Direct completions: inside the attempt, usage on the attempt; scripted and HTTP providers."""

import asyncio
import json

import pytest

from lashflow.testing import FakeClock
from lashflow.tools import (
    CompletionRequest, CompletionResponse, DispatchCall, Dispatcher, MemoryJournal, ModelProvider,
    ModelProviderError, OpenAICompatibleProvider, RetryPolicy, ScriptedProvider, TokenUsage, ToolCall,
    ToolOutputBudgetConfig, ToolRegistry, ToolResult, tool,
)


@tool(retry=RetryPolicy.safe(max_attempts=2, base_delay=0))
async def summarize(call: ToolCall) -> ToolResult:
    reply = await call.context.direct_completions().complete(
        {"messages": [{"role": "user", "content": call.input["text"]}], "max_tokens": 20})
    if reply.text == "retry please":
        return ToolResult.retryable_failure("model asked for a retry")
    return ToolResult.ok(reply.text)


async def test_usage_is_recorded_on_each_attempt():
    provider = ScriptedProvider([
        CompletionResponse("retry please", TokenUsage(11, 3)),
        CompletionResponse("a summary", TokenUsage(11, 5)),
    ])
    assert isinstance(provider, ModelProvider)
    journal = MemoryJournal()
    dispatcher = Dispatcher(ToolRegistry([summarize]), model_provider=provider, clock=FakeClock())
    result = await dispatcher.call(DispatchCall("tools", "summarize", {"text": "long text"}, "s"), journal=journal)
    assert result.outcome.value == "a summary" and result.outcome.attempts == 2
    usages = [e.outcome.usage for e in journal.attempts("s")]
    assert usages == [{"requests": 1, "input_tokens": 11, "output_tokens": 3},
                      {"requests": 1, "input_tokens": 11, "output_tokens": 5}]  # a retried attempt calls again
    assert [r.max_tokens for r in provider.requests] == [20, 20]


async def test_scripted_provider_replies_and_errors():
    provider = ScriptedProvider(["four bytes", ValueError("down"), lambda req: f"echo {len(req.messages)}"])
    first = await provider.complete(CompletionRequest.coerce("abcd"))
    assert first.text == "four bytes" and first.usage == TokenUsage(1, 3)
    with pytest.raises(ValueError):
        await provider.complete(CompletionRequest.coerce("x"))
    assert (await provider.complete(CompletionRequest.coerce("x"))).text == "echo 1"
    with pytest.raises(ModelProviderError):
        await provider.complete(CompletionRequest.coerce("x"))


async def test_missing_provider_is_a_tool_exception():
    result = await Dispatcher(ToolRegistry([summarize]), clock=FakeClock()).call(
        DispatchCall("tools", "summarize", {"text": "t"}, "s"))
    assert result.outcome.code == "tool_exception" and "no model provider" in result.outcome.message


async def test_tool_results_sent_to_a_model_pass_the_budget():
    provider = ScriptedProvider(["ok"])

    @tool
    async def forward(call: ToolCall) -> str:
        reply = await call.context.direct_completions().complete(CompletionRequest([
            {"role": "user", "content": "u" * 50},
            {"role": "tool", "content": "t" * 50},
            {"role": "tool", "content": {"k": "v" * 50}},
        ]))
        return reply.text

    dispatcher = Dispatcher(ToolRegistry([forward]), model_provider=provider,
                            budget=ToolOutputBudgetConfig(limit=8))
    assert (await dispatcher.call(DispatchCall("tools", "forward", {}, "s"))).outcome.value == "ok"
    sent = provider.requests[0].messages
    assert sent[0]["content"] == "u" * 50
    assert sent[1]["content"].startswith("tttttttt\n\n...42 bytes truncated...")
    assert json.loads(sent[2]["content"])["k"].startswith("vvvvvvvv\n\n...42 bytes truncated")


class FakeOpenAI:
    """A tiny HTTP/1.1 server on 127.0.0.1 speaking just enough chat-completions."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.status = 200
        self.server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> "FakeOpenAI":
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()
        await self.server.wait_closed()

    @property
    def url(self) -> str:
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}/v1"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                method, path, _ = lines[0].split(" ")
                headers = {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)}
                body = json.loads(await reader.readexactly(int(headers.get("content-length", "0"))) or b"{}")
                self.requests.append({"method": method, "path": path, "headers": headers, "body": body})
                if self.status != 200:
                    payload = json.dumps({"error": "overloaded"}).encode()
                    status = f"{self.status} Error"
                else:
                    text = " ".join(m["content"] for m in body["messages"]).upper()
                    payload = json.dumps({
                        "id": "cmpl-1", "object": "chat.completion", "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
                    }).encode()
                    status = "200 OK"
                writer.write(f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
                             f"content-length: {len(payload)}\r\n\r\n".encode() + payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def test_openai_compatible_provider_against_local_server():
    async with FakeOpenAI() as server:
        async with OpenAICompatibleProvider(server.url, model="tiny", api_key="sk-test") as provider:
            reply = await provider.complete(CompletionRequest(
                [{"role": "user", "content": "hello"}], max_tokens=5, temperature=0.0, extra={"seed": 1}))
            assert reply.text == "HELLO" and reply.usage == TokenUsage(7, 2) and reply.finish_reason == "stop"
            sent = server.requests[0]
            assert sent["method"] == "POST" and sent["path"] == "/v1/chat/completions"
            assert sent["headers"]["authorization"] == "Bearer sk-test"
            assert sent["body"] == {"model": "tiny", "messages": [{"role": "user", "content": "hello"}],
                                    "max_tokens": 5, "temperature": 0.0, "seed": 1}

            # inside a tool attempt, usage lands on the attempt
            journal = MemoryJournal()
            dispatcher = Dispatcher(ToolRegistry([summarize]), model_provider=provider, clock=FakeClock())
            result = await dispatcher.call(DispatchCall("tools", "summarize", {"text": "abc"}, "s"), journal=journal)
            assert result.outcome.value == "ABC"
            assert journal.attempts("s")[0].outcome.usage == {"requests": 1, "input_tokens": 7, "output_tokens": 2}

            server.status = 503
            with pytest.raises(ModelProviderError) as info:
                await provider.complete(CompletionRequest.coerce("x"))
            assert info.value.retryable and info.value.status == 503
            server.status = 400
            with pytest.raises(ModelProviderError) as bad:
                await provider.complete(CompletionRequest.coerce("x"))
            assert not bad.value.retryable


async def test_openai_provider_transport_error_is_retryable():
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    async with OpenAICompatibleProvider(f"http://127.0.0.1:{port}", model="m", timeout=2.0) as provider:
        with pytest.raises(ModelProviderError) as info:
            await provider.complete(CompletionRequest.coerce("x"))
        assert info.value.retryable
