import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from sk_toolfilter.config import BM25Config
from sk_toolfilter.retrieval.bm25 import BM25Index
from sk_toolfilter.retrieval.fusion import (
    float32_threshold,
    normalize_by_max,
    normalize_cosine,
    rank_order,
    reciprocal_rank_fusion,
    zscore_blend,
)

CONFIG = BM25Config(k1=2.0, b=0.5, stemming=False)


def hand_bm25(tf, doc_len, avg_len, df, n_docs, k1=2.0, b=0.5):
    idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + k1 * (1 - b + b * doc_len / avg_len))


def test_bm25_scores_match_hand_computed_values():
    docs = [["send", "email"], ["read", "email", "email"], ["weather"]]
    scores = BM25Index(docs, CONFIG).raw_scores("email")
    avg = (2 + 3 + 1) / 3
    assert scores[0] == pytest.approx(hand_bm25(1, 2, avg, 2, 3), rel=1e-5)
    assert scores[1] == pytest.approx(hand_bm25(2, 3, avg, 2, 3), rel=1e-5)
    assert scores[2] == 0


def test_bm25_sums_distinct_query_terms_once_each():
    docs = [["send", "email"], ["weather", "forecast"]]
    index = BM25Index(docs, CONFIG)
    assert index.raw_scores("email email email")[0] == pytest.approx(index.raw_scores("email")[0])
    both = index.raw_scores("send email")[0]
    assert both == pytest.approx(index.raw_scores("send")[0] + index.raw_scores("email")[0])


def test_bm25_with_no_overlap_or_empty_query_is_all_zero():
    index = BM25Index([["send", "email"]], CONFIG)
    assert index.raw_scores("zebra").tolist() == [0]
    assert index.raw_scores("").tolist() == [0]


def test_bm25_on_empty_catalog_returns_empty_scores():
    assert BM25Index([], CONFIG).raw_scores("anything").shape == (0,)


def test_normalize_by_max_puts_the_best_at_one():
    assert normalize_by_max(np.array([2.0, 1.0, 0.0])).tolist() == [1.0, 0.5, 0.0]


def test_normalize_by_max_of_all_zero_does_not_divide_by_zero():
    out = normalize_by_max(np.zeros(3))
    assert out.tolist() == [0, 0, 0]


def test_cosines_below_the_floor_score_zero():
    out = normalize_cosine(np.array([0.6, 0.4, 0.1]), floor=0.2)
    assert out.tolist() == pytest.approx([1.0, 0.5, 0.0])


def test_rank_order_breaks_ties_by_catalog_position_and_skips_zeros():
    assert rank_order(np.array([0.5, 0.0, 0.9, 0.5])).tolist() == [2, 0, 3]


@pytest.mark.parametrize("layout", ["random", "ascending", "descending", "few positive", "ties"])
@pytest.mark.parametrize("size", [300, 5_000, 60_000])
def test_rank_order_of_a_large_catalog_is_the_exact_top(layout, size):
    """The best `limit` of a large catalog come from a sampled threshold: the result must be exactly
    the first `limit` of a full sort (score descending, catalog position ascending), zeros excluded."""
    rng = np.random.default_rng(size)
    scores = rng.random(size).astype(np.float32)
    if layout == "ascending":
        scores.sort()
    elif layout == "descending":
        scores = np.sort(scores)[::-1].copy()
    elif layout == "few positive":
        scores[rng.random(size) > 0.01] = 0
    elif layout == "ties":
        scores = np.round(scores, 1) * (rng.random(size) > 0.5)
    positive = np.flatnonzero(scores > 0)
    reference = positive[np.lexsort((positive, -scores[positive]))]
    for limit in (1, 5, 20, 100):
        assert rank_order(scores, limit).tolist() == reference[:limit].tolist()


@pytest.mark.parametrize("masked", [False, True])
def test_zscore_blend_is_the_weighted_sum_of_z_scores(masked):
    """The blend (computed as one affine map in float32) against the definition in float64: z-scores
    over the catalog or its allowed part, weighted, summed, clipped at 0, zero without evidence,
    divided by the best."""
    rng = np.random.default_rng(7)
    bm25 = np.maximum(rng.normal(0.0, 2.0, 3000), 0).astype(np.float32)
    semantic = rng.normal(0.2, 0.1, 3000).astype(np.float32)
    mask = rng.random(3000) > 0.3 if masked else None
    if mask is not None:
        bm25, semantic = np.where(mask, bm25, np.float32(0)), np.where(mask, semantic, np.float32(0))
    evidence = (bm25 > 0) | (semantic > 0.2)
    weights = {"bm25": 0.3, "semantic": 0.7}

    def z(raw):
        sample = raw.astype(np.float64)[mask] if mask is not None else raw.astype(np.float64)
        return (raw.astype(np.float64) - sample.mean()) / sample.std()

    expected = np.maximum(0.3 * z(bm25) + 0.7 * z(semantic), 0) * evidence
    expected /= expected.max()
    fused = zscore_blend({"bm25": bm25, "semantic": semantic}, weights, evidence, mask)
    assert fused == pytest.approx(expected, abs=1e-5)
    assert rank_order(fused, 20).tolist() == rank_order(expected, 20).tolist()


def test_zscore_blend_of_constant_scores_is_all_zero():
    flat = np.full(10, 0.5, dtype=np.float32)
    assert not zscore_blend({"semantic": flat}, {}, np.ones(10, dtype=bool)).any()


def test_rrf_matches_hand_computed_fusion_and_is_normalized():
    bm25 = np.array([1.0, 0.5, 0.0])  # ranks: 0 → 1, 1 → 2
    semantic = np.array([0.0, 1.0, 0.8])  # ranks: 1 → 1, 2 → 2
    fused = reciprocal_rank_fusion({"bm25": bm25, "semantic": semantic}, k=60)
    raw = np.array([1 / 61, 1 / 62 + 1 / 61, 1 / 62])
    assert fused.tolist() == pytest.approx((raw / raw.max()).tolist())
    assert fused.max() == 1.0


def test_rrf_weights_favour_a_method():
    bm25 = np.array([1.0, 0.0])
    semantic = np.array([0.0, 1.0])
    fused = reciprocal_rank_fusion({"bm25": bm25, "semantic": semantic}, weights={"semantic": 2.0})
    assert fused[1] == 1.0 and fused[0] == pytest.approx(0.5)


@settings(max_examples=80, deadline=None)
@given(
    docs=st.lists(
        st.lists(st.sampled_from(["mail", "send", "file", "read", "sum", "date", ""]), max_size=8), max_size=12
    ),
    query=st.lists(st.sampled_from(["mail", "send", "file", "zzz"]), max_size=4),
)
def test_vectorized_bm25_equals_the_textbook_formula(docs, query):
    """Okapi BM25 (no k1+1 factor) with Lucene's IDF, term by term, against the vectorized matrix."""
    docs = [[t for t in d if t] for d in docs]
    config = BM25Config(stemming=False)
    index = BM25Index(docs, config)
    padded = [d or [""] for d in docs]
    n = len(padded)
    avgdl = sum(map(len, padded)) / n if n else 0
    expected = []
    for doc in padded:
        score = 0.0
        for term in dict.fromkeys(query):
            df = sum(term in d for d in padded)
            tf = doc.count(term)
            if tf and any(docs):
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * tf / (tf + config.k1 * (1 - config.b + config.b * len(doc) / avgdl))
        expected.append(score)
    got = index.raw_scores(" ".join(query)) if docs else []
    assert len(got) == len(docs)
    assert all(abs(a - b) < 1e-5 for a, b in zip(got, expected, strict=False))


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=-1.5, max_value=1.5, allow_nan=False), st.integers(min_value=0, max_value=2**32 - 1))
def test_a_float32_threshold_keeps_exactly_the_scores_above_the_float64_floor(floor, seed):
    """Evidence compares float32 cosines with the floor without a float64 copy: the same tools pass."""
    threshold = float32_threshold(floor)
    nearest = np.float32(floor)
    around = np.array([nearest, *(np.nextafter(nearest, np.float32(s * np.inf)) for s in (-1, 1))], dtype=np.float32)
    scores = np.concatenate([around, np.random.default_rng(seed).uniform(-1.5, 1.5, 1000).astype(np.float32)])
    assert threshold.dtype == np.float32
    assert np.array_equal(scores > threshold, scores.astype(np.float64) > floor)
