"""Quick recall check on the dev sets (development aid): python benchmarks/quick_eval.py [datasets...]"""

import asyncio
import sys
from pathlib import Path

from sk_toolfilter import LocalEmbeddingGenerator, ToolFilterConfig, ToolIndex
from sk_toolfilter.cache import EmbeddingCache
from sk_toolfilter.catalog import load_catalog
from sk_toolfilter.evaluation import evaluate_method, load_queries

ROOT = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"


async def main(names):
    config = ToolFilterConfig()
    service = LocalEmbeddingGenerator()
    for name in names:
        tools = [t for t, _ in load_catalog(ROOT / name / "tools.jsonl")]
        queries = load_queries(ROOT / name / "dev.jsonl")
        index = await ToolIndex.build(tools, service, bm25_config=config.bm25, cache=EmbeddingCache())
        for method in ("bm25", "semantic", "hybrid"):
            r = await evaluate_method(index, queries, method, config)
            m = r.metrics
            print(f"{name:12s} {method:9s} r@1 {m['recall@1']:.3f} r@5 {m['recall@5']:.3f} r@10 {m['recall@10']:.3f} "
                  f"mrr {m['mrr']:.3f} sent {m['mean_tools_sent']:.1f} rsent {m['recall_sent']:.3f} p50 {m['p50_ms']:.2f}ms", flush=True)


asyncio.run(main(sys.argv[1:] or ["metatool", "bfcl", "seal_tools", "livemcpbench"]))
