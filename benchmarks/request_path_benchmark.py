"""What one request costs, against a general MiniLM-L6 query embedding measured in the same run.

    python benchmarks/request_path_benchmark.py [--models minilm-l2-tools-v1,minilm-l6-tools-v1] [--queries 300]

For each local model: the p50 of embedding one request through its query service (what the index
calls), and the p50 of ``ToolFilterManager.filter_tools`` end to end (hybrid, default
configuration) on the metatool catalog (199 tools, the bundled BFCL catalog without the benchmark
folders), and the paired figure: per request, its own embedding then ``filter_tools`` of the same text,
alternating (the median of the per-request ratios: the overhead around the model); and, per request,
the request encoder timed inside ``filter_tools`` (as the request pays it) against the rest. The yardstick is
the general ``all-MiniLM-L6-v2-int8`` embedding one request. Every
request is timed once per model (no query-vector cache hit). Prints Markdown; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from sk_toolfilter import LocalEmbeddingGenerator, ToolFilterConfig, ToolFilterManager, ToolIndex
from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.retrieval.encoders import query_encoder
from sk_toolfilter.retrieval.local_models import GENERAL_MODEL_ID

ROOT = Path(__file__).resolve().parents[1]


def catalog_and_queries(data: Path) -> tuple[Path, list[str]]:
    folder = data / "metatool"
    if not folder.joinpath("dev.jsonl").exists():
        folder = ROOT / "examples" / "data" / "bfcl"
    queries = [json.loads(line)["query"] for line in (folder / "dev.jsonl").read_text().splitlines() if line.strip()]
    return folder / "tools.jsonl", queries


async def embedding_p50(model: str, queries: list[str]) -> float:
    service = query_encoder(LocalEmbeddingGenerator(model=model))
    await service.generate_embeddings(queries[:20])  # load and warm up
    times = []
    for query in queries:
        started = time.perf_counter()
        await service.generate_embeddings([query])
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def selection_p50(model: str, tools_file: Path, queries: list[str]) -> float:
    tools = [t for t, _ in load_catalog(tools_file)]
    index = await ToolIndex.build(tools, LocalEmbeddingGenerator(model=model))
    manager = ToolFilterManager(index, ToolFilterConfig(search_method="hybrid"))
    for query in queries[:20]:
        await manager.filter_tools(query + " (warm-up)")
    times = []
    for query in queries:
        started = time.perf_counter()
        await manager.filter_tools(query)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def paired_ratio(model: str, tools_file: Path, queries: list[str]) -> tuple[float, float, float]:
    """Per request, its own embedding (an encoder of its own: no shared vector cache) and then
    ``filter_tools`` of the same text, alternating, so both see the same text and the same machine
    load. Returns the p50 of each and the median of the per-request ratios."""
    tools = [t for t, _ in load_catalog(tools_file)]
    index = await ToolIndex.build(tools, LocalEmbeddingGenerator(model=model))
    manager = ToolFilterManager(index, ToolFilterConfig(search_method="hybrid"))
    service = query_encoder(LocalEmbeddingGenerator(model=model))
    for query in queries[:20]:
        await manager.filter_tools(query + " (warm-up)")
        await service.generate_embeddings([query + " (warm-up)"])
    embeds, selects = [], []
    for query in queries:
        started = time.perf_counter()
        await service.generate_embeddings([query])
        embeds.append(time.perf_counter() - started)
        started = time.perf_counter()
        await manager.filter_tools(query)
        selects.append(time.perf_counter() - started)
    ratios = [s / e for s, e in zip(selects, embeds, strict=True)]
    return 1000 * statistics.median(embeds), 1000 * statistics.median(selects), statistics.median(ratios)


async def inside_the_request(model: str, tools_file: Path, queries: list[str]) -> tuple[float, float, float, float]:
    """Per request, ``filter_tools`` end to end and the time its own request encoder ran inside it (every
    text of the request, as the request pays it: the encoder's threads woken after the ranking's work,
    not warm from a back-to-back loop). Returns the p50 of each, the p50 of the rest (the library's own
    work) and the median per-request ratio."""
    tools = [t for t, _ in load_catalog(tools_file)]
    service = LocalEmbeddingGenerator(model=model)
    index = await ToolIndex.build(tools, service)
    manager = ToolFilterManager(index, ToolFilterConfig(search_method="hybrid"))
    for query in queries[:20]:
        await manager.filter_tools(query + " (warm-up)")
    encoder = service.query_encoder.encoder
    embed, spent = encoder.embed, [0.0]

    def timed(texts: list[str], alone: bool = False) -> object:
        started = time.perf_counter()
        try:
            return embed(texts, alone=alone)
        finally:
            spent[0] += time.perf_counter() - started

    encoder.embed = timed
    totals, inside = [], []
    for query in queries:
        spent[0] = 0.0
        started = time.perf_counter()
        await manager.filter_tools(query)
        totals.append(time.perf_counter() - started)
        inside.append(spent[0])
    rest = [t - e for t, e in zip(totals, inside, strict=True)]
    ratio = statistics.median(t / e for t, e in zip(totals, inside, strict=True) if e > 0)
    p50 = statistics.median
    return 1000 * p50(totals), 1000 * p50(inside), 1000 * p50(rest), ratio


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="minilm-l2-tools-v1,minilm-l6-tools-v1")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "benchmarks")
    args = parser.parse_args()
    tools_file, all_queries = catalog_and_queries(args.data)
    n = args.queries
    yardstick = await embedding_p50(GENERAL_MODEL_ID, all_queries[:n])
    print(f"Yardstick: {GENERAL_MODEL_ID} embeds one request in {yardstick:.2f} ms (p50, {n} requests)\n")
    print(f"Catalog: {tools_file.parent.name} ({tools_file})\n")
    columns = ["request encoder", "embedding p50 ms", "ratio to the yardstick", "filter_tools p50 ms"]
    columns += ["ratio to the yardstick", "filter_tools / its embedding", "paired: median per-request ratio"]
    print("| " + " | ".join(columns) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for number, model in enumerate(m for m in args.models.split(",") if m):
        # Fresh requests per model and per measurement: no vector comes from a cache.
        chunk = all_queries[(2 * number + 1) * n : (2 * number + 3) * n] or all_queries[:n]
        embed = await embedding_p50(model, chunk[:n])
        select = await selection_p50(model, tools_file, chunk[n:] or chunk)
        paired_embed, paired_select, paired = await paired_ratio(model, tools_file, all_queries[-n:])
        print(
            f"| {model} | {embed:.2f} | {embed / yardstick:.2f}x | {select:.2f} | {select / yardstick:.2f}x "
            f"| {select / embed:.2f}x | {paired:.2f}x ({paired_select:.2f} / {paired_embed:.2f} ms) |",
            flush=True,
        )
    print("\nInside the request (the request encoder timed where filter_tools calls it):\n")
    print("| request encoder | filter_tools p50 ms | its embedding p50 ms | the rest p50 ms | median ratio |")
    print("|---|---:|---:|---:|---:|")
    for model in (m for m in args.models.split(",") if m):
        total, inside, rest, ratio = await inside_the_request(model, tools_file, all_queries[:n])
        print(f"| {model} | {total:.2f} | {inside:.2f} | {rest:.2f} | {ratio:.2f}x |", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
