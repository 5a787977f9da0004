"""Ablation on the dev halves: each retrieval choice against the default configuration.

    python benchmarks/ablation.py [--data ../shared/benchmarks] [--datasets metatool,bfcl,seal_tools,livemcpbench]

Every variant runs the real pipeline (``rank_tools``) with one configuration change. Tool and query
embeddings are cached on disk, so variants and re-runs only pay for ranking. Prints a Markdown table
of recall@5 per dataset (plus the mean tools sent and the recall of what is sent for the cut-offs).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from sk_toolfilter import LocalEmbeddingGenerator, ToolFilterConfig, ToolIndex
from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.measure.evaluation import evaluate_method, load_queries
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.embeddings import cached

VARIANTS: dict[str, dict[str, Any]] = {
    "default (hybrid: z-score blend 0.7/0.3, query splitting)": {},
    "BM25 only": {"search_method": "bm25"},
    "semantic only": {"search_method": "semantic"},
    "hybrid = plain RRF (k=60, equal weights)": {"fusion": "rrf", "method_weights": {"semantic": 1, "bm25": 1}},
    "hybrid = RRF with weights 0.7/0.3": {"fusion": "rrf"},
    "z-score blend 0.5/0.5": {"method_weights": {"semantic": 0.5, "bm25": 0.5}},
    "z-score blend 0.6/0.4": {"method_weights": {"semantic": 0.6, "bm25": 0.4}},
    "z-score blend 0.8/0.2": {"method_weights": {"semantic": 0.8, "bm25": 0.2}},
    "no query splitting": {"split_queries": False},
    "split from 2 parts": {"min_query_parts": 2},
    "BM25 without stemming": {"bm25": {"stemming": False}},
    "BM25 name not boosted (x1)": {"bm25": {"name_boost": 1}},
    "BM25 classic k1=1.2, b=0.75": {"bm25": {"k1": 1.2, "b": 0.75}},
    "semantic floor 0.1": {"semantic_floor": 0.1},
    "semantic floor 0.3": {"semantic_floor": 0.3},
    "AutoCut instead of threshold": {"cutoff": "autocut"},
}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "benchmarks")
    parser.add_argument("--datasets", default="metatool,bfcl,seal_tools,livemcpbench")
    parser.add_argument("--variants", help="comma-separated variant numbers (default: all)")
    args = parser.parse_args()
    names = args.datasets.split(",")
    cache = EmbeddingCache()
    service = cached(LocalEmbeddingGenerator(), cache)
    data = {}
    for name in names:
        tools = [t for t, _ in load_catalog(args.data / name / "tools.jsonl")]
        queries = load_queries(args.data / name / "dev.jsonl")
        indexes = {}
        for stemming in (True, False):  # BM25 statistics depend on the tokenizer settings
            config = ToolFilterConfig.from_mapping({"bm25": {"stemming": stemming}})
            indexes[stemming] = await ToolIndex.build(tools, service, bm25_config=config.bm25, cache=cache)
        data[name] = (indexes, queries)
    chosen = list(VARIANTS.items())
    if args.variants:
        chosen = [chosen[int(i)] for i in args.variants.split(",")]
    print("| variant | " + " | ".join(f"{n} r@5" for n in names) + " | mean tools sent | recall of sent |")
    print("|---" * (len(names) + 3) + "|")
    for label, change in chosen:
        config = ToolFilterConfig.from_mapping(change)
        cells, sent, recall_sent = [], [], []
        for name in names:
            indexes, queries = data[name]
            index = indexes[config.bm25.stemming]
            if index.bm25_config != config.bm25:
                index = ToolIndex(
                    index.tools, embeddings=index.embeddings, embedding_service=service, bm25_config=config.bm25
                )
            metrics = (await evaluate_method(index, queries, config.search_method, config, first_request=False)).metrics
            cells.append(f"{metrics['recall@5']:.3f}")
            sent.append(metrics["mean_tools_sent"])
            recall_sent.append(metrics["recall_sent"])
        print(
            f"| {label} | "
            + " | ".join(cells)
            + f" | {sum(sent) / len(sent):.2f} | {sum(recall_sent) / len(recall_sent):.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    asyncio.run(main())
