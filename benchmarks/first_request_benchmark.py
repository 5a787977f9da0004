"""The app's first request against the plain ranking, and what the first request may add, chosen
leave-one-catalog-family-out.

    python -m training.multi_tool_sets --checkout callnavi=PATH ... --out MULTI
    python benchmarks/first_request_benchmark.py --multi MULTI [--data ../shared/benchmarks]

Two paths over the same tools and requests, default configuration, every vector ready:

* **plain** — :meth:`ToolFilterManager.filter_tools`'s ranking (a request ranked bare: no turn);
* **first request** — what the SK wrapper and the Agent Framework middleware send for a conversation
  whose one message is the request (:meth:`ToolFilterManager.select_for_history`), with each candidate
  first-request blend (``agent_loop.first_request_weights``: ``plain`` is the top-level blend, a number
  the semantic weight of a semantic/BM25 blend).

Families (the fold unit: catalogs of one source stay together; bfcl's single-turn half and its
multi-turn half's opening requests are one family): the dev halves (metatool, bfcl, seal_tools,
livemcpbench) and the six public multi-tool sets of :mod:`training.multi_tool_sets` (never trained on).
For each family held out, the candidate with the best mean recall@5 over the *other* families
(a family's mean counts once; a tie keeps ``plain``) is measured on it. Prints Markdown; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from collections.abc import Iterator
from pathlib import Path

from sk_toolfilter import LocalEmbeddingGenerator, ToolFilterConfig, ToolFilterManager, ToolIndex
from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.measure.evaluation import LabelledQuery, load_queries, one_message
from sk_toolfilter.measure.metrics import recall_at_k
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.embeddings import cached

CANDIDATES: tuple[str, ...] = ("plain", "0.8", "0.9", "1.0")
"""First-request blends tried: the plain ranking's, and semantic weights of a semantic/BM25 blend
(0.9 is the model's in-turn blend, what the first request used before 0.9.0)."""

DEV = ("metatool", "bfcl", "seal_tools", "livemcpbench")


def opening_requests(path: Path) -> list[LabelledQuery]:
    """bfcl_multiturn's opening requests: each conversation's first step (one user message)."""
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row["turn"] == 0 and row["step"] == 0 and len(row["messages"]) == 1:
            out.append(LabelledQuery(row["id"], row["messages"][0]["content"], tuple(row["gold"]), row["category"]))
    return out


def catalogs(data: Path, multi: Path | None) -> Iterator[tuple[str, str, Path, list[LabelledQuery]]]:
    """(family, catalog, tools file, requests) of every catalog measured."""
    for name in DEV:
        yield name, name, data / name / "tools.jsonl", load_queries(data / name / "dev.jsonl")
    yield (
        "bfcl",
        "bfcl_multiturn",
        data / "bfcl_multiturn" / "tools.jsonl",
        opening_requests(data / "bfcl_multiturn" / "dev.jsonl"),
    )
    if multi is not None:
        for family, names in json.loads((multi / "families.json").read_text()).items():
            for name in names:
                yield family, name, multi / name / "tools.jsonl", load_queries(multi / name / "dev.jsonl")


def config_for(candidate: str) -> ToolFilterConfig:
    if candidate == "plain":
        return ToolFilterConfig.model_validate({"agent_loop": {"first_request_weights": "plain"}})
    semantic = float(candidate)
    blend = {"semantic": semantic, "bm25": round(1 - semantic, 3)}
    return ToolFilterConfig.model_validate({"agent_loop": {"first_request_weights": blend}})


async def recalls(data: Path, multi: Path | None) -> dict[str, dict[str, list[float]]]:
    """family -> path -> recall@5 per request."""
    cache = EmbeddingCache(Path.home() / ".cache" / "sk-toolfilter" / "benchmarks")
    service = cached(LocalEmbeddingGenerator(), cache)
    out: dict[str, dict[str, list[float]]] = {}
    for family, name, tools_file, queries in catalogs(data, multi):
        index = await ToolIndex.build([t for t, _ in load_catalog(tools_file)], service, cache=cache)
        rows = out.setdefault(family, {})
        plain = ToolFilterManager(index, ToolFilterConfig())
        await plain.vectors_ready()
        for q in queries:
            ranked = [t.full_name for t in (await plain.select(q.query)).ranking.tools]
            rows.setdefault("filter_tools", []).append(recall_at_k(ranked, q.gold, 5))
        for candidate in CANDIDATES:
            manager = ToolFilterManager(index, config_for(candidate))
            for q in queries:
                selection = await manager.select_for_history(one_message(q.query))
                ranked = [t.full_name for t in selection.ranking.tools]
                rows.setdefault(candidate, []).append(recall_at_k(ranked, q.gold, 5))
        print(f"<!-- {family}/{name}: {len(queries)} requests -->", flush=True)
    return out


def main(data: Path, multi: Path | None) -> None:
    rows = asyncio.run(recalls(data, multi))
    means = {f: {path: statistics.mean(v) for path, v in paths.items()} for f, paths in rows.items()}
    print("\nrecall@5 per family (requests): the plain ranking, then each first-request blend\n")
    print("| family | requests | filter_tools | " + " | ".join(f"first: {c}" for c in CANDIDATES) + " |")
    print("|---|---|---|" + "---|" * len(CANDIDATES))
    for family, paths in means.items():
        cells = " | ".join(f"{paths[c]:.3f}" for c in CANDIDATES)
        print(f"| {family} | {len(rows[family]['plain'])} | {paths['filter_tools']:.3f} | {cells} |")
    print("\nleave-one-family-out: the blend the other families choose, measured on the held-out family\n")
    print("| held out | chosen | first request recall@5 | filter_tools recall@5 | difference |")
    print("|---|---|---|---|---|")
    for held in means:
        others = [f for f in means if f != held]
        score = {c: statistics.mean(means[f][c] for f in others) for c in CANDIDATES}
        chosen = max(CANDIDATES, key=lambda c: (round(score[c], 6), c == "plain"))
        got, plain = means[held][chosen], means[held]["filter_tools"]
        print(f"| {held} | {chosen} | {got:.3f} | {plain:.3f} | {got - plain:+.3f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "benchmarks")
    parser.add_argument("--multi", type=Path, help="training.multi_tool_sets output folder (the six unseen families)")
    args = parser.parse_args()
    main(args.data, args.multi)
