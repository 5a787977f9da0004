"""A scripted OpenAI Responses API server on loopback: every ``POST /v1/responses`` is recorded and
answered with the next scripted list of output items (then a plain text message), in the documented
shapes (``function_call``, ``tool_search_call``, ``tool_search_output``, ``message``)."""

from __future__ import annotations

import json
import threading
from collections import deque
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


class ScriptedResponsesServer:
    """``with ScriptedResponsesServer([[...items...], ...]) as server:`` — ``server.base_url`` for the
    client, ``server.requests`` the JSON bodies received."""

    def __init__(self, outputs: list[list[dict[str, Any]]]) -> None:
        self.outputs: deque[list[dict[str, Any]]] = deque(outputs)
        self.requests: list[dict[str, Any]] = []
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                scripted.requests.append(body)
                output = scripted.outputs.popleft() if scripted.outputs else [message("ok")]
                raw = json.dumps(_response(len(scripted.requests), body.get("model", ""), output)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ScriptedResponsesServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def tools(self, request_index: int = -1) -> list[dict[str, Any]]:
        return list(self.requests[request_index].get("tools") or [])
