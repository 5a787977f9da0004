"""The first stage's shortlist of every labelled request: what the second stage is trained and measured on.

For every catalog (the dev halves under ``--benchmarks``, the converted multi-tool sets under
``--multi``, see :mod:`training.multi_tool_sets`), the shipped first stage (default configuration,
every vector ready) ranks each request and keeps its top ``--depth`` tools. One JSON line per
request: ``family``, ``catalog``, ``id``, ``query``, ``gold``, ``shortlist`` (full names, best
first), and per catalog ``<out>/tools/<catalog>.json`` (full name -> the text the reranker reads).

    python -m training.rerank_shortlists --multi training/out/multi --out training/out/rerank
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.measure.evaluation import load_queries
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator, cached
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.search import rank_tools
from training.labelled_sets import catalogs, turn_requests
from training.sources import BENCHMARKS


def write_tool_texts(benchmarks: Path, multi: Path | None, out: Path) -> None:
    """``<out>/tools/<catalog>.json``: full name -> :attr:`ToolMetadata.rerank_text` of every tool of every catalog."""
    (out / "tools").mkdir(parents=True, exist_ok=True)
    for _, name, folder in catalogs(benchmarks, multi):
        tools = [t for t, _ in load_catalog(folder / "tools.jsonl")]
        (out / "tools" / f"{name}.json").write_text(json.dumps({t.full_name: t.rerank_text for t in tools}))


async def build(benchmarks: Path, multi: Path | None, out: Path, depth: int, cache_dir: Path | None) -> int:
    service = LocalEmbeddingGenerator()
    cache = EmbeddingCache(cache_dir) if cache_dir else None
    if cache is not None:
        service = cached(service, cache)
    config = ToolFilterConfig()
    write_tool_texts(benchmarks, multi, out)
    written = 0
    with (out / "shortlists.jsonl").open("w", encoding="utf-8") as sink:
        for family, name, folder in catalogs(benchmarks, multi):
            started = time.perf_counter()
            tools = [t for t, _ in load_catalog(folder / "tools.jsonl")]
            index = await ToolIndex.build(tools, service, cache=cache)
            if name == "bfcl_multiturn":
                requests = turn_requests(folder)
            else:
                requests = [(q.id, q.query, list(q.gold)) for q in load_queries(folder / "dev.jsonl")]
            for rid, query, gold in requests:
                ranking = await rank_tools(index, query, config, limit=depth)
                row = {"family": family, "catalog": name, "id": rid, "query": query, "gold": gold}
                row["shortlist"] = [t.full_name for t in ranking.tools]
                sink.write(json.dumps(row) + "\n")
                written += 1
            print(
                f"{name:28} {len(tools):5} tools {len(requests):5} requests  {time.perf_counter() - started:6.1f} s",
                file=sys.stderr,
                flush=True,
            )
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmarks", type=Path, default=BENCHMARKS)
    parser.add_argument("--multi", type=Path, default=None, help="training.multi_tool_sets output")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--depth", type=int, default=30)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--texts-only", action="store_true", help="only (re)write the tools' reranker texts")
    args = parser.parse_args(argv)
    if args.texts_only:
        write_tool_texts(args.benchmarks, args.multi, args.out)
        return 0
    n = asyncio.run(build(args.benchmarks, args.multi, args.out, args.depth, args.cache_dir))
    print(f"{n} shortlists -> {args.out / 'shortlists.jsonl'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
