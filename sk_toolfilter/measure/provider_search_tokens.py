"""The tool tokens of a request with provider tool search (``report --provider-search``), estimated from
what OpenAI documents: the loaded tools' schemas in full; each deferred function by its name and
description ("for an individual deferred function, the model still sees the function name and
description, so in practice tool search is mostly deferring the parameter schema", OpenAI's tool-search
guide); and the ``tool_search`` tool. With Claude, from what Anthropic documents: a deferred tool "will
not be included in initial system prompt" (``defer_loading``), so only the loaded schemas and the search
tool count (on the same JSON, with the report's tokenizer: Claude's own tokenizer differs). A tool the
model then finds is loaded later: that cost depends on the model's searches and is not counted.
With ``search: filter`` the same, with the client-executed search tool in place of the provider's (its
description and parameters are on the wire); and within a conversation the loaded tools stay as its
first request sent them, so the tools prefix is cached from the second request on
(:func:`conversation_cache`). Measured figures need a live key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sk_toolfilter.basics.tokenizer import count_json_tokens
from sk_toolfilter.measure.caching import cache_split
from sk_toolfilter.provider_wire.search_answer import ANTHROPIC_CLIENT_SEARCH_TOOL, OPENAI_CLIENT_SEARCH_TOOL
from sk_toolfilter.selection.offer import Offer, search_offer
from sk_toolfilter.selection.provider_search import ANTHROPIC_SEARCH_TOOL, OPENAI_SEARCH_TOOL, AgentTools

if TYPE_CHECKING:
    from sk_toolfilter.config.provider_search import ProviderSearchConfig


def provider_search_tools(
    every_tool: Sequence[dict[str, Any]], offer: Offer
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The offer's loaded tools in full and its deferred ones by name and description (Chat Completions
    shapes in, Responses shapes out). `every_tool`: the unfiltered request's tools."""
    by_name = {t["function"]["name"]: t["function"] for t in every_tool}
    shown = [{"type": "function", **by_name[n]} for n in offer.names if n in by_name]
    deferred = [
        {"type": "function", "name": n, "description": by_name[n].get("description") or ""}
        for n in offer.deferred
        if n in by_name
    ]
    return shown, deferred


def provider_search_tokens(
    every_tool: Sequence[dict[str, Any]], offer: Offer, encoding: str, *, answered: bool = False, unit: str = "tool"
) -> tuple[int, int]:
    """(estimated tool tokens with OpenAI, with Claude) of one request sent as `offer` says; `answered`:
    the filter answers the search (its client-executed search tool instead of the provider's); `unit`:
    ``plugin`` sends OpenAI each plugin's deferred functions as namespaces (:func:`namespaced`)."""
    shown, deferred = provider_search_tools(every_tool, offer)
    if unit == "plugin":
        deferred = namespaced(deferred)
    openai_tool = OPENAI_CLIENT_SEARCH_TOOL if answered else OPENAI_SEARCH_TOOL
    claude_tool = ANTHROPIC_CLIENT_SEARCH_TOOL if answered else ANTHROPIC_SEARCH_TOOL
    openai = count_json_tokens([*shown, *deferred, openai_tool], encoding)
    return openai, count_json_tokens([*shown, claude_tool], encoding)


def namespaced(deferred: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """What OpenAI documents the model sees up front of deferred namespaces: each namespace by its name
    and description (the description the transport writes: ``Crm tools: f1, f2``), its functions not at
    all until a search loads them; functions without a plugin stay by name and description. The layout
    is the transport's (:func:`~sk_toolfilter.provider_wire.namespaces.namespace_layout`), from the
    ``Plugin-function`` names."""
    from sk_toolfilter.provider_wire.namespaces import namespace_layout

    parts = [(str(t["name"]), *str(t["name"]).partition("-")[::2]) for t in deferred]
    layout = namespace_layout((name, plugin, function) for name, plugin, function in parts if function)
    spaces: dict[str, list[str]] = {}
    plain = []
    for tool in deferred:
        where = layout.get(str(tool["name"]))
        if where is None:
            plain.append(tool)
        else:
            spaces.setdefault(where[0], []).append(where[1])
    entries = [
        {"type": "namespace", "name": space, "description": f"{space} tools: " + ", ".join(members)}
        for space, members in spaces.items()
    ]
    return [*plain, *entries]


def conversation_cache(
    manager: AgentTools,
    every_tool: Sequence[dict[str, Any]],
    selections: Sequence[Sequence[str]],
    tokens_filtering: Sequence[int],
    config: ProviderSearchConfig,
    encoding: str,
) -> dict[str, tuple[int, int]]:
    """(uncached, cached) OpenAI tool tokens over a conversation's requests, per way of sending them:
    ``filtering`` (each request's selection; `tokens_filtering` its tokens), ``provider search`` (each
    selection loaded, the rest deferred: the list changes when the selection does) and ``filter-answered
    search`` (the first request's selection loaded for the whole conversation, the rest deferred)."""
    names = [t["function"]["name"] for t in every_tool]
    offers = [search_offer(manager, names, list(selection), config) for selection in selections]
    hosted = [provider_search_tokens(every_tool, offer, encoding)[0] for offer in offers]
    first = offers[0] if offers else Offer([], True)
    answered = provider_search_tokens(every_tool, first, encoding, answered=True)[0]
    return {
        "filtering": cache_split(selections, tokens_filtering),
        "provider search": cache_split([o.on_wire for o in offers], hosted),
        "filter-answered search": cache_split([first.on_wire] * len(offers), [answered] * len(offers)),
    }
