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
from sk_toolfilter.retrieval.candidate_features import FirstStagePass, candidate_features, load_learned_ranker
from sk_toolfilter.retrieval.fusion import (
    float32_threshold,
    normalize_by_max,
    normalize_cosine,
    rank_order,
    reciprocal_rank_fusion,
    zscore_blend,
)
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.rerank import SecondStage, rerank_lists
from sk_toolfilter.retrieval.small_talk import (
    MAX_CLEAR_SUBJECT_WORDS,
    MAX_SUBJECT_WORDS,
    content_marks,
    judge_small_talk,
    subject_words,
)
from sk_toolfilter.retrieval.text import split_request_intents
from sk_toolfilter.retrieval.usage import ScopedUsage, UsageMemory

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
    rerank: str | None = None
    """What the second stage did (``rerank``): reordered the shortlist, or why the first stage's order stands."""
    learned: dict[str, str] = field(default_factory=dict)
    """Tools that learning from use moved up, and why (\"3 past requests like this one (best 0.91) called it\")."""
    learning_note: str | None = None
    """When similar past requests were found but learning moved nothing: why (\"not applied: trust 0.00 …\")."""


async def rank_tools(
    index: ToolIndex,
    query: str,
    config: ToolFilterConfig,
    *,
    limit: int | None = None,
    allowed: Collection[str] | np.ndarray | None = None,
    fill: bool = True,
    memory: UsageMemory | ScopedUsage | None = None,
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

    With `memory` (learning from use, :mod:`sk_toolfilter.retrieval.usage`), what similar past requests
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
    memory: UsageMemory | ScopedUsage | None = None,
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
    rankings, offset = [], 0
    for query, text_parts in zip(queries, parts, strict=True):
        if not text_parts:
            rankings.append(Ranking(query, requested, requested))
            continue
        own = None if vectors is None else vectors[offset : offset + len(text_parts)]
        offset += len(text_parts)
        request = _Request(query, text_parts, own, fallback_reason)
        text_limit = whole_text_limit if whole_text_limit is not None and len(text_parts) == 1 else limit
        rankings.append(await _rank_one(index, request, config, text_limit, mask, fill, memory))
    return rankings


@dataclass(slots=True)  # built per request: a frozen one costs 4x to build
class _Request:
    """One text of a batch: its query, the texts it is ranked by (whole, then intents), their vectors."""

    query: str
    texts: list[str]
    vectors: np.ndarray | None
    fallback_reason: str | None


async def _rank_one(
    index: ToolIndex,
    request: _Request,
    config: ToolFilterConfig,
    limit: int | None,
    mask: np.ndarray | None,
    fill: bool,
    memory: UsageMemory | ScopedUsage | None = None,
) -> Ranking:
    """One text's ranking from its vectors (:func:`rank_many`)."""
    query, vectors = request.query, request.vectors
    scored = [
        _score_text(index, text, None if vectors is None else vectors[i], config, mask)
        for i, text in enumerate(request.texts)
    ]
    whole = scored[0]
    cosines = whole.raw.get("semantic")
    best = whole.top.get("semantic")
    no_tool_reason = await _small_talk_reason(index, query, vectors, cosines, best, mask, config)
    final = whole.final if len(scored) == 1 else np.maximum.reduce([s.final for s in scored])
    named = [i for i in index.name_matcher.named_in(query) if mask is None or mask[i]]
    learning = memory is not None and len(memory) > 0 and vectors is not None and no_tool_reason is None
    # The learned ranker reads cosines: it waits while the request falls back to BM25.
    learned_stage = config.rerank.type == "learned" and no_tool_reason is None and vectors is not None
    depth = limit
    if limit is not None and (learning or learned_stage):
        depth = max(limit, memory.rule.depth if learning and memory is not None else 0, config.rerank.shortlist)
    order, second, positional = await _ordered(
        index, query, scored, final, named, depth, config if no_tool_reason is None else None
    )
    learned_note = None
    if learned_stage and len(order) > 1:
        order, positional, learned_note = _learned_second_stage(index, query, scored, final, order, named, config)
    order, positional, learned, learning_note = _learned_order(
        index, memory if learning else None, order, final, positional, named, vectors, mask
    )
    order = order[:limit]
    without_evidence = []
    if not order and cosines is not None:
        without_evidence = _closest_without_evidence(
            index, cosines, mask, config, whole.raw.get("bm25"), no_tool_reason
        )
    order = list(dict.fromkeys([*named, *order]))[:limit]
    ranked = _scored_tools(index, whole, order, final, set(named), second, positional)
    if fill and limit is not None and len(order) < limit and cosines is not None and no_tool_reason is None:
        ranked += _filling(index, whole, order, cosines, mask, limit - len(order))
    rerank_note = learned_note or (second.note if second is not None else None)
    return Ranking(
        query,
        config.search_method,
        whole.method,
        ranked,
        request.fallback_reason,
        no_tool_reason,
        without_evidence,
        rerank_note,
        learned,
        learning_note,
    )


def _learned_note(ranked: int, shortlist: int) -> str:
    """What the learned ranker did, in ``explain``'s words: its shortlist, and how many tools filled it."""
    if ranked >= shortlist:
        return f"the learned ranker ordered the first stage's top {shortlist}"
    return f"the learned ranker ordered the first stage's top {shortlist} (only {ranked} matched the request)"


def _learned_second_stage(
    index: ToolIndex,
    query: str,
    scored: list[_TextScores],
    final: np.ndarray,
    order: list[int],
    named: list[int],
    config: ToolFilterConfig,
) -> tuple[list[int], list[float], str]:
    """``rerank: learned``: the shortlist reordered by the learned ranker over the first stage's own
    evidence; the first stage's scores position by position (the cut decides how many as before); what
    ``explain`` says it did."""
    ranker = load_learned_ranker(config.rerank.model)
    named_set = set(named)
    unnamed = [i for i in order if i not in named_set]
    head = unnamed[: min(config.rerank.shortlist, ranker.shortlist)]
    whole = scored[0].raw
    view = FirstStagePass(query, head, final, [s.final for s in scored[1:]], whole.get("semantic"), whole.get("bm25"))
    rows = candidate_features(view, index.vectors_of(head), index.tools, len(index))
    ranked = [head[i] for i in np.argsort(-ranker.scores(rows), kind="stable")]
    positional = [float(final[i]) for i in unnamed]
    note = _learned_note(len(head), min(config.rerank.shortlist, ranker.shortlist))
    return named + ranked + unnamed[len(head) :], positional, note


def _learned_order(
    index: ToolIndex,
    memory: UsageMemory | ScopedUsage | None,
    order: list[int],
    final: np.ndarray,
    positional: list[float],
    named: list[int],
    vectors: np.ndarray | None,
    mask: np.ndarray | None,
) -> tuple[list[int], list[float], dict[str, str], str | None]:
    """The order after learning from use (none without `memory` or request `vectors`), the first stage's
    scores position by position (unnamed tools; what the cut reads), why each tool that moved up did,
    and why nothing did (or None)."""
    if memory is None or vectors is None or not order:
        return order, positional, {}, None
    named_set = set(named)
    unnamed = [i for i in order if i not in named_set]
    scores = positional or [float(final[i]) for i in unnamed]
    names = [index.tools[i].full_name for i in unnamed]

    def permitted(name: str) -> bool:
        return name in index and (mask is None or bool(mask[index.position(name)]))

    reordered = memory.reorder(names, scores, vectors[0], permitted)
    if not reordered.moved:
        return order, positional, {}, reordered.note
    learned_order = [index.position(n) for n in reordered.names]
    scores = scores + [0.0] * (len(learned_order) - len(scores))  # a tool that entered: the list grew
    return named + learned_order, scores, {n: e.describe() for n, e in reordered.moved.items()}, None


def _filling(
    index: ToolIndex, whole: _TextScores, order: list[int], cosines: np.ndarray, mask: np.ndarray | None, count: int
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


async def _small_talk_reason(
    index: ToolIndex,
    query: str,
    vectors: np.ndarray | None,
    cosines: np.ndarray | None,
    best: float | None,
    mask: np.ndarray | None,
    config: ToolFilterConfig,
) -> str | None:
    """Why the request has no real evidence for any tool (small talk), or None; `best`: the highest cosine."""
    if vectors is None or cosines is None or config.no_tool_margin is None:
        return None
    subjects = subject_words(query)
    short = len(subjects) <= max(MAX_SUBJECT_WORDS, MAX_CLEAR_SUBJECT_WORDS)
    small_talk = await index.small_talk_vectors() if short else None
    if small_talk is None:
        return None
    verdict = judge_small_talk(
        vectors[0],
        small_talk,
        cosines if mask is None else cosines[mask],
        config.no_tool_margin,
        subject_count=len(subjects),
        marks=lambda: content_marks(query),  # found only when the verdict depends on them
        best_tool=best if mask is None else None,  # (masked: the best allowed tool's, not known yet)
    )
    return verdict.reason() if verdict is not None else None


async def _ordered(
    index: ToolIndex,
    query: str,
    scored: list[_TextScores],
    final: np.ndarray,
    named: list[int],
    limit: int | None,
    config: ToolFilterConfig | None,
) -> tuple[list[int], SecondStage | None, list[float]]:
    """The catalog positions in ranking order (intents interleaved), reordered by the cross-encoder
    when ``rerank: cross-encoder`` (`config` None: no second stage, e.g. small talk); with it, the
    first stage's scores of the unnamed tools, position by position (what the cut reads)."""
    rerank = config.rerank if config is not None and config.rerank.type == "cross-encoder" else None
    depth = limit if rerank is None or limit is None else max(limit, rerank.shortlist)
    lists = [rank_order(s.final, depth).tolist() for s in scored]
    order = lists[0] if len(lists) == 1 else _interleave(lists)
    if rerank is None or len(order) <= 1:
        return order[:limit], None, []
    second = await rerank_lists(index, query, lists, order[: rerank.shortlist], rerank)
    first_stage_scores: list[float] = []
    if second.lists is not None:  # the scores the cut would have seen, named tools (always first) aside
        named_set = set(named)
        first_stage_scores = [float(final[i]) for i in order[:limit] if i not in named_set]
        reordered = second.lists[0] if len(lists) == 1 else _interleave(second.lists)
        kept = set(reordered)
        order = reordered + [i for i in order if i not in kept]  # beyond the shortlist: first-stage order
    return order[:limit], second, first_stage_scores


def _scored_tools(
    index: ToolIndex,
    whole: _TextScores,
    order: list[int],
    final: np.ndarray,
    named: set[int],
    second: SecondStage | None,
    positional: list[float],
) -> list[ScoredTool]:
    """The ranked tools with their final and per-method scores (a named tool scores 1.0)."""
    if positional or (second is not None and second.lists is not None):
        # The second stage or learning decides the order; the first stage's scores, position by position,
        # decide how many are sent (the cut sees the score sequence it would have seen).
        unnamed = iter(positional)
        finals = [1.0 if i in named else next(unnamed, 0.0) for i in order]
    else:
        finals = final[order].tolist()
    method_scores = whole.method_scores_of(order)
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


@dataclass(slots=True)  # built per ranked text: a frozen one costs 4x to build
class _TextScores:
    """One query text's scores: the method used, the final [0, 1] scores, each method's raw scores
    (masked), and how each method's raw score becomes its [0, 1] score (``(raw - offset) / top``,
    clipped at 0) — applied only to the tools that are reported, not to the whole catalog."""

    method: str
    final: np.ndarray
    raw: dict[str, np.ndarray]
    scale: dict[str, tuple[float, float]]
    top: dict[str, float]
    """Each method's best raw score."""

    def method_scores_of(self, tools: list[int]) -> list[dict[str, float]]:
        """Each method's [0, 1] score of each of `tools` (what ``normalize_by_max`` / ``normalize_cosine``
        give), computed for these tools only (in Python floats: a ranking's few tools cost less than the
        numpy calls, and the arithmetic is the same float64 one)."""
        columns = [
            [max(value - offset, 0.0) / top for value in self.raw[m][tools].tolist()] if top > 0 else [0.0] * len(tools)
            for m, (offset, top) in self.scale.items()
        ]
        if len(columns) == 2:  # hybrid: one dict display per tool (no zip per row)
            first, second = self.scale
            return [{first: a, second: b} for a, b in zip(*columns, strict=True)]
        return [dict(zip(self.scale, row, strict=True)) for row in zip(*columns, strict=True)]


def _score_text(
    index: ToolIndex,
    text: str,
    vector: np.ndarray | None,
    config: ToolFilterConfig,
    mask: np.ndarray | None,
) -> _TextScores:
    """The scores of one query text (see :class:`_TextScores`)."""
    use_bm25 = config.search_method != "semantic" or vector is None
    use_semantic = config.search_method != "bm25" and vector is not None
    raw: dict[str, np.ndarray] = {}
    offsets: dict[str, float] = {}
    if use_bm25:
        raw["bm25"], offsets["bm25"] = index.bm25_raw_scores(text), 0.0
    if use_semantic:
        assert vector is not None
        raw["semantic"], offsets["semantic"] = index.cosine_scores(vector), config.semantic_floor
    if mask is not None:
        raw = {m: np.where(mask, r, np.float32(0.0)) for m, r in raw.items()}
    # The best raw score of each method sets its scale (BM25 scores are never negative).
    top = {m: float(r.max()) for m, r in raw.items()}
    scale = {m: (offsets[m], top[m] - offsets[m]) for m in raw}
    if len(raw) == 1:
        method = next(iter(raw))
        final = normalize_by_max(raw[method]) if method == "bm25" else normalize_cosine(raw[method], offsets[method])
        return _TextScores(method, final, raw, scale, top)
    weights = {str(method): weight for method, weight in config.method_weights.items()}
    if "method_weights" not in config.model_fields_set and index.fusion_weights is not None:
        weights = index.fusion_weights  # the blend fitted for the index's embedding model
    if config.fusion == "rrf":
        normalized = {
            "bm25": normalize_by_max(raw["bm25"]),
            "semantic": normalize_cosine(raw["semantic"], config.semantic_floor),
        }
        final = reciprocal_rank_fusion(normalized, k=config.rrf_k, weights=weights)
    else:
        # Evidence: a shared term, or a cosine above the floor (where each method's [0, 1] score > 0).
        semantic_evidence = raw["semantic"] > float32_threshold(config.semantic_floor)
        lexical_evidence = raw["bm25"] > 0
        best = np.float32(top["semantic"])  # (the float32 maximum itself)
        if best <= np.float32(config.semantic_floor + WEAK_WORD_MARGIN):
            # No cosine clears the floor by the margin: a shared word is evidence only where the encoder agrees.
            lexical_evidence &= raw["semantic"] >= best - np.float32(WEAK_WORD_MARGIN)
        evidence = lexical_evidence | semantic_evidence
        final = zscore_blend(raw, weights, evidence, mask)
    return _TextScores("hybrid", final, raw, scale, top)


WEAK_WORD_MARGIN = 0.06
"""When no tool's cosine clears ``semantic_floor`` by this much, a tool sharing a word with the request
has evidence only if its cosine is at most this far below the closest tool's: a lone incidental word
("data", "working") no longer sends a tool the encoder finds unrelated. On the dev halves (docs: intents
and evidence) no gold tool is lost with the shipped or the general model, one of 26 such requests with
the model trained without metatool (0.10 lost none there, but left "Remember that Alice works at Contoso
as a data engineer" sending a git tool for "works"). The rule holds up to the floor plus the margin, not
only below the floor: one tool a hair above the floor (0.204 against 0.2, an int8 rounding away) must
not turn every shared word in the catalog into evidence."""


def _interleave(rankings: list[list[int]]) -> list[int]:
    """Round-robin merge of rankings (first ranking first in each round), without repeats."""
    merged: dict[int, None] = {}
    for position in range(max(len(r) for r in rankings)):
        for ranking in rankings:
            if position < len(ranking):
                merged.setdefault(ranking[position])
    return list(merged)
