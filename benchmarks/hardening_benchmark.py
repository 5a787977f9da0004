"""Hardening benchmark: cold vs warm start, re-index after adding a plugin, concurrent throughput, memory.

    python benchmarks/hardening_benchmark.py [--tools 5000] [--big 50000]

Prints a Markdown table. Wall-clock figures on this machine; nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import OpenAIChatPromptExecutionSettings
from synthetic import synthetic_kernel, synthetic_queries, synthetic_tools

from sk_toolfilter import (
    LocalEmbeddingGenerator,
    ToolFilterConfig,
    ToolFilterManager,
    ToolIndex,
    create_tool_filter,
)
from sk_toolfilter.config import EmbeddingConfig


def row(what: str, value: str) -> None:
    print(f"| {what} | {value} |", flush=True)


async def start(kernel, cache_dir, service):
    config = ToolFilterConfig(embedding=EmbeddingConfig(cache_dir=str(cache_dir)), discovery={"enabled": False})
    started = time.perf_counter()
    manager = await create_tool_filter(kernel, config, embedding_service=service)
    return manager, time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tools", type=int, default=5000)
    parser.add_argument("--big", type=int, default=50000)
    args = parser.parse_args()
    service = LocalEmbeddingGenerator()
    service.embed_sync(["warm up"])
    tools = synthetic_tools(args.tools + 10)
    base, extra = tools[: args.tools], tools[args.tools :]
    print("| measurement | value |\n|---|---|")
    with tempfile.TemporaryDirectory() as cache_dir:
        _, cold = await start(synthetic_kernel(base), cache_dir, service)
        manager, warm = await start(synthetic_kernel(base), cache_dir, service)
        row(f"cold start, {args.tools} tools (embed all, local model)", f"{cold:.2f} s")
        row(f"warm start, {args.tools} tools (embedding cache)", f"{warm:.2f} s ({cold / warm:.0f}x faster)")

        kernel = manager.source.kernel
        plugin_tools = [
            t.__class__(
                plugin="NewPlugin",
                name=t.name,
                full_name=f"NewPlugin-{t.name}",
                description=t.description,
                parameters=t.parameters,
            )
            for t in extra
        ]
        new_plugin = synthetic_kernel(plugin_tools).plugins["NewPlugin"]
        kernel.add_plugin(new_plugin)
        started = time.perf_counter()
        assert await manager.refresh()
        reindex = time.perf_counter() - started
        row(
            "re-index after adding a 10-function plugin",
            f"{reindex:.3f} s ({100 * reindex / cold:.1f}% of a cold rebuild)",
        )

        for method in ("bm25", "hybrid"):
            manager.config = manager.config.model_copy(update={"search_method": method})
            base_settings = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
            queries = synthetic_queries(base, 100)
            await manager.prepare_execution_settings(queries[0], base_settings)
            started = time.perf_counter()
            await asyncio.gather(*(manager.prepare_execution_settings(q, base_settings) for q in queries))
            elapsed = time.perf_counter() - started
            row(f"prepare_execution_settings, 100 concurrent, {method}", f"{100 / elapsed:.0f} requests/s")

    for size in (args.tools, args.big):
        big = synthetic_tools(size)
        vectors = np.random.default_rng(0).standard_normal((size, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        started = time.perf_counter()
        index = ToolIndex(big, embeddings=vectors, embedding_service=service)
        build = time.perf_counter() - started
        tracemalloc.start()  # a separate pass: tracing slows the build several times
        ToolIndex(big, embeddings=vectors, embedding_service=service)
        peak = (tracemalloc.get_traced_memory()[1] + vectors.nbytes) / 2**20
        tracemalloc.stop()
        manager = ToolFilterManager(index, ToolFilterConfig(search_method="bm25", discovery={"enabled": False}))
        times = []
        for query in synthetic_queries(big, 200):
            t0 = time.perf_counter()
            await manager.filter_tools(query)
            times.append((time.perf_counter() - t0) * 1000)
        row(
            f"{size} tools: index build (BM25 + 384-d vectors given)",
            f"{build:.2f} s; index memory peak {peak:.0f} MiB (with the vectors)",
        )
        row(
            f"{size} tools: BM25 filter_tools p50 / p95",
            f"{statistics.median(times):.2f} / {np.percentile(times, 95):.2f} ms",
        )
    row("process peak RSS", f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    asyncio.run(main())
