"""Core benchmark: index build time, per-query latency per method, peak memory; recall on dev sets.

    python benchmarks/core_benchmark.py [--sizes 50,500,5000] [--data ../shared/benchmarks] [--no-recall]

Prints Markdown tables. Timings are wall-clock on this machine; nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from synthetic import synthetic_queries, synthetic_tools

from sk_toolfilter import LocalEmbeddingGenerator, ToolFilterConfig, ToolFilterManager, ToolIndex
from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.measure.evaluation import evaluate_method, load_queries
from sk_toolfilter.retrieval.cache import EmbeddingCache

METHODS = ("bm25", "semantic", "hybrid")


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


async def latency_table(sizes: list[int]) -> None:
    service = LocalEmbeddingGenerator()
    service.embed_sync(["warm up"])
    print("| tools | BM25 build s | embed build s | peak MiB (index) | method | filter_tools p50 ms | p95 ms |")
    print("|---|---|---|---|---|---|---|")
    for size in sizes:
        tools = synthetic_tools(size)
        queries = synthetic_queries(tools, min(200, size))
        started = time.perf_counter()
        ToolIndex(tools)
        bm25_build = time.perf_counter() - started
        started = time.perf_counter()
        index = await ToolIndex.build(tools, service)
        embed_build = time.perf_counter() - started
        tracemalloc.start()  # a separate pass: tracing slows the build several times
        ToolIndex(tools, embeddings=index.embeddings, embedding_service=service)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        for method in METHODS:
            manager = ToolFilterManager(index, ToolFilterConfig(search_method=method))
            await manager.filter_tools(queries[0])
            times = []
            for query in queries:
                t0 = time.perf_counter()
                await manager.filter_tools(query)
                times.append((time.perf_counter() - t0) * 1000)
            print(
                f"| {size} | {bm25_build:.3f} | {embed_build:.1f} | {peak:.0f} | {method} | "
                f"{statistics.median(times):.2f} | {percentile(times, 95):.2f} |",
                flush=True,
            )


async def recall_table(data: Path) -> None:
    config = ToolFilterConfig()
    service = LocalEmbeddingGenerator()
    print("\n| dataset | tools | queries | method | recall@1 | recall@5 | recall@10 | MRR |")
    print("|---|---|---|---|---|---|---|---|")
    for folder in sorted(p for p in data.iterdir() if (p / "tools.jsonl").exists()):
        tools = [t for t, _ in load_catalog(folder / "tools.jsonl")]
        queries = load_queries(folder / "dev.jsonl")
        index = await ToolIndex.build(tools, service, bm25_config=config.bm25, cache=EmbeddingCache())
        for method in METHODS:
            m = (await evaluate_method(index, queries, method, config, first_request=False)).metrics
            print(
                f"| {folder.name} | {len(tools)} | {len(queries)} | {method} | {m['recall@1']:.3f} | "
                f"{m['recall@5']:.3f} | {m['recall@10']:.3f} | {m['mrr']:.3f} |",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="50,500,5000")
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "benchmarks")
    parser.add_argument("--no-recall", action="store_true")
    args = parser.parse_args()
    asyncio.run(latency_table([int(s) for s in args.sizes.split(",")]))
    if not args.no_recall and args.data.is_dir():
        asyncio.run(recall_table(args.data))


if __name__ == "__main__":
    main()
