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

from collections.abc import Mapping

import numpy as np


def normalize_by_max(scores: np.ndarray) -> np.ndarray:
    """Scale so the best score is 1.0; all zeros stay zeros (no division by zero), NaN counts as 0."""
    scores = np.fmax(np.asarray(scores, dtype=np.float64), 0.0)  # one pass: negatives and NaN → 0
    top = float(scores.max(initial=0.0))
    if not np.isfinite(top):
        scores = np.nan_to_num(scores, posinf=0.0)
        top = float(scores.max(initial=0.0))
    if top <= 0:
        return np.zeros_like(scores)
    scores /= top
    return scores


def normalize_cosine(cosines: np.ndarray, floor: float) -> np.ndarray:
    """Semantic scores relative to the best match, with cosines at or below `floor` scoring 0."""
    return normalize_by_max(np.asarray(cosines, dtype=np.float64) - floor)


def rank_order(scores: np.ndarray, limit: int | None = None) -> np.ndarray:
    """Indices of the tools with a positive score, best first; ties keep catalog order.

    With `limit`, only the best `limit` (plus ties at the boundary) are sorted: large catalogs stay fast.
    """
    positive = np.flatnonzero(scores > 0)
    if limit is not None and len(positive) > 4 * limit:
        kth = np.partition(scores[positive], len(positive) - limit)[len(positive) - limit]
        positive = positive[scores[positive] >= kth]
    order = positive[np.lexsort((positive, -scores[positive]))]
    return order if limit is None else order[:limit]


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
    sample = values if mask is None else values[mask]
    n = sample.size
    if n == 0:
        return np.zeros_like(values)
    # Mean and variance in two single-threaded passes (einsum, not BLAS: no thread pool to wake).
    mean = float(np.add.reduce(sample)) / n
    variance = max(float(np.einsum("i,i->", sample, sample)) / n - mean * mean, 0.0)
    sd = variance**0.5
    if sd <= 1e-12 or sd < 1e-7 * abs(mean):  # constant scores (up to rounding): nothing stands out
        return np.zeros_like(values)
    standardized = values - mean  # a new array: the one pass below may write in place
    standardized /= sd
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
    """
    fused: np.ndarray | None = None
    for method, raw in raw_by_method.items():  # in place: one catalog-sized array per method, no more
        z = zscore(raw, mask)
        z *= weights.get(method, 1.0)
        fused = z if fused is None else np.add(fused, z, out=fused)
    if fused is None:
        return np.zeros(len(evidence), dtype=np.float64)
    np.maximum(fused, 0.0, out=fused)
    fused *= evidence
    return normalize_by_max(fused)
