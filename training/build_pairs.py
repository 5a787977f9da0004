"""Build query -> tool training pairs, with hard negatives mined by today's hybrid ranking.

Each pair: a query, the text the index embeds for a gold tool (``ToolMetadata.embedding_text``, so
training sees exactly what ranking sees), the other gold tools of the query (never used as
negatives), and up to ``--negatives`` hard negatives: the best-ranked non-gold tools of the same
catalog under the shipped BM25 + MiniLM hybrid.

Two kinds of query:
- real requests: the dev halves' queries, and for bfcl_multiturn each turn's user request;
- pseudo-queries made from a tool's own texts (its first description sentence with the tool's
  name removed, and "<verb phrase of the name> <required parameters>"), for every catalog tool.

    python -m training.build_pairs --out training/out/pairs.jsonl [--exclude metatool] [--limit N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator
from sk_toolfilter.retrieval.faults import EmbeddingCircuit
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.local_models import GENERAL_MODEL_ID
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.search import rank_tools
from sk_toolfilter.retrieval.text import humanize_identifier
from training.sources import BENCHMARKS, SOURCES

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass
class Pair:
    source: str
    kind: str  # "query" (a real request) or "pseudo" (made from the tool's own texts)
    query: str
    positive: str
    positive_id: str
    gold_ids: list[str]
    negatives: list[str] = field(default_factory=list)
    negative_ids: list[str] = field(default_factory=list)


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def real_queries(source: str, folder: Path) -> list[tuple[str, list[str]]]:
    """(query, gold full names) of a dev half; bfcl_multiturn: one query per turn (its user request)."""
    rows = _read_jsonl(folder / "dev.jsonl")
    if source != "bfcl_multiturn":
        return [(str(r["query"]), list(r["gold"])) for r in rows]
    turns: dict[tuple[str, int], tuple[str, list[str]]] = {}
    for r in rows:
        users = [m for m in r["messages"] if m.get("role") == "user"]
        request = str(users[-1]["content"]) if users else ""
        _, golds = turns.setdefault((r["entry"], r["turn"]), (request, []))
        golds.extend(g for g in r["gold"] if g not in golds)
    return [v for v in turns.values() if v[0].strip()]


def pseudo_queries(tool: ToolMetadata) -> list[str]:
    """Requests made from a tool's own texts: what its description says it does, and its name as an action."""
    out = []
    description = " ".join(tool.description.split())
    first = _SENTENCE_END.split(description, maxsplit=1)[0].rstrip(".") if description else ""
    name_words = humanize_identifier(tool.name)
    if first:
        first = re.sub(re.escape(tool.name), "", first, flags=re.IGNORECASE).strip(" :-")
        if len(first.split()) >= 3:
            out.append(first[:300])
    required = [humanize_identifier(p.name) for p in tool.parameters if p.required][:3]
    action = " ".join([name_words, *required]).strip()
    if len(action.split()) >= 2:
        out.append(action)
    return out


STEP_WORDS = (", then ", " and then ", ". After that, ", "; also ")


def composed_queries(
    pseudo: list[tuple[str, str, list[str]]], count: int, rng: random.Random
) -> list[tuple[str, str, list[str]]]:
    """Two-step requests made of two tools' pseudo-queries ("<A's request>, then <B's request>"),
    both tools gold: the encoder learns that a request can need tools for each of its parts."""
    made: list[tuple[str, str, list[str]]] = []
    for _ in range(count if len(pseudo) > 1 else 0):
        (_, first, [a]), (_, second, [b]) = rng.sample(pseudo, 2)
        if a != b:
            made.append(("composed", f"{first}{rng.choice(STEP_WORDS)}{second[:1].lower()}{second[1:]}", [a, b]))
    return made


async def _mine(index: ToolIndex, query: str, gold: set[str], k: int, config: ToolFilterConfig) -> list[int]:
    ranking = await rank_tools(index, query, config, limit=k + len(gold) + 5)
    return [index.position(s.tool.full_name) for s in ranking.tools if s.tool.full_name not in gold][:k]


async def build_pairs(
    sources: Iterable[str],
    *,
    root: Path = BENCHMARKS,
    negatives: int = 3,
    pseudo_per_source: int = 800,
    limit: int | None = None,
    seed: int = 13,
    cache_dir: Path | None = None,
    mining_model: str = GENERAL_MODEL_ID,
    composed_per_source: int = 0,
    log=print,
) -> list[Pair]:
    """Every pair of the named sources (see :data:`training.sources.SOURCES`).

    Hard negatives are the best non-gold tools under the hybrid ranking with `mining_model` (by
    default the previous default model; a trained model's folder for a second round)."""
    rng = random.Random(seed)
    service = LocalEmbeddingGenerator(model=mining_model)
    # A generous bound: on a busy machine a 5 s timeout would quietly mine some queries with BM25 alone.
    circuit = EmbeddingCircuit(timeout_seconds=120.0)
    cache = EmbeddingCache(cache_dir) if cache_dir else None
    config = ToolFilterConfig(search_method="hybrid")
    pairs: list[Pair] = []
    for source in sources:
        folder = root / source
        tools = [t for t, _ in load_catalog(folder / "tools.jsonl")]
        index = await ToolIndex.build(tools, service, cache=cache, circuit=circuit)
        texts = {t.full_name: t.embedding_text() for t in tools}
        by_name = {t.full_name: t for t in tools}
        items: list[tuple[str, str, list[str]]] = [("query", q, g) for q, g in real_queries(source, folder)]
        pseudo = [("pseudo", q, [t.full_name]) for t in tools for q in pseudo_queries(t)]
        rng.shuffle(pseudo)
        items += pseudo[:pseudo_per_source]
        items += composed_queries(pseudo, composed_per_source, rng)
        if limit is not None:
            rng.shuffle(items)
            items = items[:limit]
        made = defaultdict(int)
        for kind, query, gold in items:
            gold = [g for g in gold if g in by_name]
            if not gold:
                continue
            mined = await _mine(index, query, set(gold), negatives, config)
            negative_texts = [texts[index.tools[i].full_name] for i in mined]
            for g in gold:
                pairs.append(
                    Pair(
                        source,
                        kind,
                        query,
                        texts[g],
                        g,
                        gold,
                        negative_texts,
                        [index.tools[i].full_name for i in mined],
                    )
                )
                made[kind] += 1
        log(
            f"{source}: {len(tools)} tools, {made['query']} query pairs, {made['pseudo']} pseudo pairs, "
            f"{made['composed']} composed pairs"
        )
    return pairs


def count_pairs(pairs: list[Pair]) -> dict[str, dict[str, int]]:
    """{source: {kind: pairs}}."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for p in pairs:
        counts[p.source][p.kind] += 1
    return {s: dict(k) for s, k in counts.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--root", type=Path, default=BENCHMARKS, help="folder of the dev halves")
    parser.add_argument("--sources", default=",".join(s.name for s in SOURCES))
    parser.add_argument("--exclude", default="", help="comma-separated sources to leave out (leave-one-out runs)")
    parser.add_argument("--negatives", type=int, default=3)
    parser.add_argument("--pseudo-per-source", type=int, default=800)
    parser.add_argument("--limit", type=int, default=None, help="at most N items per source (tiny runs)")
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--mining-model", default=GENERAL_MODEL_ID, help="model id or folder ranking the negatives")
    parser.add_argument(
        "--composed-per-source", type=int, default=0, help="two-step requests composed of two tools' pseudo-queries"
    )
    args = parser.parse_args(argv)
    excluded = {s for s in args.exclude.split(",") if s}
    chosen = [s for s in args.sources.split(",") if s and s not in excluded]
    pairs = asyncio.run(
        build_pairs(
            chosen,
            root=args.root,
            negatives=args.negatives,
            pseudo_per_source=args.pseudo_per_source,
            limit=args.limit,
            cache_dir=args.cache_dir,
            mining_model=args.mining_model,
            composed_per_source=args.composed_per_source,
        )
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for pair in pairs:
            f.write(json.dumps(asdict(pair), ensure_ascii=False) + "\n")
    print(f"{len(pairs)} pairs -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
