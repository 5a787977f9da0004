"""Provider tool search with Agent Framework's Anthropic client: the tools the filter did not select go
with ``defer_loading: true``, beside Anthropic's ``tool_search_tool_bm25`` (Claude 4.5 and later).

Needs ``pip install "sk-toolfilter[anthropic]"``. Like the OpenAI client
(:mod:`sk_toolfilter.agent_framework.provider_search`), it overrides private methods of Agent
Framework's client, pinned by tests/test_provider_search.py:

- ``_prepare_tools_for_anthropic``: the deferred flag and the search tool;
- ``_prepare_message_for_anthropic``: Agent Framework keeps the model's ``server_tool_use`` (the search)
  as a hosted function call and drops its ``tool_search_tool_result``, so it would replay the search as
  a client ``tool_use`` with no ``tool_result`` — which the Messages API refuses. It is left out of
  the replay (the deferred tools are on every request; the model searches again when it needs one).

    client = ToolSearchAnthropicClient(model="claude-sonnet-4-5")   # an older model: ConfigError, here
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sk_toolfilter.basics.errors import ToolFilterError, install_line

try:
    from agent_framework import Message
    from agent_framework_anthropic import AnthropicClient
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ToolFilterError(f"Agent Framework's Anthropic client is not installed: {install_line('anthropic')}") from exc

import httpx2

from sk_toolfilter.agent_framework.provider_search import deferred_tools
from sk_toolfilter.provider_wire.anthropic_messages import MessagesWire
from sk_toolfilter.provider_wire.search_answer import ANTHROPIC_CLIENT_SEARCH_TOOL
from sk_toolfilter.provider_wire.wrapping import wrap_transports
from sk_toolfilter.selection.provider_search import ANTHROPIC_SEARCH_TOOL, check_model, with_deferred


class ToolSearchAnthropicClient(AnthropicClient):
    """Agent Framework's Anthropic client with provider tool search: the filter's selection is loaded,
    every other tool this agent may use is sent with ``defer_loading: true``, with Anthropic's BM25
    tool search tool. Built for Claude 4.5 or later only (else a ConfigError naming the model)."""

    tool_search_provider = "anthropic"

    def __init__(self, *, model_supports_tool_search: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model_supports_tool_search = model_supports_tool_search
        """True: the model behind this name (a proxy's alias, a deployment) supports tool search."""
        check_model("anthropic", self.model, assumed=model_supports_tool_search)
        # The filter answers the search on the wire (search: filter); inert for any other request. The SDK
        # client's own HTTP client (its proxy, timeouts, limits) is kept: its transports are wrapped.
        if not wrap_transports(getattr(self.anthropic_client, "_client", None), MessagesWire, httpx2.AsyncClient):
            wire = httpx2.AsyncClient(transport=MessagesWire())
            self.anthropic_client = self.anthropic_client.with_options(http_client=wire)

    def _prepare_tools_for_anthropic(self, options: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
        prepared = super()._prepare_tools_for_anthropic(options, *args, **kwargs)
        mark = deferred_tools(options.get("tools"))
        if not prepared or mark is None or "tools" not in prepared:
            return prepared
        search_tool = ANTHROPIC_CLIENT_SEARCH_TOOL if mark.answered else ANTHROPIC_SEARCH_TOOL
        return {**prepared, "tools": with_deferred(prepared["tools"], mark.names, "custom", search_tool)}

    def _prepare_message_for_anthropic(self, message: Message) -> dict[str, Any]:
        prepared = dict(super()._prepare_message_for_anthropic(message))
        searches = {c.call_id for c in message.contents if c.type == "function_call" and c.hosted}
        content = prepared.get("content")
        if searches and isinstance(content, list):
            prepared["content"] = [b for b in content if not (b.get("type") == "tool_use" and b.get("id") in searches)]
        return prepared
