"""``tool_filtering.provider_search``: the tools the filter does not load stay findable through the
model provider's own tool search (OpenAI Responses ``tool_search``, Anthropic's tool search tool)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sk_toolfilter.config.base import StrictConfig


class ProviderSearchConfig(StrictConfig):
    """Provider tool search (:mod:`sk_toolfilter.selection.provider_search`). On: every tool this agent
    may use goes on the wire — the filter's selection loaded as usual, every other tool with
    ``defer_loading: true`` — plus the provider's search tool, so a tool the ranking missed is one
    server-side search away. Excluded and hidden tools are never sent, deferred or not; the discovery
    tools are not sent (one way to find tools, not two). Only for clients and models that support it
    (Agent Framework's OpenAI Responses client with gpt-5.4 or later, its Anthropic client with Claude 4.5
    or later); anything else is an error at start.

    ``search: filter`` answers the model's search with this library's ranking (OpenAI's ``tool_search``
    with ``execution: "client"``; Anthropic's custom search tool answered with ``tool_reference``
    blocks): :mod:`sk_toolfilter.provider_wire.search_answer`. Within a conversation the loaded tools and
    their order stay as its first request sent them (the cached prefix); found tools arrive in the
    conversation, after it.
    """

    enabled: bool = Field(default=False, description="Send the tools not selected as deferred, with the search tool.")
    provider: Literal["auto", "openai", "anthropic"] = Field(
        default="auto", description="Whose tool search: auto reads it from the agent's chat client."
    )
    search: Literal["provider", "filter"] = Field(
        default="provider",
        description="Who answers the model's tool search: provider (OpenAI's hosted search, Anthropic's BM25) or "
        "filter (this library's ranking and learning from use, through OpenAI's client-executed tool_search or "
        "Anthropic's custom search tool with tool_reference results).",
    )
    results: int = Field(
        default=5,
        ge=1,
        le=20,
        description="search: filter — tools loaded per search answer (the filter's first, among the deferred ones).",
    )
    unit: Literal["auto", "tool", "plugin"] = Field(
        default="auto",
        description="What is deferred: each function (tool), or each plugin / MCP server as one OpenAI namespace "
        "of at most 9 functions, larger ones split (plugin; OpenAI only). auto: plugin with OpenAI (the model "
        "sees a namespace by its name and description only: on the bundled agent 7,273 tools tokens against "
        "26,122 for tool), tool with Claude (no namespaces).",
    )
    model_supports_tool_search: bool = Field(
        default=False,
        description="true: the model behind the client's name supports tool search (a proxy's alias or an Azure "
        "deployment such as my-gpt54); the name is then not checked against the models the provider documents.",
    )
    loaded: int | None = Field(
        default=None,
        ge=1,
        le=128,
        description="At most this many of the selection are loaded (null: the selection as top_k and the pins "
        "make it); the rest of the agent's tools are deferred.",
    )
