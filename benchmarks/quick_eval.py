"""Quick recall check on the dev sets (development aid): python benchmarks/quick_eval.py [datasets...]"""

import asyncio
import json
import os
import sys
from pathlib import Path

from sk_toolfilter import LocalEmbeddingGenerator, ToolFilterConfig, ToolIndex
from sk_toolfilter.cache import EmbeddingCache
from sk_toolfilter.catalog import load_catalog
from sk_toolfilter.evaluation import evaluate_method, load_queries

ROOT = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"


async def main(names):
    # QUICK_EVAL_CONFIG='{"semantic_floor": 0.1}' and QUICK_EVAL_METHODS=hybrid tune one run.
    config = ToolFilterConfig.from_mapping(json.loads(os.environ.get("QUICK_EVAL_CONFIG", "{}")))
    methods = os.environ.get("QUICK_EVAL_METHODS", "bm25,semantic,hybrid").split(",")
    service = LocalEmbeddingGenerator()
    for name in names:
        tools = [t for t, _ in load_catalog(ROOT / name / "tools.jsonl")]
        queries = load_queries(ROOT / name / "dev.jsonl")
        index = await ToolIndex.build(tools, service, bm25_config=config.bm25, cache=EmbeddingCache())
        for method in methods:
            r = await evaluate_method(index, queries, method, config)
            m = r.metrics
            keys = ("recall@1", "recall@5", "recall@10", "mrr", "mean_tools_sent", "recall_sent", "p50_ms")
            figures = " ".join(f"{k} {m[k]:.3f}" for k in keys)
            print(f"{name:12s} {method:9s} {figures}", flush=True)


asyncio.run(main(sys.argv[1:] or ["metatool", "bfcl", "seal_tools", "livemcpbench"]))
