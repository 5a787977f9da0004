"""The first stage of a ranking: every tool scored against the request's texts (the whole request,
then its intents), the small-talk verdict, and the tools the request names.

What comes after it only reorders (:mod:`sk_toolfilter.retrieval.reorderings`); how far down each
text's list is read is the caller's choice (:meth:`FirstStage.order`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.retrieval.fusion import (
    float32_threshold,
    normalize_by_max,
    normalize_cosine,
    rank_order,
    reciprocal_rank_fusion,
    zscore_blend,
)
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.small_talk import (
    MAX_CLEAR_SUBJECT_WORDS,
    MAX_SUBJECT_WORDS,
    content_marks,
    judge_small_talk,
    subject_words,
)

WEAK_WORD_MARGIN = 0.06
"""When no tool's cosine clears ``semantic_floor`` by this much, a tool sharing a word with the request
has evidence only if its cosine is at most this far below the closest tool's: a lone incidental word
("data", "working") no longer sends a tool the encoder finds unrelated. On the dev halves (docs: intents
and evidence) no gold tool is lost with the shipped or the general model, one of 26 such requests with
the model trained without metatool (0.10 lost none there, but left "Remember that Alice works at Contoso
as a data engineer" sending a git tool for "works"). The rule holds up to the floor plus the margin, not
only below the floor: one tool a hair above the floor (0.204 against 0.2, an int8 rounding away) must
not turn every shared word in the catalog into evidence."""


@dataclass(slots=True)  # built per ranked text: a frozen one costs 4x to build
class TextScores:
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


@dataclass(slots=True)  # built per request
class FirstStage:
    """One text's first stage: its texts' scores (the whole request first), the final score of each tool
    (the best over the texts), the tools it names (catalog positions, in order of mention), and why it is
    small talk (None when it is not). The reorderings read it; none changes it."""

    index: ToolIndex
    query: str
    config: ToolFilterConfig
    vectors: np.ndarray | None
    mask: np.ndarray | None
    scored: list[TextScores]
    final: np.ndarray
    named: list[int]
    no_tool_reason: str | None

    @property
    def whole(self) -> TextScores:
        """The whole request's scores."""
        return self.scored[0]

    @property
    def cosines(self) -> np.ndarray | None:
        """The whole request's cosine to every tool (None when it was ranked without vectors)."""
        return self.scored[0].raw.get("semantic")

    def lists(self, depth: int | None) -> list[list[int]]:
        """Each text's tools with evidence, best first, at most `depth` of each."""
        return [rank_order(s.final, depth).tolist() for s in self.scored]

    def order(self, depth: int | None) -> list[int]:
        """The tools in ranking order (the texts' lists interleaved), at most `depth`."""
        lists = self.lists(depth)
        return interleave(lists)[:depth]


async def first_stage(
    index: ToolIndex,
    query: str,
    texts: list[str],
    vectors: np.ndarray | None,
    config: ToolFilterConfig,
    mask: np.ndarray | None,
    text_cosines: np.ndarray | None = None,
) -> FirstStage:
    """Score every tool against each of `texts` (the query whole, then its intents) with their
    `vectors` (None: BM25), judge small talk, find the tools the query names. `text_cosines`: each
    text's cosine to every tool when computed already (one catalog read for a batch of texts)."""
    scored = [
        score_text(
            index,
            text,
            None if vectors is None else vectors[i],
            config,
            mask,
            None if text_cosines is None else text_cosines[i],
        )
        for i, text in enumerate(texts)
    ]
    cosines, best = scored[0].raw.get("semantic"), scored[0].top.get("semantic")
    reason = await small_talk_reason(index, query, vectors, cosines, best, mask, config)
    final = scored[0].final if len(scored) == 1 else np.maximum.reduce([s.final for s in scored])
    named = [i for i in index.name_matcher.named_in(query) if mask is None or mask[i]]
    return FirstStage(index, query, config, vectors, mask, scored, final, named, reason)


def score_text(
    index: ToolIndex,
    text: str,
    vector: np.ndarray | None,
    config: ToolFilterConfig,
    mask: np.ndarray | None,
    cosines: np.ndarray | None = None,
) -> TextScores:
    """The scores of one query text (see :class:`TextScores`); `cosines`: its cosine to every tool, when
    computed already."""
    use_bm25 = config.search_method != "semantic" or vector is None
    use_semantic = config.search_method != "bm25" and vector is not None
    raw: dict[str, np.ndarray] = {}
    offsets: dict[str, float] = {}
    if use_bm25:
        raw["bm25"], offsets["bm25"] = index.bm25_raw_scores(text), 0.0
    if use_semantic:
        assert vector is not None
        semantic = index.cosine_scores(vector) if cosines is None else cosines
        raw["semantic"], offsets["semantic"] = semantic, config.semantic_floor
    if mask is not None:
        raw = {m: np.where(mask, r, np.float32(0.0)) for m, r in raw.items()}
    # The best raw score of each method sets its scale (BM25 scores are never negative).
    top = {m: float(r.max()) for m, r in raw.items()}
    scale = {m: (offsets[m], top[m] - offsets[m]) for m in raw}
    if len(raw) == 1:
        method = next(iter(raw))
        final = normalize_by_max(raw[method]) if method == "bm25" else normalize_cosine(raw[method], offsets[method])
        return TextScores(method, final, raw, scale, top)
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
    return TextScores("hybrid", final, raw, scale, top)


async def small_talk_reason(
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


def interleave(rankings: list[list[int]]) -> list[int]:
    """Round-robin merge of rankings (first ranking first in each round), without repeats; a lone
    ranking (most requests: the text ranked whole) is returned as it is."""
    if len(rankings) == 1:
        return rankings[0]
    merged: dict[int, None] = {}
    for position in range(max(len(r) for r in rankings)):
        for ranking in rankings:
            if position < len(ranking):
                merged.setdefault(ranking[position])
    return list(merged)
