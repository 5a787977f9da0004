"""Ranking the catalog against a query: BM25, semantic, or hybrid (RRF), plus exact-name hits."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.config import SearchMethod, ToolFilterConfig
from sk_toolfilter.errors import EmbeddingServiceError
from sk_toolfilter.retrieval.fusion import (
    normalize_by_max,
    normalize_cosine,
    rank_order,
    reciprocal_rank_fusion,
    zscore_blend,
)
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.small_talk import judge_small_talk
from sk_toolfilter.retrieval.text import split_request_intents

logger = library_logger(__name__)

# Longer queries are cut (a pasted document should not cost a long tokenization per request).
MAX_QUERY_CHARS = 20_000
# A request is split into at most this many parts (each costs a BM25 pass and shares one embedding call).
MAX_QUERY_PARTS = 8


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
    no_tool_reason: str | None = None
    """Set when the request has no real evidence for any tool (small talk): only tools it names are sent."""


async def rank_tools(
    index: ToolIndex,
    query: str,
    config: ToolFilterConfig,
    *,
    limit: int | None = None,
    allowed: Collection[str] | np.ndarray | None = None,
    prefetch: Sequence[str] = (),
) -> Ranking:
    """Rank `index` against `query` with ``config.search_method``; keep the best `limit` tools.

    With `allowed` (names, or a boolean mask over the catalog), every other tool is removed before
    scores are normalized, so the best allowed tool scores 1.0.

    Intent coverage: a request with several intents (steps a sequencing word starts, "…, then …";
    or ``config.min_query_parts`` sentences or more) is also ranked intent by intent, and the
    rankings are merged round by round — the whole request's best tool, each intent's best, then
    each one's second best — so a near-duplicate of one intent's tool never takes the place of
    another intent's best.

    `prefetch`: texts to embed in the same service call, for rankings that follow (the index
    reuses their vectors). Without embeddings, or when embedding the query fails, semantic and
    hybrid fall back to BM25 (``Ranking.fallback_reason`` says why; the index's circuit breaker
    logs one warning per incident).
    """
    requested: SearchMethod = config.search_method
    query = (query or "")[:MAX_QUERY_CHARS]
    if not query.strip() or len(index) == 0:
        return Ranking(query, requested, requested)

    mask = allowed if allowed is None or isinstance(allowed, np.ndarray) else index.mask_of(allowed)
    if mask is not None and mask.all():
        mask = None  # nothing to remove: skip the masking passes
    texts = [query]
    if config.split_queries:
        texts += split_request_intents(query, config.min_query_parts)[:MAX_QUERY_PARTS]

    vectors, fallback_reason = None, None
    if requested != "bm25":
        if index.vectors_pending:
            fallback_reason = index.vectors_pending  # one whole BM25 index until every vector is there
        elif not index.has_embeddings:
            fallback_reason = "the index has no embedding service"
        else:
            try:
                vectors = await index.embed_queries([*texts, *prefetch])
            except EmbeddingServiceError as exc:
                # The circuit breaker logs one warning per incident; per request only at debug level.
                fallback_reason = f"query embedding failed ({exc})"
                logger.debug("sk-toolfilter: %s; using BM25 for this request", fallback_reason)

    scored = [
        _score_text(index, text, None if vectors is None else vectors[i], config, mask) for i, text in enumerate(texts)
    ]
    method, final, method_scores, cosines = scored[0]
    no_tool_reason = None
    if vectors is not None and cosines is not None and config.no_tool_margin is not None:
        small_talk = await index.small_talk_vectors()
        if small_talk is not None:
            allowed_cosines = cosines if mask is None else cosines[mask]
            verdict = judge_small_talk(vectors[0], small_talk, allowed_cosines, config.no_tool_margin)
            no_tool_reason = verdict.reason() if verdict is not None else None
    order = rank_order(final, limit).tolist()
    if len(scored) > 1:
        order = _interleave([order, *(rank_order(s[1], limit).tolist() for s in scored[1:])])
        final = np.maximum.reduce([s[1] for s in scored])

    named = [i for i in index.name_matcher.named_in(query) if mask is None or mask[i]]
    order = list(dict.fromkeys([*named, *order]))[:limit]
    named_set = set(named)
    ranked = [
        ScoredTool(
            tool=index.tools[i],
            score=1.0 if i in named_set else float(final[i]),
            method_scores={m: float(v[i]) for m, v in method_scores.items()},
            name_match=i in named_set,
        )
        for i in order
    ]
    return Ranking(query, requested, method, ranked, fallback_reason, no_tool_reason)


def _score_text(
    index: ToolIndex,
    text: str,
    vector: np.ndarray | None,
    config: ToolFilterConfig,
    mask: np.ndarray | None,
) -> tuple[str, np.ndarray, dict[str, np.ndarray], np.ndarray | None]:
    """(method used, final [0, 1] scores, per-method [0, 1] scores, raw cosines or None) of one query text."""

    def masked(raw: np.ndarray) -> np.ndarray:
        return raw if mask is None else np.where(mask, raw, 0.0)

    use_bm25 = config.search_method != "semantic" or vector is None
    use_semantic = config.search_method != "bm25" and vector is not None
    raw: dict[str, np.ndarray] = {}
    normalized: dict[str, np.ndarray] = {}
    if use_bm25:
        raw["bm25"] = masked(index.bm25_raw_scores(text))
        normalized["bm25"] = normalize_by_max(raw["bm25"])
    if use_semantic:
        assert vector is not None
        raw["semantic"] = masked(index.cosine_scores(vector))
        normalized["semantic"] = normalize_cosine(raw["semantic"], config.semantic_floor)
    cosines = raw.get("semantic")
    if len(raw) == 1:
        method = next(iter(raw))
        return method, normalized[method], normalized, cosines
    weights = {str(method): weight for method, weight in config.method_weights.items()}
    if "method_weights" not in config.model_fields_set and index.fusion_weights is not None:
        weights = index.fusion_weights  # the blend fitted for the index's embedding model
    if config.fusion == "rrf":
        final = reciprocal_rank_fusion(normalized, k=config.rrf_k, weights=weights)
    else:
        evidence = (normalized["bm25"] > 0) | (normalized["semantic"] > 0)
        final = zscore_blend(raw, weights, evidence, mask)
    return "hybrid", final, normalized, cosines


def _interleave(rankings: list[list[int]]) -> list[int]:
    """Round-robin merge of rankings (first ranking first in each round), without repeats."""
    merged: dict[int, None] = {}
    for position in range(max(len(r) for r in rankings)):
        for ranking in rankings:
            if position < len(ranking):
                merged.setdefault(ranking[position])
    return list(merged)
