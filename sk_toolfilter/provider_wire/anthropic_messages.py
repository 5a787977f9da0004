"""The Anthropic Messages wire: the custom search tool answered by the filter with ``tool_reference`` blocks.

An httpx transport under the ``anthropic`` SDK client of Agent Framework's Claude client. With
``search: filter``, a response whose only client tool call is the search (:data:`SEARCH_TOOL_NAME`) is
answered inside the same SDK call: the assistant's turn and a ``tool_result`` whose content is one
``tool_reference`` block per tool the filter ranks first for the model's query (the API expands each to
its deferred definition), then the request continues; the framework receives the last response (the
earlier ones' text blocks before its own content, usage summed), so its replay never holds the search.
A response that searches beside other tool calls goes back without the search (the framework runs the
others; the model may search again). A replayed ``tool_result`` keeps only references to tools the
call defers. Streamed runs are refused at start by the adapter (answered searches need the whole reply).
"""

from __future__ import annotations

import json
from typing import Any

import httpx2  # the ``anthropic`` SDK's HTTP package (a fork of httpx with the same API)

from sk_toolfilter.provider_wire.call import current_call
from sk_toolfilter.provider_wire.replies import json_reply, rewritten_reply, usage_sum, with_body
from sk_toolfilter.provider_wire.search_answer import (
    MAX_SEARCHES_PER_CALL,
    SEARCH_TOOL_NAME,
    SearchAnswer,
    SearchSession,
)

NO_MATCH = "No tool matched this search. Describe the task in other words, or answer without a tool."


class MessagesWire(httpx2.AsyncBaseTransport):
    """The transport (over `inner`, by default plain HTTP); inert outside a model call whose search the
    filter answers."""

    def __init__(self, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self.inner = inner or httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        call = current_call()
        session = call.session if call is not None else None
        if session is None or request.method != "POST" or not request.url.path.endswith("/messages"):
            return await self.inner.handle_async_request(request)
        body = json.loads(await request.aread())
        body["messages"] = [_narrowed(m, session) for m in body.get("messages") or []]
        replies: list[dict[str, Any]] = []
        while True:
            response = await self.inner.handle_async_request(with_body(request, body))  # type: ignore[arg-type]
            await response.aread()
            reply = json_reply(response)  # type: ignore[arg-type]
            if reply is None:
                return response
            content = [b for b in reply.get("content") or [] if isinstance(b, dict)]
            uses = [b for b in content if b.get("type") == "tool_use"]
            session.called([str(b.get("name")) for b in uses if b.get("name") != SEARCH_TOOL_NAME])
            searches = _searches(uses)
            if not searches or len(replies) >= MAX_SEARCHES_PER_CALL or len(searches) < len(uses):
                replies.append({**reply, "content": [b for b in content if b not in searches]} if searches else reply)
                break
            replies.append(reply)
            results = [_result(s["id"], await session.answer(s["id"], s.get("input"))) for s in searches]
            turn = [{"role": "assistant", "content": content}, {"role": "user", "content": results}]
            body = {**body, "messages": [*body.get("messages", []), *turn]}
        return rewritten_reply(response, _merged(replies))  # type: ignore[arg-type,return-value]

    async def aclose(self) -> None:
        await self.inner.aclose()


def _searches(uses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The search tool's calls among `uses`, one per id (a repeated id is answered once)."""
    seen: set[str] = set()
    found = []
    for use in uses:
        if use.get("name") == SEARCH_TOOL_NAME and isinstance(use.get("id"), str) and use["id"] not in seen:
            seen.add(use["id"])
            found.append(use)
    return found


def _result(tool_use_id: str, answer: SearchAnswer) -> dict[str, Any]:
    """The search's ``tool_result``: a reference per tool found, or a line saying nothing matched."""
    if not answer.names:
        return {"type": "tool_result", "tool_use_id": tool_use_id, "content": [{"type": "text", "text": NO_MATCH}]}
    references = [{"type": "tool_reference", "tool_name": name} for name in answer.names]
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": references}


def _narrowed(message: Any, session: SearchSession) -> Any:
    """A replayed message whose tool results reference only tools this call defers."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return message
    blocks = []
    for block in content:
        inner = block.get("content") if isinstance(block, dict) and block.get("type") == "tool_result" else None
        if isinstance(inner, list):
            kept = [
                b for b in inner
                if not (isinstance(b, dict) and b.get("type") == "tool_reference")
                or session.permitted([b.get("tool_name")])
            ]  # fmt: skip
            block = {**block, "content": kept or [{"type": "text", "text": NO_MATCH}]}
        blocks.append(block)
    return {**message, "content": blocks}


def _merged(replies: list[dict[str, Any]]) -> dict[str, Any]:
    """The last reply, the earlier replies' text before its content, usage summed."""
    last = dict(replies[-1])
    if len(replies) > 1:
        blocks = [b for r in replies[:-1] for b in r.get("content") or [] if isinstance(b, dict)]
        earlier = [b for b in blocks if b.get("type") == "text"]
        last["content"] = [*earlier, *(last.get("content") or [])]
        last["usage"] = usage_sum([r.get("usage") for r in replies])
    return last
