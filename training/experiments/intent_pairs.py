"""Intent pairs: each step of a multi-tool request, paired with the gold tool it asks for (issue 31).

The ranking embeds each intent of a request separately (``split_request_intents``) and merges the
per-intent rankings, but the request encoder was trained on whole requests only. This adds, for every
real request with two or more gold tools that splits into two or more intents, one pair per intent:
the intent's text, the gold tool it is closest to under the general model (cosine of the intent to
each gold tool's text; an intent is kept only when that tool is at least ``--min-gap`` closer than
the next gold tool), the request's other gold tools masked, and the request's own mined negatives.

    python -m training.experiments.intent_pairs --pairs training/out/pairs.jsonl --out training/out/pairs_intents.jsonl

Only the request texts of the pair file are used: a leave-one-out pair file (built ``--exclude X``)
gives intent pairs without X.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from pathlib import Path

import numpy as np

from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator
from sk_toolfilter.retrieval.local_models import GENERAL_MODEL_ID
from sk_toolfilter.retrieval.text import split_request_intents
from training.build_pairs import _read_jsonl


def requests_with_several_tools(pairs: list[dict]) -> dict[tuple[str, str], dict[str, dict]]:
    """(source, request) -> {gold tool id: its pair}, for real requests with two or more gold tools."""
    grouped: dict[tuple[str, str], dict[str, dict]] = {}
    for pair in pairs:
        if pair["kind"] == "query" and len(pair["gold_ids"]) >= 2:
            grouped.setdefault((pair["source"], pair["query"]), {})[pair["positive_id"]] = pair
    return {key: by_tool for key, by_tool in grouped.items() if len(by_tool) >= 2}


async def intent_pairs(pairs: list[dict], min_gap: float, min_query_parts: int) -> list[dict]:
    """One pair per intent that one gold tool clearly answers (see the module docstring)."""
    service = LocalEmbeddingGenerator(model=GENERAL_MODEL_ID)
    made: list[dict] = []
    for (_source, request), by_tool in requests_with_several_tools(pairs).items():
        intents = split_request_intents(request, min_query_parts)
        if len(intents) < 2:
            continue
        tools = list(by_tool)
        vectors = np.asarray(await service.generate_embeddings([*intents, *(by_tool[t]["positive"] for t in tools)]))
        cosines = vectors[: len(intents)] @ vectors[len(intents) :].T
        for intent, row in zip(intents, cosines, strict=True):
            best, *rest = np.argsort(-row)
            if rest and row[best] - row[rest[0]] < min_gap:
                continue  # two gold tools are about as close: no clear answer for this intent
            pair = by_tool[tools[best]]
            made.append({**pair, "kind": "intent", "query": intent})
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="the pair file with the intent pairs appended")
    parser.add_argument("--min-gap", type=float, default=0.05)
    args = parser.parse_args(argv)
    pairs = _read_jsonl(args.pairs)
    made = asyncio.run(intent_pairs(pairs, args.min_gap, ToolFilterConfig().min_query_parts))
    with args.out.open("w", encoding="utf-8") as out:
        for pair in [*pairs, *made]:
            out.write(json.dumps(pair, ensure_ascii=False) + "\n")
    counts = Counter(pair["source"] for pair in made)
    print(f"{len(made)} intent pairs added to {len(pairs)}: {dict(sorted(counts.items()))} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
