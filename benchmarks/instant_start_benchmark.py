"""Instant start: how soon a cold agent answers, and how soon it ranks with vectors.

    python benchmarks/instant_start_benchmark.py [--tools 5000] [--queries 20]

A synthetic catalog of `--tools` tools behind the offline model, with an empty embedding cache:
once with ``embedding.background_above: null`` (the agent waits for every vector before its first
answer, as before) and once with the default (it answers with BM25 at once and embeds in the
background). Prints, for each: seconds from the start of indexing to the first answer, to the first
hybrid answer, and the first answers' latency while the build runs, plus the ratio of the two
first-answer times measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from typing import Any

from synthetic import synthetic_kernel, synthetic_queries, synthetic_tools

from sk_toolfilter import ToolFilterConfig, ToolFilterManager


async def run(tools: int, queries: int, background_above: int | None) -> dict[str, Any]:
    catalog = synthetic_tools(tools)
    kernel = synthetic_kernel(catalog)
    requests = synthetic_queries(catalog, queries)
    with tempfile.TemporaryDirectory() as cache:
        config = ToolFilterConfig(embedding={"cache_dir": cache, "background_above": background_above})
        started = time.perf_counter()
        manager = await ToolFilterManager.from_kernel(kernel, config)
        first = await manager.select(requests[0])
        first_answer = time.perf_counter() - started
        during = []
        for request in requests[1:]:
            began = time.perf_counter()
            await manager.select(request)
            during.append(1000 * (time.perf_counter() - began))
            await asyncio.sleep(0)
        await manager.vectors_ready()
        hybrid = await manager.select(requests[0])
        ready = time.perf_counter() - started
        await manager.aclose()
    return {
        "first_answer_s": first_answer,
        "first_method": first.ranking.method,
        "ready_s": ready,
        "later_method": hybrid.ranking.method,
        "during_p50_ms": statistics.median(during) if during else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=20)
    args = parser.parse_args()
    waiting = asyncio.run(run(args.tools, args.queries, None))
    instant = asyncio.run(run(args.tools, args.queries, 500))
    print(f"{args.tools} tools, empty cache, offline model (this machine, one run each)\n")
    print("| start | first answer | its method | vectors ready | then | requests meanwhile p50 |")
    print("|---|---|---|---|---|---|")
    for label, r in (("wait for the vectors", waiting), ("instant (default)", instant)):
        print(
            f"| {label} | {r['first_answer_s']:.2f} s | {r['first_method']} | {r['ready_s']:.1f} s "
            f"| {r['later_method']} | {r['during_p50_ms']:.2f} ms |"
        )
    print(f"\nfirst answer, instant / waiting: {instant['first_answer_s'] / waiting['first_answer_s']:.3f}x")


if __name__ == "__main__":
    main()
