"""A second stage trained in seconds: a linear ranker over the first stage's evidence, judged
leave-one-catalog-out.

    python -m training.learned_ranker collect --multi training/out/multi --out training/out/ltr
    python -m training.learned_ranker folds --data training/out/ltr [--export PATH]

``collect``: for every labelled request of every catalog, the shipped first stage's pass (default
configuration, every vector ready) and the features of its top ``--depth`` tools
(:func:`sk_toolfilter.retrieval.candidate_features.candidate_features`), one ``.npz`` per catalog.
Only catalogs the first stage never trained on are used to *train* (the six multi-tool sets of
:data:`training.sources.MULTI_TOOL_SETS`); the dev halves are collected to be *measured* only (the
shipped first stage saw them: its scores there are overconfident, and a ranker trained on them would
learn to trust it too much).

``folds``: leave one family out (six folds: CallNavi, NESTFUL, RestBench, ACEBench, ToolTalk,
API-Bank). In each fold the L2 strength is chosen by an inner leave-one-family-out on the training
families, the ranker trained on them (listwise softmax loss on the needed tools), and the held-out
family measured: recall@5, complete@5, complete@5 of the requests needing 3+ tools, first stage vs
both stages. ``--export`` writes the ranker trained on all six families.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sk_toolfilter.retrieval.candidate_features import FEATURES, FirstStagePass, LinearRanker, candidate_features

TOP = 5
L2_GRID = (0.0, 0.01, 0.1, 1.0)


@dataclass
class Requests:
    """One catalog's requests: per request, the shortlist's features (depth × features) and labels."""

    family: str
    catalog: str
    features: np.ndarray  # requests × depth × features (padded with zeros)
    valid: np.ndarray  # requests × depth: a real candidate
    labels: np.ndarray  # requests × depth: a needed tool
    needed: np.ndarray  # requests: how many tools the request needs (in the shortlist or not)


async def _collect_catalog(family: str, name: str, source: Path, depth: int, cache: object) -> Requests:
    from sk_toolfilter.agents.catalog import load_catalog
    from sk_toolfilter.config import ToolFilterConfig
    from sk_toolfilter.measure.evaluation import load_queries
    from sk_toolfilter.retrieval import search
    from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator, cached
    from sk_toolfilter.retrieval.index import ToolIndex
    from training.labelled_sets import turn_requests

    service = LocalEmbeddingGenerator()
    if cache is not None:
        service = cached(service, cache)  # type: ignore[arg-type]
    index = await ToolIndex.build([t for t, _ in load_catalog(source / "tools.jsonl")], service, cache=cache)  # type: ignore[arg-type]
    if name == "bfcl_multiturn":
        requests = [(q, gold) for _, q, gold in turn_requests(source)]
    else:
        requests = [(q.query, list(q.gold)) for q in load_queries(source / "dev.jsonl")]
    config = ToolFilterConfig()
    rankings = await search.rank_many(index, [q for q, _ in requests], config, limit=depth)
    names = index.names
    n = len(requests)
    features = np.zeros((n, depth, len(FEATURES)))
    valid = np.zeros((n, depth), dtype=bool)
    labels = np.zeros((n, depth), dtype=bool)
    for r, ((query, gold), ranking) in enumerate(zip(requests, rankings, strict=True)):
        view = await first_stage_pass(index, query, [index.position(t.full_name) for t in ranking.tools], config)
        rows = candidate_features(view, index.vectors_of(view.shortlist), index.tools, len(index))
        k = len(rows)
        features[r, :k], valid[r, :k] = rows, True
        labels[r, :k] = [names[p] in set(gold) for p in view.shortlist]
    needed = np.array([len(set(g)) for _, g in requests])
    return Requests(family, name, features, valid, labels, needed)


async def first_stage_pass(index: object, query: str, shortlist: list[int], config: object) -> FirstStagePass:
    """The scores the first stage computed for `query` (whole request and intent parts), as the runtime
    second stage receives them."""
    from sk_toolfilter.retrieval import search

    texts = search._query_texts(query, config)  # type: ignore[arg-type]
    vectors = await index.embed_queries(texts)  # type: ignore[attr-defined]
    scored = [search._score_text(index, t, vectors[i], config, None) for i, t in enumerate(texts)]  # type: ignore[arg-type]
    fused = scored[0].final if len(scored) == 1 else np.maximum.reduce([s.final for s in scored])
    parts = [s.final for s in scored[1:]]
    whole = scored[0].raw
    return FirstStagePass(query, shortlist, fused, parts, whole.get("semantic"), whole.get("bm25"))


def collect(benchmarks: Path, multi: Path, out: Path, depth: int, cache_dir: Path | None) -> None:
    from sk_toolfilter.retrieval.cache import EmbeddingCache
    from training.labelled_sets import catalogs

    cache = EmbeddingCache(cache_dir) if cache_dir else None
    out.mkdir(parents=True, exist_ok=True)
    for family, name, source in catalogs(benchmarks, multi):
        started = time.perf_counter()
        data = asyncio.run(_collect_catalog(family, name, source, depth, cache))
        np.savez_compressed(
            out / f"{name}.npz",
            family=family,
            features=data.features,
            valid=data.valid,
            labels=data.labels,
            needed=data.needed,
        )
        print(f"{name:28} {len(data.needed):5} requests {time.perf_counter() - started:6.1f} s", file=sys.stderr)


def load(folder: Path) -> list[Requests]:
    found = []
    for path in sorted(folder.glob("*.npz")):
        with np.load(path) as d:
            found.append(Requests(str(d["family"]), path.stem, d["features"], d["valid"], d["labels"], d["needed"]))
    return found


def _stack(sets: list[Requests]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        np.concatenate([s.features for s in sets]),
        np.concatenate([s.valid for s in sets]),
        np.concatenate([s.labels for s in sets]),
    )


def train(sets: list[Requests], l2: float, steps: int = 400, rate: float = 0.05) -> LinearRanker:
    """Listwise softmax loss on the needed tools in each shortlist (requests with none carry no signal)."""
    x, valid, labels = _stack(sets)
    keep = labels.any(axis=1)
    x, valid, labels = x[keep], valid[keep], labels[keep]
    flat = x[valid]
    mean, scale = flat.mean(axis=0), flat.std(axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    z = np.where(valid[..., None], (x - mean) / scale, 0.0)
    target = labels / labels.sum(axis=1, keepdims=True)
    w = np.zeros(x.shape[2])
    w[0] = 1.0  # start at the first stage's order (fused score)
    m, v = np.zeros_like(w), np.zeros_like(w)
    for step in range(1, steps + 1):  # Adam
        s = np.where(valid, z @ w, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        grad = np.einsum("rk,rkf->f", p - target, z) / len(z) + l2 * w
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        w -= rate * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    return LinearRanker(w, mean, scale, shortlist=x.shape[1])


def measure(sets: list[Requests], ranker: LinearRanker | None) -> dict[str, float]:
    """recall@5, complete@5, complete@5 of 3+-tool requests; the first stage when `ranker` is None."""
    recall, complete, complete3 = [], [], []
    for s in sets:
        for r in range(len(s.needed)):
            labels = s.labels[r][s.valid[r]]
            if ranker is None:
                top = labels[:TOP]
            else:
                scores = ranker.scores(s.features[r][s.valid[r]])
                top = labels[np.argsort(-scores, kind="stable")[:TOP]]
            hits, needed = int(top.sum()), int(s.needed[r])
            recall.append(hits / needed)
            complete.append(float(hits == needed))
            if needed >= 3:
                complete3.append(float(hits == needed))
    return {
        "recall@5": float(np.mean(recall)),
        "complete@5": float(np.mean(complete)),
        "complete@5 3+": float(np.mean(complete3)) if complete3 else float("nan"),
    }


def _families(sets: list[Requests]) -> dict[str, list[Requests]]:
    found: dict[str, list[Requests]] = {}
    for s in sets:
        found.setdefault(s.family, []).append(s)
    return found


def choose_l2(train_sets: list[Requests]) -> float:
    """The L2 strength with the best inner leave-one-family-out complete@5 + recall@5."""
    families = _families(train_sets)
    best, best_score = L2_GRID[0], -1.0
    for l2 in L2_GRID:
        scores = []
        for held in families:
            inner = [s for f, ss in families.items() if f != held for s in ss]
            m = measure(families[held], train(inner, l2))
            scores.append(m["recall@5"] + m["complete@5"])
        if np.mean(scores) > best_score:
            best, best_score = l2, float(np.mean(scores))
    return best


def folds(data: Path, export: Path | None) -> dict[str, object]:
    from training.sources import MULTI_TOOL_SETS

    sets = load(data)
    trainable = [s for s in sets if s.family not in DEV_FAMILIES]
    named = {source.name for source in MULTI_TOOL_SETS}
    foreign = sorted({s.family for s in trainable} - named)
    if foreign:
        raise ValueError(f"{data}: families {foreign} are not sources training/sources.py names; not trained on")
    families = _families(trainable)
    table: dict[str, object] = {}
    for family, held in families.items():
        started = time.perf_counter()
        rest = [s for f, ss in families.items() if f != family for s in ss]
        l2 = choose_l2(rest)
        ranker = train(rest, l2)
        table[family] = {
            "l2": l2,
            "first": measure(held, None),
            "both": measure(held, ranker),
            "seconds": round(time.perf_counter() - started, 1),
        }
        print(family, json.dumps(table[family]), file=sys.stderr)
    l2 = choose_l2(trainable)
    ranker = train(trainable, l2)
    table["dev halves (first stage trained on them)"] = {
        s.catalog: {"first": measure([s], None), "both": measure([s], ranker)} for s in sets if s.family in DEV_FAMILIES
    }
    table["weights"] = dict(zip(FEATURES, np.round(ranker.weights, 3).tolist(), strict=True))
    if export is not None:
        export.write_text(json.dumps(ranker.to_json(), indent=1) + "\n")
    return table


DEV_FAMILIES = {"metatool", "bfcl", "seal_tools", "livemcpbench"}


def main(argv: list[str] | None = None) -> int:
    from training.sources import BENCHMARKS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--benchmarks", type=Path, default=BENCHMARKS)
    c.add_argument("--multi", type=Path, required=True)
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--depth", type=int, default=30)
    c.add_argument("--cache-dir", type=Path, default=None)
    f = sub.add_parser("folds")
    f.add_argument("--data", type=Path, required=True)
    f.add_argument("--export", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.command == "collect":
        collect(args.benchmarks, args.multi, args.out, args.depth, args.cache_dir)
    else:
        print(json.dumps(folds(args.data, args.export), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
