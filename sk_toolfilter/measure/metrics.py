"""Retrieval metrics for tool selection (strict: only gold tools count)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def recall_at_k(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """|gold ∩ top-k| / |gold|."""
    gold_set = set(gold)
    return len(gold_set.intersection(ranked[:k])) / len(gold_set) if gold_set else 0.0


def complete_at_k(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """1.0 when every gold tool is in the top k, else 0.0."""
    return float(bool(gold) and set(gold) <= set(ranked[:k]))


def ndcg_at_k(ranked: Sequence[str], gold: Sequence[str], k: int = 10) -> float:
    """Binary-relevance nDCG@k: DCG = Σ 1/log2(rank + 1) over gold tools in the top k."""
    gold_set = set(gold)
    dcg = sum(1.0 / math.log2(rank + 2) for rank, name in enumerate(ranked[:k]) if name in gold_set)
    ideal = sum(1.0 / math.log2(rank + 2) for rank in range(min(len(gold_set), k)))
    return dcg / ideal if ideal else 0.0


def reciprocal_rank(ranked: Sequence[str], gold: Sequence[str]) -> float:
    """1 / rank of the first gold tool (0 when none is ranked)."""
    gold_set = set(gold)
    for rank, name in enumerate(ranked, 1):
        if name in gold_set:
            return 1.0 / rank
    return 0.0
