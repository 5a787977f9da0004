"""Ranking the catalog against a query: BM25, semantic, or hybrid (RRF), plus exact-name hits."""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np

from sk_toolfilter.config import SearchMethod, ToolFilterConfig
from sk_toolfilter.errors import EmbeddingServiceError
from sk_toolfilter.fusion import normalize_by_max, normalize_cosine, rank_order, reciprocal_rank_fusion
from sk_toolfilter.index import ToolIndex
from sk_toolfilter.metadata import ToolMetadata

logger = logging.getLogger(__name__)

# Longer queries are cut (a pasted document should not cost a long tokenization per request).
MAX_QUERY_CHARS = 20_000


@dataclass(frozen=True)
class ScoredTool:
    """One tool's place in a ranking: final score, the score of each method, exact-name hit."""

    tool: ToolMetadata
    score: float
    method_scores: dict[str, float]
    name_match: bool = False

    @property
    def full_name(self) -> str:
        return self.tool.full_name


@dataclass(frozen=True)
class Ranking:
    """The ranked tools for one query (best first, only tools with some evidence)."""

    query: str
    requested_method: SearchMethod
    method: str
    tools: list[ScoredTool] = field(default_factory=list)
    fallback_reason: str | None = None


async def rank_tools(
    index: ToolIndex,
    query: str,
    config: ToolFilterConfig,
    *,
    limit: int | None = None,
    allowed: Collection[str] | None = None,
) -> Ranking:
    """Rank `index` against `query` with ``config.search_method``; keep the best `limit` tools.

    With `allowed`, every other tool is removed before scores are normalized, so the best allowed
    tool scores 1.0.

    Without embeddings, or when embedding the query fails, semantic and hybrid fall back to BM25
    (``Ranking.fallback_reason`` says why; the failure is logged as a warning).
    """
    requested: SearchMethod = config.search_method
    query = (query or "")[:MAX_QUERY_CHARS]
    if not query.strip() or len(index) == 0:
        return Ranking(query, requested, requested)

    mask = None if allowed is None else np.isin(index.names, list(allowed))

    def masked(raw: np.ndarray) -> np.ndarray:
        return raw if mask is None else np.where(mask, raw, 0.0)

    scores: dict[str, np.ndarray] = {}
    fallback_reason = None
    if requested in ("bm25", "hybrid"):
        scores["bm25"] = normalize_by_max(masked(index.bm25_raw_scores(query)))
    if requested in ("semantic", "hybrid"):
        if not index.has_embeddings:
            fallback_reason = "the index has no embedding service"
        else:
            try:
                vector = await index.embed_query(query)
                scores["semantic"] = normalize_cosine(masked(index.cosine_scores(vector)), config.semantic_floor)
            except EmbeddingServiceError as exc:
                fallback_reason = f"query embedding failed ({exc})"
                logger.warning("sk-toolfilter: %s; using BM25 for this request", fallback_reason)
        if fallback_reason is not None and "bm25" not in scores:
            scores["bm25"] = normalize_by_max(masked(index.bm25_raw_scores(query)))

    if len(scores) == 2:
        method = "hybrid"
        final = reciprocal_rank_fusion(scores, k=config.rrf_k, weights=config.method_weights)
    else:
        method, final = next(iter(scores.items()))

    named = [i for i in index.name_matcher.named_in(query) if mask is None or mask[i]]
    order = list(dict.fromkeys([*named, *rank_order(final).tolist()]))[:limit]
    named_set = set(named)
    ranked = [
        ScoredTool(
            tool=index.tools[i],
            score=1.0 if i in named_set else float(final[i]),
            method_scores={m: float(s[i]) for m, s in scores.items()},
            name_match=i in named_set,
        )
        for i in order
    ]
    return Ranking(query, requested, method, ranked, fallback_reason)
