"""Metric code against hand-computed values (a wrong metric would make every reported number a lie)."""

import math

import pytest

from sk_toolfilter import ToolFilterConfig
from sk_toolfilter.measure.metrics import complete_at_k, ndcg_at_k, recall_at_k, reciprocal_rank
from sk_toolfilter.retrieval.cutoff import apply_cutoff
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.search import ScoredTool

RANKED = ["a", "x", "b", "y", "z", "c"]


def test_recall_at_k_is_the_share_of_gold_tools_in_the_top_k():
    assert recall_at_k(RANKED, ["a", "b", "c"], 1) == pytest.approx(1 / 3)
    assert recall_at_k(RANKED, ["a", "b", "c"], 3) == pytest.approx(2 / 3)
    assert recall_at_k(RANKED, ["a", "b", "c"], 6) == 1.0
    assert recall_at_k(RANKED, ["q"], 5) == 0.0


def test_complete_at_k_needs_every_gold_tool():
    assert complete_at_k(RANKED, ["a", "b"], 3) == 1.0
    assert complete_at_k(RANKED, ["a", "c"], 5) == 0.0


def test_ndcg_matches_the_hand_computed_value():
    # gold a (rank 1) and b (rank 3): DCG = 1/log2(2) + 1/log2(4) = 1.5; ideal = 1 + 1/log2(3)
    assert ndcg_at_k(RANKED, ["a", "b"], 10) == pytest.approx(1.5 / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(RANKED, ["c"], 5) == 0.0
    assert ndcg_at_k(["a"], ["a"], 10) == 1.0


def test_reciprocal_rank_is_one_over_the_first_gold_rank():
    assert reciprocal_rank(RANKED, ["b", "c"]) == pytest.approx(1 / 3)
    assert reciprocal_rank(RANKED, ["nope"]) == 0.0


def scored(*scores):
    return [ScoredTool(ToolMetadata("P", f"t{i}", f"P-t{i}"), s, {}) for i, s in enumerate(scores)]


def test_autocut_stops_at_the_first_big_score_drop():
    config = ToolFilterConfig(cutoff="autocut", top_k=10)
    kept = [d.full_name for d in apply_cutoff(scored(1.0, 0.9, 0.8, 0.35, 0.34), config) if d.kept]
    assert kept == ["P-t0", "P-t1", "P-t2"]  # 0.35 < 0.5 x 0.8


def test_threshold_and_top_k_cut_with_reasons():
    decisions = apply_cutoff(scored(1.0, 0.6, 0.55, 0.4), ToolFilterConfig(top_k=2, similarity_threshold=0.5))
    assert [d.kept for d in decisions] == [True, True, False, False]
    assert decisions[2].reason == "cut: beyond top_k=2"
    assert decisions[3].reason == "cut: beyond top_k=2"
    low = apply_cutoff(scored(1.0, 0.4), ToolFilterConfig(similarity_threshold=0.5))
    assert low[1].reason == "cut: score 0.40 < threshold 0.50"
