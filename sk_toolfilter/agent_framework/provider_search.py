"""Provider tool search in Agent Framework: an OpenAI Responses client that sends the tools the filter
did not select with ``defer_loading: true``, plus the hosted ``tool_search`` tool (the Anthropic client:
:mod:`sk_toolfilter.agent_framework.anthropic_search`).

Agent Framework has no public hook for either: its Responses client turns each ``FunctionTool`` into a
``FunctionToolParam`` without ``defer_loading`` in ``_prepare_tools_for_openai`` (private). This client
overrides that method (tests/test_provider_search.py fails loudly when Agent Framework renames it or
stops calling it). Which tools to defer comes from the filter's chat middleware
(:class:`~sk_toolfilter.agent_framework.middleware.ToolFilterMiddleware`) through a context variable,
for the tool objects of that call only.

    client = ToolSearchOpenAIChatClient(model="gpt-5.4")          # a model without tool search: ConfigError
    tool_filter = await create_agent_framework_filter(tools, config, agent_client=client)
    agent = Agent(client=client, tools=tool_filter.tools, middleware=tool_filter.middleware)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpx
from agent_framework import Content
from agent_framework_openai import OpenAIChatClient

from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.provider_wire.openai_responses import ResponsesWire, search_input
from sk_toolfilter.provider_wire.search_answer import MAX_ARGUMENT_CHARS, OPENAI_CLIENT_SEARCH_TOOL
from sk_toolfilter.provider_wire.wrapping import wrap_transports
from sk_toolfilter.selection.provider_search import OPENAI_SEARCH_TOOL, check_mode, check_model, with_deferred


@dataclass(frozen=True)
class DeferredTools:
    """What one model call defers: the names, and the identity of the tool objects it sends (a mark
    left by another agent's call is never applied to this one); `answered`: the filter answers the
    search (``search: filter``: the client-executed search tool goes on the wire)."""

    names: frozenset[str]
    tools: frozenset[int]
    answered: bool = False


_DEFERRED: ContextVar[DeferredTools | None] = ContextVar("sk_toolfilter_af_deferred", default=None)


def mark_deferred(names: Sequence[str], sent: Sequence[Any], *, answered: bool = False) -> None:
    """Tell the client which of `sent` (this model call's tool objects) go deferred; `answered`: the
    filter answers the search."""
    marked = DeferredTools(frozenset(names), frozenset(id(t) for t in sent), answered) if names else None
    _DEFERRED.set(marked)


def deferred_tools(tools: Any) -> DeferredTools | None:
    """What to send deferred with `tools` (a client's tool list for one request), or None when the
    filter marked nothing for these tool objects."""
    mark = _DEFERRED.get()
    return mark if mark is not None and _same_tools(tools, mark) else None


def _client_search_call(content: Content) -> dict[str, Any] | None:
    """A client-executed search call as the Responses input item it was (the wire transport pairs it
    with the filter's answer), or None for any other content."""
    if not _is_tool_search_call(content) or _openai_property(content, "execution") != "client":
        return None
    return search_input({"call_id": content.call_id, "arguments": replayed_arguments(content.arguments)})


def replayed_arguments(arguments: Any) -> Any:
    """A search call's arguments as replayed: a text parsed when it is at most
    :data:`~sk_toolfilter.provider_wire.search_answer.MAX_ARGUMENT_CHARS` long and nested within JSON's depth
    (anything else — too long, too deep, not JSON — replays as ``{}``: a search for nothing)."""
    if not isinstance(arguments, str):
        return arguments
    if len(arguments) > MAX_ARGUMENT_CHARS:
        return {}
    try:
        return json.loads(arguments)
    except (ValueError, RecursionError):
        return {}


def _is_tool_search_call(content: Content) -> bool:
    item_type = _openai_property(content, "item_type")
    return content.type == "function_call" and bool(content.hosted) and item_type == "tool_search_call"


def _openai_property(content: Content, key: str) -> Any:
    """What Agent Framework noted of a Responses item (its ``openai`` properties, else the legacy flat ones)."""
    properties = content.additional_properties or {}
    openai = properties.get("openai") if isinstance(properties.get("openai"), dict) else {}
    return (openai or {}).get(key, properties.get(key))


class ToolSearchOpenAIChatClient(OpenAIChatClient):
    """Agent Framework's OpenAI Responses client with provider tool search: the filter's selection is
    loaded, every other tool this agent may use is sent deferred, with ``{"type": "tool_search"}``.

    Built for a model with tool search only (gpt-5.4 and later): any other model is a
    :class:`~sk_toolfilter.basics.errors.ConfigError` here, before a request is sent.

    A stateless conversation (``store=False``) replays the model's earlier turns as input; Agent
    Framework keeps a ``tool_search_call`` as a hosted function call and drops the
    ``tool_search_output`` that came with it, so it would replay a function call named ``tool_search``
    with no output. This client leaves that call out of the replay: the deferred tools are on every
    request, and the model searches again when it needs one."""

    tool_search_provider = "openai"

    def __init__(self, model: str | None = None, *, model_supports_tool_search: bool = False, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.model_supports_tool_search = model_supports_tool_search
        """True: the model behind this name (a proxy's alias, an Azure deployment) supports tool search."""
        check_model("openai", self.model, assumed=model_supports_tool_search)
        # The filter answers the search on the wire (search: filter); inert for any other request. The SDK
        # client's own HTTP client (its proxy, timeouts, limits) is kept: its transports are wrapped.
        # (the wire speaks httpx: a client the application gave the SDK; the SDK's own default is replaced)
        if not wrap_transports(getattr(self.client, "_client", None), ResponsesWire, httpx.AsyncClient):
            self.client = self.client.with_options(http_client=httpx.AsyncClient(transport=ResponsesWire()))  # type: ignore[arg-type]

    def _prepare_tools_for_openai(self, tools: Any) -> list[Any]:
        prepared = list(super()._prepare_tools_for_openai(tools))
        mark = deferred_tools(tools)
        if mark is None:
            return prepared
        search_tool = OPENAI_CLIENT_SEARCH_TOOL if mark.answered else OPENAI_SEARCH_TOOL
        return with_deferred(prepared, mark.names, "function", search_tool)

    def _prepare_content_for_openai(self, role: Any, content: Content, **kwargs: Any) -> dict[str, Any]:
        if _is_tool_search_call(content):
            # A search the filter answered is replayed (the transport puts its answer back after it);
            # the provider's own is left out (see the class docstring; an empty item is skipped).
            return _client_search_call(content) or {}
        return dict(super()._prepare_content_for_openai(role, content, **kwargs))


def _same_tools(tools: Any, mark: DeferredTools) -> bool:
    items = tools if isinstance(tools, list | tuple) else [tools]
    return {id(t) for t in items if t is not None and not isinstance(t, dict)} <= mark.tools


def check_client(
    client: Any, model: str | None = None, provider: str = "auto", unit: str = "tool", assumed: bool = False
) -> None:
    """A :class:`ConfigError` unless `client` can send deferred tools (this library's
    :class:`ToolSearchOpenAIChatClient` or ``ToolSearchAnthropicClient``), of `provider` unless "auto",
    for `model` (by default its own; not checked when `assumed` or the client was built with
    ``model_supports_tool_search=True``), deferred by `unit` (namespaces: OpenAI only)."""
    found = getattr(type(client), "tool_search_provider", None)
    if found is None:
        raise ConfigError(
            f"tool_filtering.provider_search is on, but the agent's chat client is {type(client).__name__}, which "
            "sends no deferred tools: use sk_toolfilter.agent_framework.ToolSearchOpenAIChatClient (OpenAI "
            "Responses, gpt-5.4 or later) or sk_toolfilter.agent_framework.anthropic_search.ToolSearchAnthropicClient "
            "(Claude 4.5 or later), or set provider_search.enabled: false"
        )
    if provider not in ("auto", found):
        raise ConfigError(
            f"tool_filtering.provider_search.provider is {provider!r}, but the agent's chat client is "
            f"{type(client).__name__} ({found}'s tool search): set provider: {found} (or auto)"
        )
    check_model(found, model or client.model, assumed=assumed or getattr(client, "model_supports_tool_search", False))
    check_mode(found, unit)
