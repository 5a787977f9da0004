"""Scripted model servers on loopback, in the providers' documented shapes. The OpenAI Responses API:
every ``POST /v1/responses`` is recorded and answered with the next scripted list of output items
(``function_call``, ``tool_search_call``, ``tool_search_output``, ``message``); Anthropic's Messages API
(``anthropic=True``): every ``POST /v1/messages`` with the next list of content blocks (``tool_use``,
``server_tool_use``, ``tool_search_tool_result``, ``text``). Then a plain text reply."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_call(name: str, arguments: dict[str, Any], number: int = 1) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{number}",
        "call_id": f"call_{number}",
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


def tool_search(query: str, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A server-executed search and its output (the loaded definitions), as the Responses API returns them."""
    return [
        {
            "type": "tool_search_call",
            "id": "tsc_1",
            "call_id": None,
            "execution": "server",
            "arguments": {"query": query},
            "status": "completed",
        },
        {
            "type": "tool_search_output",
            "id": "tso_1",
            "call_id": None,
            "execution": "server",
            "status": "completed",
            "tools": found,
        },
    ]


def _response(number: int, model: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": f"resp_{number}",
        "object": "response",
        "created_at": 0,
        "model": model,
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "text": {"format": {"type": "text"}},
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def claude_text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text, "citations": None}


def claude_tool_use(name: str, arguments: dict[str, Any], number: int = 1) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{number}", "name": name, "input": arguments}


def claude_tool_search(query: str, found: list[str]) -> list[dict[str, Any]]:
    """Anthropic's server-side BM25 search and its result (tool references), as the Messages API returns them."""
    return [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25", "input": {"query": query}},
        {
            "type": "tool_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": {
                "type": "tool_search_tool_search_result",
                "tool_references": [{"type": "tool_reference", "tool_name": name} for name in found],
            },
        },
    ]


def _claude_message(number: int, model: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": f"msg_{number}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _events(reply: dict[str, Any]) -> bytes:
    """A streamed response as server-sent events: created, each output item added and done (a message's
    text as one delta), completed."""
    started = {**reply, "status": "in_progress", "output": []}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": started}]
    for index, item in enumerate(reply["output"]):
        if item["type"] == "function_call":  # its arguments arrive as deltas, as the API streams them
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": {**item, "arguments": ""}}
            )
            for kind, key in (("delta", "delta"), ("done", "arguments")):
                events.append(
                    {"type": f"response.function_call_arguments.{kind}", "item_id": item["id"], "output_index": index,
                     key: item["arguments"]}
                )  # fmt: skip
            events.append({"type": "response.output_item.done", "output_index": index, "item": item})
            continue
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(
                {"type": "response.output_text.delta", "item_id": item["id"], "output_index": index,
                 "content_index": 0, "delta": text, "logprobs": []}
            )  # fmt: skip
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": reply})
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode()
        for n, e in enumerate(events)
    )


class ScriptedResponsesServer:
    """``with ScriptedResponsesServer([[...items...], ...]) as server:`` — ``server.base_url`` for the
    client, ``server.requests`` the JSON bodies received. ``anthropic=True``: the Messages API."""

    def __init__(
        self,
        outputs: list[list[dict[str, Any]]],
        *,
        anthropic: bool = False,
        billed: Callable[[dict[str, Any]], int] | None = None,
    ) -> None:
        """`billed(body)`: the input tokens a response reports for a request body (default 10)."""
        self.outputs: deque[list[dict[str, Any]]] = deque(outputs)
        self.requests: list[dict[str, Any]] = []
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                scripted.requests.append(body)
                number, model = len(scripted.requests), body.get("model", "")
                if anthropic:
                    content = scripted.outputs.popleft() if scripted.outputs else [claude_text("ok")]
                    raw = json.dumps(_claude_message(number, model, content)).encode()
                else:
                    output = scripted.outputs.popleft() if scripted.outputs else [message("ok")]
                    reply = _response(number, model, output)
                    if billed is not None:
                        reply["usage"]["input_tokens"] = billed(body)
                    raw = _events(reply) if body.get("stream") else json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream" if body.get("stream") else "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """OpenAI's base URL (with /v1); Anthropic's client takes :attr:`root`."""
        return f"{self.root}/v1"

    @property
    def root(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ScriptedResponsesServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def tools(self, request_index: int = -1) -> list[dict[str, Any]]:
        return list(self.requests[request_index].get("tools") or [])


def client_tool_search(query: Any, call_id: str = "call_search_1") -> dict[str, Any]:
    """A tool search the client executes (``execution: "client"``): the model's query, to be answered with
    a ``tool_search_output`` of the same ``call_id``."""
    return {
        "type": "tool_search_call",
        "id": f"tsc_{call_id}",
        "call_id": call_id,
        "execution": "client",
        "arguments": {"query": query},
        "status": "completed",
    }
