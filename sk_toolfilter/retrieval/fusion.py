"""Turning raw per-method scores into comparable [0, 1] scores, and fusing methods.

Every method's score is relative to the best tool for the same query (1.0 = best match), so one
``similarity_threshold`` means the same for every method:

- BM25: ``raw / max(raw)``; a tool sharing no term with the query scores 0.
- semantic: ``(cos - floor) / (max(cos) - floor)``, clipped at 0; ``floor`` is the cosine of
  an unrelated text (below it a tool is noise, not a weak match).
- hybrid: Reciprocal Rank Fusion of the methods' rankings (tools scoring 0 are not ranked),
  ``Σ w_m / (k + rank_m)``, divided by its maximum.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache

import numpy as np


def normalize_by_max(scores: np.ndarray) -> np.ndarray:
    """Scale so the best score is 1.0; all zeros stay zeros (no division by zero), NaN counts as 0.
    float32 scores stay float32 (a catalog-sized float64 copy costs as much as the scaling)."""
    values = _floating(scores)
    return _normalize_in_place(np.fmax(values, values.dtype.type(0.0)))  # a new array: negatives, NaN → 0


def normalize_cosine(cosines: np.ndarray, floor: float) -> np.ndarray:
    """Semantic scores relative to the best match, with cosines at or below `floor` scoring 0."""
    values = _floating(cosines)
    shifted = values - values.dtype.type(floor)  # a new array, normalized in place
    return _normalize_in_place(np.fmax(shifted, values.dtype.type(0.0), out=shifted))


@lru_cache(maxsize=64)
def float32_threshold(value: float) -> np.float32:
    """The float32 `t` for which ``x > t`` equals ``x > value`` on every float32 `x`: float32 scores
    compare with it without a float64 copy of the catalog."""
    threshold = np.float32(value)
    return threshold if float(threshold) <= value else np.nextafter(threshold, np.float32(-np.inf))


def _floating(scores: np.ndarray) -> np.ndarray:
    values = np.asarray(scores)
    return values if values.dtype == np.float32 else values.astype(np.float64, copy=False)


def _normalize_in_place(scores: np.ndarray) -> np.ndarray:
    """`scores` (never negative nor NaN) divided by their maximum, in place; all zeros when the maximum
    is not positive; infinities count as 0."""
    top = float(scores.max(initial=0.0))
    if not math.isfinite(top):
        scores = np.nan_to_num(scores, posinf=0.0)
        top = float(scores.max(initial=0.0))
    if top <= 0:
        return np.zeros_like(scores)
    scores /= scores.dtype.type(top)
    return scores


def rank_order(scores: np.ndarray, limit: int | None = None) -> np.ndarray:
    """Indices of the tools with a positive score, best first; ties keep catalog order.

    With `limit`, only the best `limit` (plus ties at the boundary) are sorted: large catalogs stay fast.
    """
    candidates = _likely_top(scores, limit) if limit is not None else None
    positive = np.flatnonzero(scores > 0) if candidates is None else candidates
    if limit is not None and len(positive) > 4 * limit:
        values = scores[positive]  # a copy: partitioned in place (np.partition's wrapper costs more here)
        values.partition(len(positive) - limit)
        positive = positive[scores[positive] >= values[len(positive) - limit]]
    order = positive[np.lexsort((positive, -scores[positive]))]
    return order if limit is None else order[:limit]


_SAMPLED_PER_RESULT = 32


def _likely_top(scores: np.ndarray, limit: int) -> np.ndarray | None:
    """Every tool scoring at least a threshold guessed from a strided sample — at least `limit` tools,
    so the best `limit` are among them (exact) — or None (small catalog, few positive scores, or a
    guess too high: the caller scans every positive score).

    A large catalog's scores are mostly positive under hybrid search, and selecting the best 20 of
    100,000 by partition costs ~1.5 ms; the sample (~32 per wanted tool) narrows it to a few dozen.
    """
    if len(scores) <= 4 * _SAMPLED_PER_RESULT * limit:
        return None
    step = len(scores) // (_SAMPLED_PER_RESULT * limit)
    sample = scores[::step]
    sample = sample[sample > 0]  # zeros never rank (and slow a partition down)
    rank = math.ceil(3 * limit / step) + 1  # about 3 x limit tools expected above the guess
    if len(sample) < rank:
        return None
    sample.partition(len(sample) - rank)  # a copy of the sampled scores: partitioned in place
    guess = sample[len(sample) - rank]
    candidates = np.flatnonzero(scores >= guess)
    return candidates if len(candidates) >= limit else None


def reciprocal_rank_fusion(
    scores_by_method: Mapping[str, np.ndarray], k: int = 60, weights: Mapping[str, float] | None = None
) -> np.ndarray:
    """Weighted RRF of the methods' rankings, normalized so the best fused score is 1.0."""
    weights = weights or {}
    size = len(next(iter(scores_by_method.values()))) if scores_by_method else 0
    fused = np.zeros(size, dtype=np.float64)
    for method, scores in scores_by_method.items():
        order = rank_order(scores)
        fused[order] += weights.get(method, 1.0) / (k + np.arange(1, len(order) + 1))
    return normalize_by_max(fused)


def zscore(scores: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Standardize over the catalog (or the `mask`ed part of it): mean 0, standard deviation 1."""
    values = np.asarray(scores, dtype=np.float64)
    stats = _mean_and_sd(values, mask)
    if stats is None:  # constant scores (up to rounding): nothing stands out
        return np.zeros_like(values)
    standardized = values - stats[0]  # a new array: the one pass below may write in place
    standardized /= stats[1]
    return standardized


def zscore_blend(
    raw_by_method: Mapping[str, np.ndarray],
    weights: Mapping[str, float],
    evidence: np.ndarray,
    mask: np.ndarray | None = None,
) -> np.ndarray:
    """Weighted sum of per-query z-scores of the methods' raw scores, normalized so the best is 1.0.

    Unlike RRF, which keeps only ranks, this keeps how far each tool stands out from the catalog in
    each method. Tools without `evidence` (no shared term, cosine below the floor) score 0.

    Each method's mean and standard deviation (over the catalog, or its `mask`ed part) make the blend
    one affine map of the raw scores, applied in float32 in a few catalog-sized passes.
    """
    fused: np.ndarray | None = None
    offset = 0.0
    for method, raw in raw_by_method.items():
        stats = _mean_and_sd(raw, mask)
        if stats is None:
            continue  # constant scores: nothing stands out, the method adds 0
        mean, sd = stats
        scale = weights.get(method, 1.0) / sd
        offset -= scale * mean
        term = np.multiply(raw, np.float32(scale), dtype=np.float32)
        fused = term if fused is None else np.add(fused, term, out=fused)
    if fused is None:
        return np.zeros(len(evidence), dtype=np.float32)
    fused += np.float32(offset)
    np.fmax(fused, np.float32(0.0), out=fused)  # negatives and NaN → 0
    fused *= evidence
    return _normalize_in_place(fused)


def _mean_and_sd(scores: np.ndarray, mask: np.ndarray | None) -> tuple[float, float] | None:
    """Mean and standard deviation of `scores` (or of its `mask`ed part); None when they are constant.

    Two single-threaded passes (einsum, not BLAS: no thread pool to wake); the mean accumulates in
    float64, the sum of squares in the scores' own precision (float32: relative error ~1e-7 at 5,000 tools).
    """
    scores = np.asarray(scores)
    if scores.dtype.kind != "f":
        scores = scores.astype(np.float64)
    sample = scores if mask is None else scores[mask]
    n = sample.size
    if n == 0:
        return None
    mean = float(np.add.reduce(sample, dtype=np.float64)) / n
    variance = max(float(np.einsum("i,i->", sample, sample)) / n - mean * mean, 0.0)
    sd = variance**0.5
    if not math.isfinite(sd) or sd <= 1e-12 or sd < 1e-6 * abs(mean):  # constant up to float32 rounding
        return None
    return mean, sd
