"""What the second stage costs per request, against one request embedding measured in the same run.

    python benchmarks/rerank_benchmark.py [--shortlists 10,20] [--queries 300] [--reranker DIR]

On the metatool catalog (199 tools; the bundled BFCL catalog when the benchmarks are absent):
the p50 of embedding one request with the default request encoder, and the p50 of
``ToolFilterManager.filter_tools`` end to end without a second stage, with ``rerank: learned`` (its
ratio to the first stage alone too: issue 58 asks ≤ 1.3×) and with ``rerank: cross-encoder`` at each
shortlist size; each as milliseconds and as a ratio to the embedding.
Every request is timed once per setting (no query-vector cache hit). Prints Markdown; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from request_path_benchmark import catalog_and_queries, embedding_p50

from sk_toolfilter import LocalEmbeddingGenerator, ToolFilterConfig, ToolFilterManager, ToolIndex
from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.retrieval.local_models import DEFAULT_MODEL_ID

ROOT = Path(__file__).resolve().parents[1]


async def selection_p50(index: ToolIndex, config: ToolFilterConfig, queries: list[str], tag: str) -> float:
    manager = ToolFilterManager(index, config)
    for query in queries[:20]:
        await manager.filter_tools(f"{query} ({tag} warm-up)")
    times = []
    for query in queries:
        started = time.perf_counter()
        await manager.filter_tools(f"{query} ({tag})")  # a text of its own: no query-vector cache hit
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def main(shortlists: list[int], n: int, data: Path, reranker: str | None) -> None:
    tools_file, queries = catalog_and_queries(data)
    queries = queries[:n]
    tools = [t for t, _ in load_catalog(tools_file)]
    index = await ToolIndex.build(tools, LocalEmbeddingGenerator())
    embed = await embedding_p50(DEFAULT_MODEL_ID, queries)
    rows = [("first stage only", await selection_p50(index, ToolFilterConfig(), queries, "first"))]
    rows.append(
        ("rerank: learned (top 30)", await selection_p50(index, ToolFilterConfig(rerank="learned"), queries, "l"))
    )
    for size in shortlists if reranker else []:  # (no reranker is in the repository: bring one)
        config = ToolFilterConfig(rerank={"type": "cross-encoder", "shortlist": size, "model": reranker})
        rows.append(
            (f"rerank: cross-encoder, shortlist {size}", await selection_p50(index, config, queries, str(size)))
        )
    print(
        f"{len(tools)} tools, {len(queries)} requests; one request embedding ({DEFAULT_MODEL_ID}): p50 {embed:.2f} ms\n"
    )
    print("| filter_tools | p50 ms | / one request embedding |")
    print("|---|---|---|")
    for name, p50 in rows:
        print(f"| {name} | {p50:.2f} | {p50 / embed:.2f}x |")
    print(f"\nrerank: learned / first stage only: {rows[1][1] / rows[0][1]:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shortlists", default="10,20")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "benchmarks")
    parser.add_argument(
        "--reranker",
        default=None,
        help="a reranker folder for the cross-encoder rows (none is in the repository: training.experiments."
        "train_reranker, then export_reranker); without it only the first stage and rerank: learned are timed",
    )
    args = parser.parse_args()
    asyncio.run(main([int(s) for s in args.shortlists.split(",")], args.queries, args.data, args.reranker))
