"""Recall of a local model on the dev halves, through the product's own ranking (semantic and hybrid).

python -m training.evaluate --model sk_toolfilter/retrieval/models/minilm-l6-tools-v1 [--sets metatool,bfcl]
python -m training.evaluate --model all-MiniLM-L6-v2-int8          # the previous default
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.measure.evaluation import LabelledQuery, evaluate_method, load_queries
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator, cached
from sk_toolfilter.retrieval.index import ToolIndex
from training.sources import BENCHMARKS, RETRIEVAL_SETS


async def evaluate_model(
    model: str,
    sets: list[str],
    *,
    root: Path = BENCHMARKS,
    methods: tuple[str, ...] = ("semantic", "hybrid"),
    config: ToolFilterConfig | None = None,
    cache_dir: Path | None = None,
    limit: int | None = None,
    keep: Callable[[str, LabelledQuery], bool] | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """{set: {method: metrics}} for `model` (an id or a model folder); `keep(set, query)` picks queries."""
    service: Any = LocalEmbeddingGenerator(model=model)
    cache = EmbeddingCache(cache_dir) if cache_dir else None
    if cache is not None:
        service = cached(service, cache)  # queries too (its query encoder behind the same cache)
    config = config or ToolFilterConfig()
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name in sets:
        tools = [t for t, _ in load_catalog(root / name / "tools.jsonl")]
        queries = [q for q in load_queries(root / name / "dev.jsonl") if keep is None or keep(name, q)][:limit]
        index = await ToolIndex.build(tools, service, cache=cache)
        results[name] = {}
        for method in methods:
            result = await evaluate_method(index, queries, method, config, first_request=False)  # type: ignore[arg-type]
            results[name][method] = {k: round(v, 4) for k, v in result.metrics.items() if not k.startswith("p")}
        print(
            f"{name:14}" + "".join(f"  {m} r@5 {results[name][m]['recall@5']:.3f}" for m in methods),
            file=sys.stderr,
            flush=True,
        )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--sets", default=",".join(RETRIEVAL_SETS))
    parser.add_argument("--root", type=Path, default=BENCHMARKS)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="write the metrics as JSON")
    args = parser.parse_args(argv)
    results = asyncio.run(
        evaluate_model(args.model, [s for s in args.sets.split(",") if s], root=args.root, cache_dir=args.cache_dir)
    )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
