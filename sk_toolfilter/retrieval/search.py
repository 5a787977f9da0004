"""Ranking the catalog against a query: BM25, semantic, or hybrid (RRF), plus exact-name hits.

Intent coverage: a request with several intents (steps a sequencing word starts, "…, then …"; or
``config.min_query_parts`` sentences or more) is also ranked intent by intent, and the rankings are
merged round by round — the whole request's best tool, each intent's best, then each one's second
best — so a near-duplicate of one intent's tool never takes the place of another intent's best.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from sk_toolfilter.basics.errors import EmbeddingServiceError
from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.config import SearchMethod, ToolFilterConfig
from sk_toolfilter.retrieval.first_stage import WEAK_WORD_MARGIN, FirstStage, TextScores, first_stage
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.memory import LearningMemory, ScopedMemory
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.reorderings import Ordered, ReorderingStep, StepNote, reorderings
from sk_toolfilter.retrieval.text import split_request_intents

logger = library_logger(__name__)

# Longer queries are cut (a pasted document should not cost a long tokenization per request).
MAX_QUERY_CHARS = 20_000
# A request is split into at most this many parts (each costs a BM25 pass and shares one embedding call).
MAX_QUERY_PARTS = 8


@dataclass(slots=True)  # not frozen: ~20 are built per request, and a frozen one costs 4x to build
class ScoredTool:
    """One tool's place in a ranking: final score, the score of each method, exact-name hit."""

    tool: ToolMetadata
    score: float
    method_scores: dict[str, float]
    name_match: bool = False
    evidence: bool = True
    """False for a tool that only fills a ranking shorter than its limit (:func:`rank_tools`): never sent."""

    @property
    def full_name(self) -> str:
        return self.tool.full_name


@dataclass(frozen=True)
class Ranking:
    """The ranked tools for one query: every tool with some evidence, best first; when they are fewer
    than the ranking's limit (and :func:`rank_tools` fills), the closest others by cosine after them
    (``evidence=False``, never sent)."""

    query: str
    requested_method: SearchMethod
    method: str
    tools: list[ScoredTool] = field(default_factory=list)
    fallback_reason: str | None = None
    no_tool_reason: str | None = None
    """Set when the request has no real evidence for any tool (small talk): only tools it names are sent."""
    without_evidence: list[tuple[str, str]] = field(default_factory=list)
    """When no tool has evidence: the closest few by cosine (and the one sharing the most words), as
    ``(full_name, why it has none)`` pairs for ``explain`` (they are never sent)."""
    steps: dict[ReorderingStep, StepNote] = field(default_factory=dict)
    """What each reordering after the first stage did, keyed by step (``cross-encoder``, ``learned
    ranker``, ``learning from use``), in the order they ran: whether it reordered, and what it did or
    why the order stands (learning from use: only when it found similar past requests)."""
    learned: dict[str, str] = field(default_factory=dict)
    """Tools that learning from use moved up, and why (\"3 past requests like this one (best 0.91) called it\")."""

    @property
    def second_stage(self) -> tuple[ReorderingStep, StepNote] | None:
        """The second stage that ran (``rerank``: the cross-encoder or the learned ranker) and its note."""
        for step in SECOND_STAGES:
            if step in self.steps:
                return step, self.steps[step]
        return None

    @property
    def learning_note(self) -> str | None:
        """What learning from use said when it moved nothing (\"not applied: trust 0.00 …\"), else None."""
        note = self.steps.get("learning from use")
        return note.text if note is not None and not note.reordered else None


SECOND_STAGES: tuple[ReorderingStep, ...] = ("cross-encoder", "learned ranker")


async def rank_tools(
    index: ToolIndex,
    query: str,
    config: ToolFilterConfig,
    *,
    limit: int | None = None,
    allowed: Collection[str] | np.ndarray | None = None,
    fill: bool = True,
    memory: LearningMemory | ScopedMemory | None = None,
) -> Ranking:
    """Rank `index` against `query` with ``config.search_method``; keep the best `limit` tools: the
    batch of one (:func:`rank_many`).

    With `allowed` (names, or a boolean mask over the catalog), every other tool is removed before
    scores are normalized, so the best allowed tool scores 1.0. Requests with several intents are
    ranked intent by intent too (see the module docstring).

    `fill`: when fewer than `limit` tools have evidence, the closest others by cosine follow them
    (``evidence=False``, score 0; :func:`apply_cutoff` never keeps them), so a ranking lists `limit`
    tools where the catalog has them. The selection path turns it off: it never sends them.

    Without embeddings, or when embedding the query fails, semantic and hybrid fall back to BM25
    (``Ranking.fallback_reason`` says why; the index's circuit breaker logs one warning per incident).

    With `memory` (learning from use, :mod:`sk_toolfilter.retrieval.memory`), what similar past requests
    called reorders the ranking; the scores stay the first stage's, position by position.
    """
    rankings = await rank_many(index, [query], config, limit=limit, allowed=allowed, fill=fill, memory=memory)
    return rankings[0]


async def rank_many(
    index: ToolIndex,
    texts: Sequence[str],
    config: ToolFilterConfig,
    *,
    limit: int | None = None,
    allowed: Collection[str] | np.ndarray | None = None,
    fill: bool = False,
    memory: LearningMemory | ScopedMemory | None = None,
    whole_text_limit: int | None = None,
) -> list[Ranking]:
    """One ranking per text, the primitive every ranking goes through: the request vectors of every
    text (the text and its intents) come from one embedding call, then each text is ranked with its
    own (an agent loop's request and its listed actions: one batch, not one call per action).

    `whole_text_limit`: the limit instead of `limit` for a text ranked whole (no intents). Its scores
    fall with its rank, so a cut that keeps at most that many never reads past them (a text ranked
    intent by intent interleaves its intents' lists: a later tool may score higher than an earlier one).
    """
    requested: SearchMethod = config.search_method
    _check_limit(limit)
    _check_limit(whole_text_limit)
    mask = _checked_mask(index, allowed)
    if mask is not None and mask.all():
        mask = None  # nothing to remove: skip the masking passes
    queries = [(text or "")[:MAX_QUERY_CHARS] for text in texts]
    parts = [_query_texts(q, config) if q.strip() and len(index) else [] for q in queries]
    flat = [part for text_parts in parts for part in text_parts]
    vectors, fallback_reason = await _request_vectors(index, flat, config) if flat else (None, None)
    # Every text's cosines in one read of the catalog (a request's intents, an agent loop's actions).
    cosines = None if vectors is None or len(vectors) == 1 else index.cosine_scores_many(vectors)
    rankings, offset = [], 0
    for query, text_parts in zip(queries, parts, strict=True):
        if not text_parts:
            rankings.append(Ranking(query, requested, requested))
            continue
        own = None if vectors is None else vectors[offset : offset + len(text_parts)]
        own_cosines = None if cosines is None else cosines[offset : offset + len(text_parts)]
        offset += len(text_parts)
        request = _Request(query, text_parts, own, fallback_reason, own_cosines)
        text_limit = whole_text_limit if whole_text_limit is not None and len(text_parts) == 1 else limit
        rankings.append(await _rank_one(index, request, config, text_limit, mask, fill, memory))
    return rankings


@dataclass(slots=True)  # built per request: a frozen one costs 4x to build
class _Request:
    """One text of a batch: its query, the texts it is ranked by (whole, then intents), their vectors
    and, for a batch of several texts, their cosines (computed for the batch at once)."""

    query: str
    texts: list[str]
    vectors: np.ndarray | None
    fallback_reason: str | None
    cosines: np.ndarray | None = None


async def _rank_one(
    index: ToolIndex,
    request: _Request,
    config: ToolFilterConfig,
    limit: int | None,
    mask: np.ndarray | None,
    fill: bool,
    memory: LearningMemory | ScopedMemory | None = None,
) -> Ranking:
    """One text's ranking from its vectors (:func:`rank_many`): the first stage, then each reordering
    (:mod:`sk_toolfilter.retrieval.reorderings`) over as many tools as the deepest of them reads."""
    first = await first_stage(index, request.query, request.texts, request.vectors, config, mask, request.cosines)
    steps, reads = reorderings(first, config, memory)
    depth = limit if limit is None or not reads else max(limit, reads)
    ordered = Ordered(first.order(depth))
    for step in steps:
        ordered = await step(first, ordered, depth)
    order, cosines = ordered.order[:limit], first.cosines
    without_evidence = []
    if not order and cosines is not None:
        bm25 = first.whole.raw.get("bm25")
        without_evidence = _closest_without_evidence(index, cosines, mask, config, bm25, first.no_tool_reason)
    order = list(dict.fromkeys([*first.named, *order]))[:limit]
    ranked = _scored_tools(index, first, order, ordered)
    if fill and limit is not None and len(order) < limit and cosines is not None and first.no_tool_reason is None:
        ranked += _filling(index, first.whole, order, cosines, mask, limit - len(order))
    return Ranking(
        request.query,
        config.search_method,
        first.whole.method,
        ranked,
        request.fallback_reason,
        first.no_tool_reason,
        without_evidence,
        ordered.steps,
        ordered.learned,
    )


def _filling(
    index: ToolIndex, whole: TextScores, order: list[int], cosines: np.ndarray, mask: np.ndarray | None, count: int
) -> list[ScoredTool]:
    """The closest tools without evidence that fill a short ranking (``evidence=False``, never sent)."""
    filling = _closest_left_out(order, cosines, mask, count)
    return [
        ScoredTool(index.tools[i], 0.0, scores, evidence=False)
        for i, scores in zip(filling, whole.method_scores_of(filling), strict=True)
    ]


async def _request_vectors(
    index: ToolIndex, texts: list[str], config: ToolFilterConfig
) -> tuple[np.ndarray | None, str | None]:
    """The request's vectors (one service call), or None and why the ranking falls back to BM25."""
    if config.search_method == "bm25":
        return None, None
    if index.vectors_pending:
        return None, index.vectors_pending  # one whole BM25 index until every vector is there
    if not index.has_embeddings:
        return None, index.vectors_failed or "the index has no embedding service"
    try:
        return await index.embed_queries(texts), None
    except EmbeddingServiceError as exc:
        # The circuit breaker logs one warning per incident; per request only at debug level.
        reason = f"query embedding failed ({exc})"
        logger.debug("sk-toolfilter: %s; using BM25 for this request", reason)
        return None, reason


def _scored_tools(index: ToolIndex, first: FirstStage, order: list[int], ordered: Ordered) -> list[ScoredTool]:
    """The ranked tools with their final and per-method scores (a named tool scores 1.0)."""
    named, second = set(first.named), ordered.second
    if ordered.positional or (second is not None and second.lists is not None):
        # The second stage or learning decides the order; the first stage's scores, position by position,
        # decide how many are sent (the cut sees the score sequence it would have seen).
        unnamed = iter(ordered.positional)
        finals = [1.0 if i in named else next(unnamed, 0.0) for i in order]
    else:
        finals = first.final[order].tolist()
    method_scores = first.whole.method_scores_of(order)
    if second is not None and second.scores:
        for i, scores in zip(order, method_scores, strict=True):
            if i in second.scores:
                scores["rerank"] = second.scores[i]
    tools = index.tools
    if not named:  # (most requests name no tool)
        return [
            ScoredTool(tools[i], score, scores) for i, score, scores in zip(order, finals, method_scores, strict=True)
        ]
    return [
        ScoredTool(tools[i], 1.0 if i in named else score, scores, i in named)
        for i, score, scores in zip(order, finals, method_scores, strict=True)
    ]


def _query_texts(query: str, config: ToolFilterConfig) -> list[str]:
    """The texts a query is ranked by: the whole query, then its intents (``split_queries``)."""
    if not config.split_queries:
        return [query]
    return [query, *split_request_intents(query, config.min_query_parts)[:MAX_QUERY_PARTS]]


def _check_limit(limit: object) -> None:
    """A limit is None or a positive whole number (a bool, float or string is refused, not coerced)."""
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int | np.integer) or limit < 1:
        raise ValueError(f"rank_tools: limit must be a positive whole number or None (every tool), not {limit!r}")


def _checked_mask(index: ToolIndex, allowed: Collection[str] | np.ndarray | None) -> np.ndarray | None:
    """`allowed` as a boolean mask over the catalog; a mask of another length or kind is an error (never
    read as "everything allowed")."""
    if allowed is None:
        return None
    if not isinstance(allowed, np.ndarray):
        if isinstance(allowed, str):
            raise ValueError("rank_tools: allowed must be a collection of full names, not one string")
        return index.mask_of(allowed)
    if allowed.dtype != np.bool_ or allowed.shape != (len(index),):
        raise ValueError(
            f"rank_tools: an allowed mask must be a boolean array of one entry per catalog tool (shape "
            f"({len(index)},)), not {allowed.dtype} of shape {allowed.shape}"
        )
    return allowed


def _closest_without_evidence(
    index: ToolIndex,
    cosines: np.ndarray,
    mask: np.ndarray | None,
    config: ToolFilterConfig,
    lexical: np.ndarray | None,
    no_tool_reason: str | None = None,
    count: int = 3,
) -> list[tuple[str, str]]:
    """The `count` tools closest to a request that no tool has evidence for (and the one sharing the
    most with it, when that is another), and why each is not ranked. `lexical`: BM25 scores (hybrid);
    `no_tool_reason`: why the request is small talk (then that is the reason the user needs to read)."""
    closest = _closest_left_out([], cosines, mask, count)
    if lexical is not None and lexical.max(initial=0.0) > 0:
        closest = list(dict.fromkeys([*closest, int(np.argmax(lexical))]))
    floor = f"no evidence: cosine {{:.2f}} is at or below semantic_floor {config.semantic_floor:.2f}"
    reasons = []
    for i in closest:
        why = floor.format(float(cosines[i]))
        if lexical is not None and lexical[i] > 0:
            why += (
                f"; it shares a word with the request, but so weakly linked (no tool clears the floor by "
                f"{WEAK_WORD_MARGIN:.2f}, and its cosine is more than {WEAK_WORD_MARGIN:.2f} below the closest "
                "tool's) a shared word is not enough"
            )
        elif lexical is not None:
            why += " and it shares no word with the request"
        reasons.append((index.tools[i].full_name, why if no_tool_reason is None else f"{why}; and {no_tool_reason}"))
    return reasons


def _closest_left_out(order: list[int], cosines: np.ndarray, mask: np.ndarray | None, count: int) -> list[int]:
    """The `count` tools closest by cosine among those a ranking left out for lack of evidence (best
    first, ties in catalog order). They fill a ranking shorter than its limit: on an unseen catalog a
    request's second tool is often just under the floor (models trained without metatool: 12 of the 30
    gold tools missing from its dev requests ranked short), and a list of five tells a reader more than
    a list of three. They come after every tool with evidence and are never sent."""
    pool = np.ones(len(cosines), dtype=bool) if mask is None else mask.copy()
    pool[order] = False
    candidates = np.flatnonzero(pool)
    if len(candidates) > count:  # only the best `count`, and every tie at the boundary, are sorted
        values = cosines[candidates]
        candidates = candidates[values >= np.partition(values, len(values) - count)[len(values) - count]]
    return candidates[np.lexsort((candidates, -cosines[candidates]))][:count].tolist()
