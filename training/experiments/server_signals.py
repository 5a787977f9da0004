"""Does the plugin / MCP server help rank its tools? Four families of server signals, measured.

Each blends a per-server score into the hybrid tool score (``tool + beta * server``) or reorders
the top of the ranking, on the dev halves (recall@5; metatool and bfcl have one plugin, so only
seal_tools, 146 plugins, and livemcpbench, 70 MCP servers, can move):

- ``sibmax``: a server scores as its best tool (a strong hit lifts its siblings);
- ``centroid``: cosine of the request to the mean vector of the server's tools;
- ``pdoc`` / ``pcos``: a server document (its name and its tools' names) ranked by BM25 + cosine,
  or cosine alone;
- ``diverse``: the top is re-picked so each further tool of an already-picked server counts
  ``(1 - delta)`` less.

    python -m training.experiments.server_signals [--sets seal_tools,livemcpbench] [--model minilm-l6-tools-v1]

Result (2026-11-23, shipped model): no signal helps both sets; see training/experiments/NOTEBOOK.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import numpy as np

from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.measure.evaluation import load_queries
from sk_toolfilter.measure.metrics import recall_at_k
from sk_toolfilter.retrieval.bm25 import BM25Index
from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator
from sk_toolfilter.retrieval.first_stage import score_text as _score_text
from sk_toolfilter.retrieval.fusion import normalize_by_max, normalize_cosine, rank_order, zscore
from sk_toolfilter.retrieval.index import ToolIndex, embed_catalog
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.text import humanize_identifier
from training.sources import BENCHMARKS

BETAS = (0.1, 0.2, 0.3, 0.5)


def _diverse(order: list[int], final: np.ndarray, server: np.ndarray, delta: float, k: int = 10) -> list[int]:
    picked: list[int] = []
    count: dict[int, int] = {}
    rest = list(order)
    while rest and len(picked) < k:
        best = max(rest, key=lambda i: final[i] * (1 - delta) ** count.get(int(server[i]), 0))
        rest.remove(best)
        picked.append(best)
        count[int(server[best])] = count.get(int(server[best]), 0) + 1
    return picked


async def measure(name: str, model: str, root: Path) -> dict[str, float]:
    service = LocalEmbeddingGenerator(model=model)
    tools = [t for t, _ in load_catalog(root / name / "tools.jsonl")]
    queries = load_queries(root / name / "dev.jsonl")
    index = await ToolIndex.build(tools, service)
    servers = sorted({t.plugin for t in tools})
    server = np.array([servers.index(t.plugin) for t in tools])
    members = [np.flatnonzero(server == i) for i in range(len(servers))]
    docs = [
        f"{humanize_identifier(s)}: " + ", ".join(humanize_identifier(tools[j].name) for j in members[i])
        for i, s in enumerate(servers)
    ]
    doc_vectors, _ = await embed_catalog(service, docs)
    doc_bm25 = BM25Index.from_tools(
        [ToolMetadata(plugin=s, name=s, full_name=f"S-{i}", description=docs[i]) for i, s in enumerate(servers)],
        index.bm25_config,
    )
    vectors = index.embeddings
    assert vectors is not None
    centroids = np.stack([vectors[m].mean(0) for m in members])
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    config = ToolFilterConfig(search_method="hybrid")
    texts = [q.query for q in queries]
    query_vectors = np.concatenate([await index.embed_queries(texts[i : i + 32]) for i in range(0, len(texts), 32)])
    rows: dict[str, list[float]] = {}

    def add(key: str, order: list[int], gold: list[str]) -> None:
        rows.setdefault(key, []).append(recall_at_k([tools[i].full_name for i in order], gold, 5))

    for q, qv in zip(queries, query_vectors, strict=True):
        final = _score_text(index, q.query, qv, config, None).final
        add("base", rank_order(final, 10).tolist(), q.gold)
        best = np.zeros(len(servers))
        np.maximum.at(best, server, final)
        doc = normalize_by_max(
            np.clip(0.8 * zscore(doc_vectors @ qv) + 0.2 * zscore(doc_bm25.raw_scores(q.query)), 0, None)
        )
        signals = {
            "sibmax": best,
            "centroid": normalize_cosine(centroids @ qv, config.semantic_floor),
            "pdoc": doc,
            "pcos": normalize_cosine(doc_vectors @ qv, config.semantic_floor),
        }
        for label, score in signals.items():
            for beta in BETAS:
                blended = np.where(final > 0, final + beta * score[server], 0.0)
                add(f"{label} b{beta}", rank_order(blended, 10).tolist(), q.gold)
        for delta in (0.1, 0.2, 0.3):
            add(f"diverse d{delta}", _diverse(rank_order(final, 40).tolist(), final, server, delta), q.gold)
    return {key: round(float(np.mean(values)), 4) for key, values in rows.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="seal_tools,livemcpbench")
    parser.add_argument("--model", default="minilm-l6-tools-v1")
    parser.add_argument("--root", type=Path, default=BENCHMARKS)
    args = parser.parse_args(argv)
    results = {name: asyncio.run(measure(name, args.model, args.root)) for name in args.sets.split(",") if name}
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
