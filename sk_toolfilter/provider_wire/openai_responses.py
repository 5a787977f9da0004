"""The OpenAI Responses wire: deferred tools, and the client-executed ``tool_search`` answered by the filter.

An httpx transport under the ``openai`` SDK client of Agent Framework's Responses client and of Semantic
Kernel's ``OpenAIResponsesAgent``. For the model call in progress (:mod:`sk_toolfilter.provider_wire.call`):

- Semantic Kernel's requests get ``defer_loading: true`` and the search tool (Agent Framework's client
  marks its own);
- with ``search: filter``, every ``tool_search_call`` with ``execution: "client"`` is answered inside the
  same SDK call: a ``tool_search_output`` (same ``call_id``, ``execution: "client"``) holding the request's
  own definitions of the tools the filter ranks first for the model's query, then the request continues
  (``previous_response_id``, a ``conversation``, or with ``store: false`` the whole input again) — the
  framework receives one response whose output holds the search, its answer and what followed, usage
  summed. Streamed responses are spliced the same way (the second stream's events follow the first's).
- A search call replayed without its output (a stateless conversation) gets its answer back after it,
  the same tools as before; a ``tool_search_output`` replayed from elsewhere keeps only deferred tools.
- A response that searches and calls functions at once goes back as it is (the framework runs the
  calls); the search's answer goes out with the next request.

Requests are never sent with a tool the call does not carry: an answer's definitions are copied from
the request's own deferred entries.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

import httpx

from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.provider_wire.call import current_call
from sk_toolfilter.provider_wire.namespaces import Namespaces
from sk_toolfilter.provider_wire.replies import RESENT_HEADERS, json_reply, rewritten_reply, usage_sum, with_body
from sk_toolfilter.provider_wire.search_answer import MAX_SEARCHES_PER_CALL, SearchAnswer, SearchSession
from sk_toolfilter.selection.provider_search import with_deferred

logger = library_logger(__name__)

_CALLING = ("function_call", "custom_tool_call", "computer_call", "local_shell_call", "shell_call", "apply_patch_call")
_PENDING_MAX = 1024


class ResponsesWire(httpx.AsyncBaseTransport):
    """The transport (over `inner`, by default plain HTTP); inert outside a model call with provider search."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.inner = inner or httpx.AsyncHTTPTransport()
        self._pending: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        """Answers owed to a stored response that searched and called functions at once (by its id)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        call = current_call()
        if call is None or request.method != "POST" or not request.url.path.endswith("/responses"):
            return await self.inner.handle_async_request(request)
        body = json.loads(await request.aread())
        if call.deferred and call.search_tool is not None:
            body["tools"] = with_deferred(body.get("tools") or [], call.deferred, "function", call.search_tool)
        spaces = Namespaces(call.plugin_of) if call.plugin_of is not None else None
        session = call.session
        if session is None and spaces is None:
            return await self.send(request, body)
        if session is not None:
            owed = await self._owed(str(body.get("previous_response_id")), session)
            body["input"] = await _paired([*owed, *_items(body.get("input"))], body, session)
        if body.get("stream"):
            first = await self.send(request, body, spaces)
            if first.status_code != 200:
                return first
            stream = _Spliced(self, request, body, first, session, spaces)
            return httpx.Response(200, headers=_headers(first), stream=stream, extensions=first.extensions)
        return await self._answered(request, body, session, spaces)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def _owed(self, response_id: str, session: SearchSession) -> list[dict[str, Any]]:
        """The answers owed to the stored response `response_id` continues: this replica's, else the
        shared store's (the response may have come from another replica)."""
        owed = self._pending.pop(response_id, None)
        if owed is None and session.shared is not None and response_id != "None":
            stored = await session.shared.get("owed", response_id)
            owed = [item for item in stored if isinstance(item, dict)] if isinstance(stored, list) else None
        return owed or []

    async def send(
        self, request: httpx.Request, body: dict[str, Any], spaces: Namespaces | None = None
    ) -> httpx.Response:
        """`request` with `body` as its JSON content (in namespace form with `spaces`)."""
        return await self.inner.handle_async_request(with_body(request, spaces.outgoing(body) if spaces else body))

    async def _answered(
        self, request: httpx.Request, body: dict[str, Any], session: SearchSession | None, spaces: Namespaces | None
    ) -> httpx.Response:
        response = await self.send(request, body, spaces)
        replies: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        while True:
            await response.aread()
            reply = _incoming(json_reply(response), spaces)
            if reply is None:  # an error: the framework reads it as it is
                return response
            following = await self.step(body, reply, session, replies)
            if following is None:
                break
            body = following
            response = await self.send(request, body, spaces)
        return rewritten_reply(response, _merged(replies))

    async def step(
        self,
        body: dict[str, Any],
        reply: dict[str, Any],
        session: SearchSession | None,
        replies: list[tuple[dict[str, Any], list[dict[str, Any]]]],
    ) -> dict[str, Any] | None:
        """One reply of a model call (streamed or not): answer its searches, add it to `replies`, owe the
        answers to the next request when it also calls functions; the request that continues it now, or
        None when the reply goes back to the framework."""
        step = await _answers(reply, body, session, answering=len(replies) < MAX_SEARCHES_PER_CALL)
        replies.append((reply, step.outputs))
        if step.owed and reply.get("id") and body.get("store") is not False:  # stateless: the replay pairs it
            self._pending[str(reply["id"])] = step.outputs
            while len(self._pending) > _PENDING_MAX:
                self._pending.popitem(last=False)
            if session is not None and session.shared is not None:  # the next request may reach another replica
                await session.shared.put("owed", str(reply["id"]), step.outputs)
        return _follow_up(body, reply, step.outputs) if step.continues else None


class _Step:
    """What one response asks of the transport: the answers to its searches, whether the request continues
    with them now, or (a response that also calls functions) whether they are owed to the next request."""

    def __init__(self, outputs: list[dict[str, Any]], continues: bool, owed: bool) -> None:
        self.outputs, self.continues, self.owed = outputs, continues, owed


async def _answers(
    reply: dict[str, Any], body: dict[str, Any], session: SearchSession | None, *, answering: bool
) -> _Step:
    """Answer `reply`'s client searches (each ``call_id`` once); learning reads the functions it calls."""
    if session is None:
        return _Step([], False, False)
    output = [i for i in reply.get("output") or [] if isinstance(i, dict)]
    session.called([str(i.get("name")) for i in output if i.get("type") == "function_call"])
    searches = _client_searches(output)
    if not searches:
        return _Step([], False, False)
    calling = any(i.get("type") in _CALLING for i in output)
    if not answering and not calling:
        logger.warning("sk-toolfilter: the model searched %d times in one call; the response goes back as it is",
                       MAX_SEARCHES_PER_CALL)  # fmt: skip
        return _Step([], False, False)
    outputs = [_output_item(await session.answer(s["call_id"], s.get("arguments")), body) for s in searches]
    return _Step(outputs, not calling, calling)


def _client_searches(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The client-executed search calls among `items`, one per ``call_id`` (a repeated one is answered once)."""
    seen: set[str] = set()
    searches = []
    for item in items:
        if _is_client_search(item):
            call_id = item.get("call_id")
            if isinstance(call_id, str) and call_id and call_id not in seen:
                seen.add(call_id)
                searches.append(item)
    return searches


def _output_item(answer: SearchAnswer, body: dict[str, Any]) -> dict[str, Any]:
    """The ``tool_search_output`` for `answer`: the request's own definitions of its tools, loaded."""
    return {
        "type": "tool_search_output",
        "call_id": answer.call_id,
        "execution": "client",
        "status": "completed",
        "tools": definitions(body.get("tools") or [], answer.names),
    }


def definitions(tools: list[Any], names: tuple[str, ...]) -> list[dict[str, Any]]:
    """The function entries of `tools` named in `names`, in `names`' order, without ``defer_loading``
    (a namespace's own entries are looked up inside it and answered as that namespace, narrowed)."""
    by_name: dict[str, dict[str, Any]] = {}
    spaces: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "function" and isinstance(tool.get("name"), str):
            by_name[tool["name"]] = tool
        elif tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                if isinstance(inner, dict) and isinstance(inner.get("name"), str):
                    spaces[inner["name"]] = (tool, inner)
    found: list[dict[str, Any]] = []
    narrowed: dict[str, dict[str, Any]] = {}
    for name in names:
        if name in by_name:
            found.append({k: v for k, v in by_name[name].items() if k != "defer_loading"})
        elif name in spaces:
            space, inner = spaces[name]
            entry = narrowed.get(space["name"])
            if entry is None:
                entry = narrowed[space["name"]] = {**space, "tools": []}
                found.append(entry)
            entry["tools"].append({k: v for k, v in inner.items() if k != "defer_loading"})
    return found


async def _paired(items: list[Any], body: dict[str, Any], session: SearchSession) -> list[Any]:
    """`items` with every client search answered right after it (a replay without its output gets the
    same answer back) and every replayed search output narrowed to the tools this call defers."""
    answered = {i.get("call_id") for i in items if isinstance(i, dict) and i.get("type") == "tool_search_output"}
    paired: list[Any] = []
    for item in items:
        if isinstance(item, dict) and item.get("type") == "tool_search_output":
            names = session.permitted(_entry_names(item.get("tools") or []))
            item = {**item, "tools": definitions(body.get("tools") or [], names)}
        paired.append(item)
        if _is_client_search(item) and isinstance(item.get("call_id"), str) and item["call_id"] not in answered:
            answered.add(item["call_id"])
            paired.append(_output_item(await session.answer(item["call_id"], item.get("arguments")), body))
    return paired


def search_input(item: dict[str, Any]) -> dict[str, Any]:
    """A client search call as an input item, in one form whoever replays it (this transport, or the
    framework's replay of a stateless conversation): the cached prefix reads the same bytes."""
    return {
        "type": "tool_search_call",
        "call_id": item.get("call_id"),
        "execution": "client",
        "arguments": item.get("arguments"),
    }


def _is_client_search(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "tool_search_call" and item.get("execution") == "client"


def _entry_names(tools: list[Any]) -> list[str]:
    names: list[str] = []
    for tool in tools:
        if isinstance(tool, dict):
            inner = tool.get("tools") if tool.get("type") == "namespace" else [tool]
            names += [t["name"] for t in inner or [] if isinstance(t, dict) and isinstance(t.get("name"), str)]
    return names


def _items(value: Any) -> list[Any]:
    """A request's ``input`` as a list of items (a text is one user message)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value)


def _follow_up(body: dict[str, Any], reply: dict[str, Any], outputs: list[dict[str, Any]]) -> dict[str, Any]:
    """The request that continues `reply` with the search answers: on the server's conversation or
    stored response when there is one, else (``store: false``) with the whole input again."""
    if body.get("conversation"):
        return {**body, "input": outputs}
    if body.get("store") is False:
        replayed = [search_input(i) if _is_client_search(i) else i for i in reply.get("output") or []]
        return {**body, "input": [*_items(body.get("input")), *replayed, *outputs]}
    return {**body, "previous_response_id": reply.get("id"), "input": outputs}


def _merged(replies: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> dict[str, Any]:
    """The last reply, its output preceded by the earlier ones' (each followed by its answers), usage summed."""
    last = dict(replies[-1][0])
    if len(replies) == 1:
        return last
    last["output"] = [item for reply, answers in replies for item in [*(reply.get("output") or []), *answers]]
    last["usage"] = usage_sum([reply.get("usage") for reply, _ in replies])
    return last


def _incoming(reply: dict[str, Any] | None, spaces: Namespaces | None) -> dict[str, Any] | None:
    """A reply with its namespaced function calls under their full names."""
    if reply is None or spaces is None or not isinstance(reply.get("output"), list):
        return reply
    return {**reply, "output": [spaces.incoming(i) for i in reply["output"]]}


def _headers(response: httpx.Response) -> list[tuple[str, str]]:
    return [(k, v) for k, v in response.headers.multi_items() if k.lower() not in RESENT_HEADERS]


class _Spliced(httpx.AsyncByteStream):
    """A streamed response whose client searches are answered in flight: the first stream's events pass
    as they come; at its end, when it searched, the continued request's stream follows (its opening
    events left out, output indexes after the first's, sequence numbers continued); the last
    ``response.completed`` carries the merged output and the summed usage."""

    def __init__(
        self, wire: ResponsesWire, request: httpx.Request, body: dict[str, Any], first: httpx.Response,
        session: SearchSession | None, spaces: Namespaces | None,
    ) -> None:  # fmt: skip
        self.wire, self.request, self.body, self.response = wire, request, body, first
        self.session, self.spaces = session, spaces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        replies: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        offset = sequence = 0
        body, response = self.body, self.response
        while True:
            completed: dict[str, Any] | None = None
            async for event in _events(response):
                kind = event.get("type")
                if replies and kind in ("response.created", "response.in_progress"):
                    continue
                if kind == "response.completed":
                    completed = {**event, "response": _incoming(event.get("response") or {}, self.spaces)}
                    continue
                if self.spaces is not None and "item" in event:
                    event["item"] = self.spaces.incoming(event["item"])
                if isinstance(event.get("output_index"), int):
                    event["output_index"] += offset
                event["sequence_number"] = sequence
                sequence += 1
                yield _sse(event)
            await response.aclose()
            if completed is None:
                return  # the stream ended without completing: nothing to answer
            reply = completed.get("response") or {}
            continued = await self.wire.step(body, reply, self.session, replies)
            if continued is not None:
                body = continued
                following = await self.wire.send(self.request, body, self.spaces)
                if following.status_code == 200:
                    offset += len(reply.get("output") or []) + len(replies[-1][1])
                    response = following
                    continue
                await following.aclose()
                logger.warning("sk-toolfilter: continuing after a tool search failed (HTTP %s)", following.status_code)
            yield _sse({**completed, "response": _merged(replies), "sequence_number": sequence})
            return

    async def aclose(self) -> None:
        await self.response.aclose()


async def _events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The server-sent events of a streamed response, as JSON objects (blocks without JSON data skipped)."""
    buffer = b""
    async for chunk in response.aiter_bytes():
        buffer += chunk
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            event = _event(block)
            if event is not None:
                yield event
    event = _event(buffer)
    if event is not None:
        yield event


def _event(block: bytes) -> dict[str, Any] | None:
    data = b"".join(line[5:].strip() for line in block.splitlines() if line.startswith(b"data:"))
    if not data or data == b"[DONE]":
        return None
    try:
        event = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return event if isinstance(event, dict) else None


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event.get('type')}\ndata: {json.dumps(event)}\n\n".encode()
