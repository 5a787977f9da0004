"""Tools that give another tool what it needs: read from the schemas, nothing learned.

``estimate_distance(cityA: "The zipcode of the first city")`` needs a zipcode, and
``get_zipcode_based_on_city`` gets one; ``get_library_docs(context7CompatibleLibraryID)`` needs what
``resolve_library_id`` returns; ``cancel_order(order_id)`` what ``get_order_history`` lists. A request
names the goal ("how far is San Francisco from Los Angeles?"), rarely the lookup before it, so an agent
loop that offers only the goal's tool leaves the model unable to fill the argument.

A *provider* of a tool's required parameter is a tool of the same plugin (or MCP server) whose name is a
lookup — a retrieval verb (get, list, search, find, …) and an object — whose object words all occur in
the parameter's name and the head of its description ("zipcode … city" ⊆ "cityA: The zipcode [of the
first city]"), that does not itself require that parameter (``get_order_details(order_id)`` needs an order id, it does
not give one). Free-text parameters (a query, a message, content) are filled by the model, not by a
lookup, and have no providers. A plugin of more than :data:`MAX_PLUGIN_TOOLS` tools is a catalog, not
one service: its tools are not linked.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sk_toolfilter.retrieval.metadata import ParameterMetadata, ToolMetadata
from sk_toolfilter.retrieval.text import tokenize

MAX_PLUGIN_TOOLS = 256
# A tool name starting with one of these (stemmed) looks something up.
LOOKUP_VERBS = frozenset(
    tokenize("get gets list lists search find lookup fetch retrieve query read show describe view resolve locate")
)
# Words that say how, not what: a provider's object is what remains without them.
NOT_OBJECTS = frozenset(
    tokenize(
        "id ids identifier name names based all info information details detail data list history stats "
        "statistics status given specified current new specific by on in from of for to with"
    )
)
# Parameters the model writes itself (free text), or picks from a fixed set (a kind, a mode, an amount).
NOT_REFERENCES = frozenset(
    tokenize(
        "query queries q keyword keywords search term terms text content contents message messages prompt "
        "title description body comment note notes instruction instructions question answer "
        "type kind mode format style level amount count limit size"
    )
)
# A parameter description's head — "The zipcode" of "The zipcode of the first city" — ends here.
_HEAD_END = re.compile(r"\b(?:of|to|for|in|from|that|which|with|at|on|by|when|if|as)\b|[,.;:(]", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Provider:
    """``name`` can give the value of ``parameter`` of the tool it is listed for."""

    name: str
    parameter: str


def lookup_object(tool: ToolMetadata) -> frozenset[str]:
    """What a lookup tool's name says it gives (stemmed words), or nothing when it is no lookup."""
    words = tokenize(tool.name)
    if not words or words[0] not in LOOKUP_VERBS:
        return frozenset()
    return frozenset(w for w in words[1:] if w not in NOT_OBJECTS and w not in LOOKUP_VERBS)


def _need(parameter: ParameterMetadata) -> frozenset[str]:
    """What a parameter is (the words of its name and its description's head, stemmed), or nothing
    when no lookup gives such a value (free text, a kind or an amount: its name's last word says so)."""
    words = tokenize(parameter.name)
    if words and words[-1] in NOT_REFERENCES:
        return frozenset()
    head = _HEAD_END.split(parameter.description, maxsplit=1)[0]
    return frozenset(words).union(tokenize(head)) - NOT_OBJECTS


def find_providers(tools: Iterable[ToolMetadata]) -> dict[str, tuple[Provider, ...]]:
    """For each tool with a required parameter some lookup tool of its plugin gives: those providers,
    in catalog order (one entry per provider, for its first such parameter)."""
    by_plugin: dict[str, list[ToolMetadata]] = defaultdict(list)
    for tool in tools:
        by_plugin[tool.plugin].append(tool)
    found: dict[str, tuple[Provider, ...]] = {}
    for members in by_plugin.values():
        lookups = [(t, obj) for t in members if (obj := lookup_object(t))]
        if not lookups or len(members) > MAX_PLUGIN_TOOLS:
            continue
        needs = {t.full_name: [(p.name, _need(p)) for p in t.parameters if p.required] for t in members}
        for tool in members:
            providers: dict[str, Provider] = {}
            for parameter, need in needs[tool.full_name]:
                for lookup, obj in lookups:
                    if lookup.full_name == tool.full_name or lookup.full_name in providers or not obj <= need:
                        continue
                    if any(need <= own for _, own in needs[lookup.full_name]):
                        continue  # it needs the same thing itself
                    providers[lookup.full_name] = Provider(lookup.full_name, parameter)
            if providers:
                found[tool.full_name] = tuple(providers.values())
    return found


def providers_of(names: Iterable[str], providers: Mapping[str, tuple[Provider, ...]]) -> list[tuple[str, Provider]]:
    """(consumer, provider) for each of `names` in order, each provider once."""
    seen: set[str] = set()
    out = []
    for name in names:
        for provider in providers.get(name, ()):
            if provider.name not in seen:
                seen.add(provider.name)
                out.append((name, provider))
    return out
