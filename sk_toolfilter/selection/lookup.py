"""Finding a searchable tool by name, or by a query: what the discovery plugin asks of a catalog."""

from __future__ import annotations

from collections.abc import Callable

from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.retrieval.memory import ScopedMemory
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.search import rank_tools
from sk_toolfilter.selection.catalog_upkeep import Catalog

MIN_MATCH_SCORE = 0.3
"""A tool scoring below this fraction of the best match is not a discovery match."""


def find_searchable(catalog: Catalog, name: str, exists: Callable[[str], bool]) -> ToolMetadata | None:
    """A searchable tool by full name (``Plugin-function`` or ``Plugin.function``) or unique bare name."""
    name = name.strip()
    for candidate in (name, name.replace(".", "-", 1)):
        if candidate in catalog.searchable and exists(candidate):
            return catalog.index.get(candidate)
    bare = [n for n in catalog.searchable if n.split("-", 1)[-1] == name]
    return catalog.index.get(bare[0]) if len(bare) == 1 and exists(bare[0]) else None


async def search_catalog(
    catalog: Catalog,
    query: str,
    config: ToolFilterConfig,
    exists: Callable[[str], bool],
    memory: ScopedMemory | None = None,
) -> list[ToolMetadata]:
    """Searchable tools matching `query` (best first; `memory`: reordered by learning from use too);
    every searchable tool for an empty query."""
    if not query.strip():
        return [t for t in catalog.index.tools if t.full_name in catalog.searchable and exists(t.full_name)]
    ranking = await rank_tools(catalog.index, query, config, allowed=catalog.searchable_mask, memory=memory)
    return [s.tool for s in ranking.tools if (s.name_match or s.score >= MIN_MATCH_SCORE) and exists(s.full_name)]
