"""Traffic replay: what learning from use would have done on a labelled request set.

Shared by the learning-from-use benchmark and the second stage's folds. Two steps:

1. :func:`collect` — the first stage's evidence for every labelled request of every catalog (the
   dev halves, and the converted multi-tool sets when given), computed once through the product
   (:func:`~sk_toolfilter.retrieval.search.rank_many`, default configuration, every vector ready):
   the request's vector, its ranking (the best ``depth`` full names) and their scores. Kept as
   ``<out>/<catalog>.npz`` + ``.json``.
2. :func:`replay` — a random half of a catalog's requests is the traffic, the other half is
   measured. A fraction of all requests (10 %, 50 %) is served in order through the product's
   :class:`~sk_toolfilter.retrieval.memory.LearningMemory` and learned with the tools "called": in the
   ``sent`` regime only the needed tools the filter had in its top 5 at that moment (no discovery
   found the others), in the ``all`` regime every needed tool (discovery found every miss). The
   measured half is then ranked with what was learned: recall@5, complete@5 cold and learned.

Folds keep a family (one source repository) together; a request's twin in the same catalog is
traffic or measured at random, as in a deployment.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sk_toolfilter.measure.metrics import complete_at_k, recall_at_k
from sk_toolfilter.retrieval.memory import LearningMemory, LearningRule

TOP = 5


@dataclass
class Evidence:
    """One catalog's labelled requests and the first stage's evidence for each."""

    family: str
    catalog: str
    ids: list[str]
    gold: list[list[str]]
    vectors: np.ndarray
    names: list[list[str]]
    scores: list[list[float]]

    def __len__(self) -> int:
        return len(self.ids)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(folder / f"{self.catalog}.npz", vectors=self.vectors)
        meta = {k: getattr(self, k) for k in ("family", "catalog", "ids", "gold", "names", "scores")}
        (folder / f"{self.catalog}.json").write_text(json.dumps(meta))

    @classmethod
    def load(cls, folder: Path, catalog: str) -> Evidence:
        meta = json.loads((folder / f"{catalog}.json").read_text())
        vectors = np.load(folder / f"{catalog}.npz")["vectors"]
        return cls(vectors=vectors, **meta)


def load_all(folder: Path) -> list[Evidence]:
    """Every catalog collected under `folder`, in name order."""
    return [Evidence.load(folder, p.stem) for p in sorted(folder.glob("*.json"))]


async def collect_catalog(family: str, name: str, source: Path, depth: int = 100, cache: object = None) -> Evidence:
    """The first stage's evidence for every labelled request of the catalog in `source` (tools.jsonl, dev.jsonl)."""
    from sk_toolfilter.agents.catalog import load_catalog
    from sk_toolfilter.config import ToolFilterConfig
    from sk_toolfilter.measure.evaluation import load_queries
    from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator, cached
    from sk_toolfilter.retrieval.index import ToolIndex
    from sk_toolfilter.retrieval.search import rank_many
    from training.labelled_sets import turn_requests

    service = LocalEmbeddingGenerator()
    if cache is not None:
        service = cached(service, cache)  # type: ignore[arg-type]
    tools = [t for t, _ in load_catalog(source / "tools.jsonl")]
    index = await ToolIndex.build(tools, service, cache=cache)  # type: ignore[arg-type]  (every vector ready)
    if name == "bfcl_multiturn":
        requests = turn_requests(source)
    else:
        requests = [(q.id, q.query, list(q.gold)) for q in load_queries(source / "dev.jsonl")]
    config = ToolFilterConfig()
    queries = [q for _, q, _ in requests]
    rankings = await rank_many(index, queries, config, limit=depth)
    vectors = np.concatenate([await index.embed_queries(queries[i : i + 256]) for i in range(0, len(queries), 256)])
    return Evidence(
        family,
        name,
        [rid for rid, _, _ in requests],
        [gold for _, _, gold in requests],
        vectors.astype(np.float32),
        [[t.full_name for t in r.tools] for r in rankings],
        [[round(t.score, 6) for t in r.tools] for r in rankings],
    )


def collect(benchmarks: Path, multi: Path | None, out: Path, depth: int = 100, cache_dir: Path | None = None) -> None:
    """Write the first stage's evidence of every catalog under `out` (catalogs already there are kept)."""
    from sk_toolfilter.retrieval.cache import EmbeddingCache
    from training.labelled_sets import catalogs

    cache = EmbeddingCache(cache_dir) if cache_dir else None
    for family, name, source in catalogs(benchmarks, multi):
        if (out / f"{name}.json").exists():
            continue
        started = time.perf_counter()
        evidence = asyncio.run(collect_catalog(family, name, source, depth, cache))
        evidence.save(out)
        print(f"{name:28} {len(evidence):5} requests  {time.perf_counter() - started:6.1f} s", file=sys.stderr)


@dataclass(frozen=True)
class Outcome:
    """Measured-half figures of one replay: cold and learned recall@5 / complete@5."""

    cold_recall: float
    cold_complete: float
    recall: float
    complete: float
    measured: int


def _top_metrics(ranked: list[str], gold: list[str]) -> tuple[float, float]:
    return recall_at_k(ranked, gold, TOP), complete_at_k(ranked, gold, TOP)


def halves(n: int, seed: int, groups: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A random half of ``range(n)`` as traffic (in serving order) and the other half, measured. With
    `groups`, related items (the steps of a conversation, its twin variants) fall on one side together:
    a measured request never learns from its own twin or from its conversation's later steps."""
    if groups is None or len(set(groups)) == n:
        order = np.random.default_rng(seed).permutation(n)
        return order[: n // 2], np.sort(order[n // 2 :])
    names = list(dict.fromkeys(groups))
    members: dict[str, list[int]] = {}
    for i, group in enumerate(groups):
        members.setdefault(group, []).append(i)
    shuffled = [names[g] for g in np.random.default_rng(seed).permutation(len(names))]
    traffic: list[int] = []
    for group in shuffled:
        if len(traffic) >= n // 2:
            break
        traffic.extend(members[group])
    measured = sorted(set(range(n)) - set(traffic))
    return np.asarray(traffic, dtype=np.int64), np.asarray(measured, dtype=np.int64)


_TWIN = re.compile(r"^multi_turn_(?:base|long_context|miss_func|miss_param|composite)_(\d+)$")


def related(evidence: Evidence) -> list[str]:
    """Each request's group for :func:`halves` (see :func:`related_ids`)."""
    return related_ids(evidence.ids)


def related_ids(ids: list[str]) -> list[str]:
    """Each request's group for :func:`halves`: a multi-turn conversation (``conv/t3``) with all its
    steps and its twin variants (BFCL's ``multi_turn_base_7`` and ``multi_turn_long_context_7`` ask the
    same); any other request alone."""
    groups = []
    for item in ids:
        head = conversation_of(item)
        twin = _TWIN.match(head)
        groups.append(f"multi_turn_{twin.group(1)}" if twin else head)
    return groups


def fingerprint(evidence: Evidence, i: int) -> str:
    """The request's key as the product makes it: a hash (here of its id), never its text."""
    return hashlib.sha256(f"{evidence.catalog}/{evidence.ids[i]}".encode()).hexdigest()[:32]


def conversation_of(item: str) -> str:
    """The conversation a request id belongs to: the steps of one multi-turn conversation (``conv/t3``)
    are one conversation, as the product counts them; any other request is its own."""
    return item.rsplit("/", 1)[0] if "/" in item else item


def conversation(evidence: Evidence, i: int) -> str:
    """The conversation of `evidence`'s request `i` (:func:`conversation_of`), scoped to its catalog."""
    return f"{evidence.catalog}/{conversation_of(evidence.ids[i])}"


def replay(
    evidence: Evidence, rule: LearningRule, fraction: float, seed: int, regime: str = "sent", clock: float = 1e9
) -> Outcome:
    """Serve `fraction` of the catalog's requests (from a random half) as traffic, then measure the other half."""
    traffic, measured = halves(len(evidence), seed, related(evidence))
    traffic = traffic[: round(fraction * len(evidence))]
    memory = LearningMemory(rule=rule, clock=lambda: clock, half_life_days=None, background_trust=False)
    for i in traffic.tolist():
        gold = evidence.gold[i]
        talk = conversation(evidence, i)
        if regime == "sent":
            served = memory.reorder(evidence.names[i], evidence.scores[i], evidence.vectors[i], conversation=talk).names
            called = [g for g in gold if g in set(served[:TOP])]
        else:
            called = list(gold)
        memory.learn(evidence.vectors[i], called, fingerprint(evidence, i), at=clock, conversation=talk)
    sums = np.zeros(4)
    for i in measured.tolist():
        gold = evidence.gold[i]
        talk = conversation(evidence, i)
        learned = memory.reorder(evidence.names[i], evidence.scores[i], evidence.vectors[i], conversation=talk).names
        sums += (*_top_metrics(evidence.names[i], gold), *_top_metrics(learned, gold))
    n = max(1, len(measured))
    return Outcome(*(sums / n).tolist(), measured=len(measured))


def families(sets: list[Evidence]) -> dict[str, list[Evidence]]:
    """The catalogs of each family (a leave-one-catalog-out fold holds one family out)."""
    found: dict[str, list[Evidence]] = {}
    for e in sets:
        found.setdefault(e.family, []).append(e)
    return found


def folds(sets: list[Evidence]) -> Iterator[tuple[str, list[Evidence], list[Evidence]]]:
    """(held-out family, its catalogs, every other catalog) for each family."""
    by_family = families(sets)
    for family, held in by_family.items():
        yield family, held, [e for f, es in by_family.items() if f != family for e in es]


def main(argv: list[str] | None = None) -> int:
    import argparse

    from training.sources import BENCHMARKS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmarks", type=Path, default=BENCHMARKS)
    parser.add_argument("--multi", type=Path, default=None, help="training.multi_tool_sets output")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--cache-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    collect(args.benchmarks, args.multi, args.out, args.depth, args.cache_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
