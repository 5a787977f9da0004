"""What goes over the wire: an HTTP transport that records OpenAI chat requests and answers them
with canned replies, so a real ``OpenAIChatCompletion`` runs offline (reports, tests, demos)."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from typing import Any, cast

import httpx

DEFAULT_MODEL = "gpt-4o-mini"


def text_reply(content: str = "ok") -> dict[str, Any]:
    """A chat completion whose assistant message is plain text."""
    return {"role": "assistant", "content": content}


def tool_call_reply(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A chat completion in which the model calls tools: ``("Plugin-function", {"arg": 1})``."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(calls)
        ],
    }


def _completion(message: dict[str, Any], model: str, number: int) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _stream(message: dict[str, Any], model: str, number: int) -> bytes:
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    chunks = [
        {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
        },
        {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
        },
    ]
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


class RecordingTransport(httpx.AsyncBaseTransport):
    """Records every request body and answers with the queued replies (then plain ``ok``)."""

    def __init__(self, replies: Iterable[dict[str, Any]] = ()) -> None:
        self.replies: deque[dict[str, Any]] = deque(replies)
        self.requests: list[dict[str, Any]] = []
        self.raw_bodies: list[bytes] = []

    def queue(self, *replies: dict[str, Any]) -> None:
        self.replies.extend(replies)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raw = await request.aread()
        body = json.loads(raw) if raw else {}
        self.raw_bodies.append(raw)
        self.requests.append(body)
        message = self.replies.popleft() if self.replies else text_reply()
        model = body.get("model", DEFAULT_MODEL)
        if body.get("stream"):
            return httpx.Response(
                200,
                content=_stream(message, model, len(self.requests)),
                headers={"content-type": "text/event-stream"},
            )
        return httpx.Response(200, json=_completion(message, model, len(self.requests)))

    @property
    def last(self) -> dict[str, Any]:
        return self.requests[-1]

    def tool_names(self, request_index: int = -1) -> list[str]:
        """Names of the tools sent in one recorded request (in wire order)."""
        return [t["function"]["name"] for t in self.requests[request_index].get("tools") or []]


def offline_chat_service(
    transport: RecordingTransport, model: str = DEFAULT_MODEL, service_id: str | None = None
) -> Any:
    """A real ``OpenAIChatCompletion`` on a real ``AsyncOpenAI`` client whose HTTP goes to `transport`."""
    from openai import AsyncOpenAI
    from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion

    client = AsyncOpenAI(
        api_key="offline",
        base_url="https://offline.invalid/v1",
        # openai 3 is typed for its own httpx2 client and accepts an httpx one at run time.
        http_client=cast(Any, httpx.AsyncClient(transport=transport)),
        max_retries=0,
    )
    kwargs: dict[str, Any] = {"ai_model_id": model, "async_client": client}
    if service_id:
        kwargs["service_id"] = service_id
    return OpenAIChatCompletion(**kwargs)


def offline_agent_framework_client(
    transport: RecordingTransport, model: str = DEFAULT_MODEL, middleware: list[Any] | None = None
) -> Any:
    """Agent Framework's real ``OpenAIChatCompletionClient`` on a real ``AsyncOpenAI`` client whose
    HTTP goes to `transport` (needs the ``agent-framework`` extra)."""
    from agent_framework.openai import OpenAIChatCompletionClient
    from openai import AsyncOpenAI

    client = AsyncOpenAI(
        api_key="offline",
        base_url="https://offline.invalid/v1",
        http_client=cast(Any, httpx.AsyncClient(transport=transport)),
        max_retries=0,
    )
    return OpenAIChatCompletionClient(model=model, async_client=client, middleware=middleware)
