"""Ablation study on the dev halves: what each retrieval choice does to recall@5.

    python benchmarks/ablation.py [--data ../shared/benchmarks] [--datasets metatool,bfcl,seal_tools]

Scores every query once per configuration and prints recall@5 per dataset. Query and tool
embeddings are cached on disk, so re-runs only pay for BM25 and fusion.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import numpy as np

from sk_toolfilter import BM25Config, LocalEmbeddingGenerator, ToolIndex
from sk_toolfilter.bm25 import BM25Index
from sk_toolfilter.cache import EmbeddingCache
from sk_toolfilter.catalog import load_catalog
from sk_toolfilter.embeddings import embed_texts
from sk_toolfilter.evaluation import load_queries
from sk_toolfilter.fusion import normalize_by_max, normalize_cosine, rank_order, reciprocal_rank_fusion
from sk_toolfilter.metrics import recall_at_k


async def embed_queries(service, texts, cache):
    model = service.ai_model_id
    cached = cache.get(model, texts)
    missing = [i for i, v in enumerate(cached) if v is None]
    if missing:
        vectors = await embed_texts(service, [texts[i] for i in missing])
        cache.put(model, [texts[i] for i in missing], vectors)
        for row, i in enumerate(missing):
            cached[i] = vectors[row]
    return np.stack(cached)


def recall5(score_rows, queries, names):
    total = 0.0
    for scores, q in zip(score_rows, queries, strict=True):
        top = [names[i] for i in rank_order(scores)[:5]]
        total += recall_at_k(top, q.gold, 5)
    return total / len(queries)


def zscore(x):
    sd = x.std()
    return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "benchmarks")
    parser.add_argument("--datasets", default="metatool,bfcl,seal_tools,livemcpbench")
    args = parser.parse_args()
    service, cache = LocalEmbeddingGenerator(), EmbeddingCache()
    for name in args.datasets.split(","):
        tools = [t for t, _ in load_catalog(args.data / name / "tools.jsonl")]
        queries = load_queries(args.data / name / "dev.jsonl")
        names = [t.full_name for t in tools]
        index = await ToolIndex.build(tools, service, cache=cache)
        qv = await embed_queries(service, [q.query for q in queries], cache)
        cos = qv @ index.embeddings.T
        results = {}
        variants = {
            "default": BM25Config(),
            "k1=1.2,b=0.75": BM25Config(k1=1.2, b=0.75),
            "k1=2.5,b=0.5": BM25Config(k1=2.5, b=0.5),
            "k1=2.0,b=0.3": BM25Config(k1=2.0, b=0.3),
            "no stemming": BM25Config(stemming=False),
            "name_boost=1": BM25Config(name_boost=1),
            "name_boost=5": BM25Config(name_boost=5),
        }
        bm25_default = None
        for label, cfg in variants.items():
            bm = BM25Index.from_tools(tools, cfg)
            raw = np.stack([bm.raw_scores(q.query) for q in queries])
            if label == "default":
                bm25_default = raw
            results[f"bm25 {label}"] = recall5(raw, queries, names)
        results["semantic"] = recall5(cos, queries, names)
        b = [normalize_by_max(r) for r in bm25_default]
        s = [normalize_cosine(c, 0.2) for c in cos]
        results["rrf k=60"] = recall5(
            [reciprocal_rank_fusion({"bm25": x, "semantic": y}) for x, y in zip(b, s, strict=True)], queries, names
        )
        for w in (0.5, 0.6, 0.7, 0.8):
            results[f"max-norm blend w_sem={w}"] = recall5(
                [w * y + (1 - w) * x for x, y in zip(b, s, strict=True)], queries, names
            )
            results[f"z blend w_sem={w}"] = recall5(
                [w * zscore(c) + (1 - w) * zscore(r) for r, c in zip(bm25_default, cos, strict=True)], queries, names
            )
        for label, value in results.items():
            print(f"{name:12} {label:28} {value:.3f}", flush=True)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
