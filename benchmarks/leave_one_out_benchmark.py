"""Leave-one-dataset-out: each dev set ranked by a request encoder trained without it.

    python -m training.leave_one_out --pairs PAIRS --out LODO            # trains one model per held-out set
    python benchmarks/leave_one_out_benchmark.py --models LODO [--models STUDENTS ...]
        [--data ../shared/benchmarks] [--datasets metatool,bfcl,seal_tools,livemcpbench]

`--models` folders hold one ``<set>/onnx`` model per held-out set (what ``training.leave_one_out``
and ``training.distill_lodo`` write); each is measured only on the set it never saw. Beside them:
the general all-MiniLM-L6-v2 (never trained on any set) and the shipped model (trained on every
dev set: an upper bound, not a leave-one-out figure). Prints, per set and model, recall@5,
complete@5 and recall@5 / complete@5 by the number of tools a request needs, with the default
ranking configuration (hybrid). Tool and query vectors are cached on disk.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from intent_benchmark import measure

from sk_toolfilter import LocalEmbeddingGenerator, ToolFilterConfig, ToolIndex
from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.measure.evaluation import load_queries
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.embeddings import cached

GENERAL = "all-MiniLM-L6-v2-int8"
SHIPPED = "minilm-l6-tools-v1"


async def main(data: Path, folders: list[Path], datasets: list[str]) -> None:
    cache = EmbeddingCache(Path.home() / ".cache" / "sk-toolfilter" / "benchmarks")
    config = ToolFilterConfig()
    print("recall@5 / complete@5 (queries) by tools needed; hybrid, default configuration\n")
    print("| held-out set | model | recall@5 | complete@5 | 1 | 2 | 3 | 4+ |")
    print("|---|---|---|---|---|---|---|---|")
    for name in datasets:
        models = [(f"general ({GENERAL})", GENERAL)]
        models += [(f"trained without it ({folder.name})", str(folder / name / "onnx")) for folder in folders]
        models += [(f"shipped (trained on it: upper bound) ({SHIPPED})", SHIPPED)]
        tools = [t for t, _ in load_catalog(data / name / "tools.jsonl")]
        queries = load_queries(data / name / "dev.jsonl")
        for label, model in models:
            if model.endswith("onnx") and not Path(model).is_dir():
                continue  # that run left this set out of its list
            service = cached(LocalEmbeddingGenerator(model=model), cache)
            index = await ToolIndex.build(tools, service, cache=cache)
            result = await measure(index, queries, config)
            by_need = result["by_need"]
            cells = ["{:.3f} / {:.3f} ({})".format(*by_need[k]) if k in by_need else "–" for k in ("1", "2", "3", "4+")]
            figures = f"{result['recall@5']:.4f} | {result['complete@5']:.4f} | " + " | ".join(cells)
            print(f"| {name} | {label} | {figures} |", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "benchmarks")
    parser.add_argument(
        "--models",
        type=Path,
        action="append",
        default=[],
        help="a folder of <set>/onnx models (none: the general and shipped ones only)",
    )
    parser.add_argument("--datasets", default="metatool,bfcl,seal_tools,livemcpbench")
    args = parser.parse_args()
    asyncio.run(main(args.data, args.models, [d for d in args.datasets.split(",") if d]))
