"""Finding a searchable tool by name, or by a query: what the discovery plugin asks of a catalog."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class CatalogMatches:
    """A query's answer from the catalog: the tools that match it, and (when asked for) the nearest
    others — so that an answer is never empty while searchable tools remain."""

    matched: list[ToolMetadata]
    """Tools with evidence for the query (a name match, or a score of at least :data:`MIN_MATCH_SCORE`
    of the best), best first; every searchable tool for an empty query."""
    nearest: list[ToolMetadata] = field(default_factory=list)
    """The best-ranked tools after the matches, when fewer matched than asked (none for small talk)."""


async def search_catalog(
    catalog: Catalog,
    query: str,
    config: ToolFilterConfig,
    exists: Callable[[str], bool],
    memory: ScopedMemory | None = None,
    *,
    nearest: int = 0,
) -> CatalogMatches:
    """Searchable tools matching `query` (best first; `memory`: reordered by learning from use too),
    and up to `nearest` in all with the best-ranked others; every searchable tool for an empty query."""
    if not query.strip():
        return CatalogMatches(
            [t for t in catalog.index.tools if t.full_name in catalog.searchable and exists(t.full_name)]
        )
    ranking = await rank_tools(catalog.index, query, config, allowed=catalog.searchable_mask, memory=memory)
    ranked = [s for s in ranking.tools if exists(s.full_name)]
    matched = [s.tool for s in ranked if s.name_match or s.score >= MIN_MATCH_SCORE]
    room = nearest - len(matched)
    if room <= 0 or ranking.no_tool_reason is not None:  # small talk stays unanswered
        return CatalogMatches(matched)
    taken = {t.full_name for t in matched}
    others = [s.full_name for s in ranked if s.full_name not in taken] + [n for n, _ in ranking.without_evidence]
    closest = [catalog.index.get(n) for n in dict.fromkeys(others) if n in catalog.searchable and exists(n)]
    return CatalogMatches(matched, [t for t in closest if t is not None][:room])
