"""The first stage on public multi-tool catalogs it was never trained or tuned on.

    python -m training.multi_tool_sets --checkout callnavi=PATH ... --out MULTI
    python benchmarks/unseen_catalogs_benchmark.py --multi MULTI

Per family of :mod:`training.multi_tool_sets` (CallNavi, NESTFUL, RestBench, ACEBench, ToolTalk,
API-Bank: none of them in the shipped model's training), with the default configuration and every
vector ready: recall@5, complete@5, complete@5 of requests needing 3+ tools, and recall / complete at
10 and 20 (the shortlist a second stage would read). Prints Markdown; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from pathlib import Path

from sk_toolfilter import LocalEmbeddingGenerator, ToolFilterConfig, ToolIndex
from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.measure.evaluation import load_queries
from sk_toolfilter.measure.metrics import complete_at_k, recall_at_k
from sk_toolfilter.retrieval.search import rank_tools


async def family_rows(multi: Path) -> dict[str, list[tuple[list[str], tuple[str, ...]]]]:
    service, config = LocalEmbeddingGenerator(), ToolFilterConfig()
    out: dict[str, list[tuple[list[str], tuple[str, ...]]]] = {}
    for family, catalogs in json.loads((multi / "families.json").read_text()).items():
        for name in catalogs:
            index = await ToolIndex.build([t for t, _ in load_catalog(multi / name / "tools.jsonl")], service)
            for q in load_queries(multi / name / "dev.jsonl"):
                ranking = await rank_tools(index, q.query, config, limit=20)
                out.setdefault(family, []).append(([t.full_name for t in ranking.tools], q.gold))
    return out


def main(multi: Path) -> None:
    rows = asyncio.run(family_rows(multi))
    print(
        "| family | requests (3+ tools) | recall@5 | complete@5 | complete@5 3+ | recall@10 / complete@10 | "
        "recall@20 / complete@20 |"
    )
    print("|---|---|---|---|---|---|---|")
    for family, items in rows.items():
        many = [(r, g) for r, g in items if len(set(g)) >= 3]

        def mean(metric, k, subset=items):  # type: ignore[no-untyped-def]
            return statistics.mean(metric(r, g, k) for r, g in subset) if subset else float("nan")

        print(
            f"| {family} | {len(items)} ({len(many)}) | {mean(recall_at_k, 5):.3f} | {mean(complete_at_k, 5):.3f} | "
            f"{mean(complete_at_k, 5, many):.3f} | {mean(recall_at_k, 10):.3f} / {mean(complete_at_k, 10):.3f} | "
            f"{mean(recall_at_k, 20):.3f} / {mean(complete_at_k, 20):.3f} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--multi", type=Path, required=True, help="training.multi_tool_sets output folder")
    main(parser.parse_args().multi)
