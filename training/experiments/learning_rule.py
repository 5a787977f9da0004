"""Choose the learning-from-use rule (:class:`~sk_toolfilter.retrieval.memory.LearningRule`) by traffic replay.

Every rule of a small grid is replayed on every collected catalog (``training.replay``: 3 random
halves, 10 % and 50 % of the traffic, both label regimes). A rule is *admissible* on a set of
catalogs when no catalog loses more than 0.005 recall@5 or complete@5 at any amount of traffic in
either regime (means over the seeds); among the admissible, the best mean gain (families weighted
equally: complete@5 + recall@5, 50 % and 10 %, ``sent`` regime) wins. Leave one family out: the
rule is chosen on the other families and measured on the held-out one; the shipped rule is chosen
on every family.

    python -m training.experiments.learning_rule --evidence training/out/evidence --out training/out/rule.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from dataclasses import asdict
from multiprocessing import Pool
from pathlib import Path

import numpy as np

from sk_toolfilter.retrieval.memory import LearningRule
from training.replay import Evidence, families, load_all, replay

FRACTIONS = (0.1, 0.5)
REGIMES = ("sent", "all")
SEEDS = (0, 1, 2)
MAX_LOSS = 0.005

# A first grid (gate 0.6-0.8, weight 0.5-2, floor up to 0.5) put its best at weight 2 and gate 0.8, and
# every gate-0.6 rule lost over 0.02 somewhere: this one is centred there.
GRID = {
    "gate": (0.7, 0.75, 0.8, 0.85),
    "prior": (0.1, 0.3, 1.0),
    "weight": (1.0, 2.0, 4.0),
    "enter": (0.3, 0.5, 2.0),
    "floor": (0.0, 0.3),
}

_SETS: list[Evidence] = []


def _init(folder: str) -> None:
    _SETS[:] = load_all(Path(folder))


def _deltas(rule_fields: dict[str, float]) -> dict[str, list[float]]:
    """Per catalog: [Δrecall, Δcomplete] for each (fraction, regime), means over the seeds."""
    rule = LearningRule(**rule_fields)  # type: ignore[arg-type]
    table: dict[str, list[float]] = {}
    for evidence in _SETS:
        row = []
        for fraction, regime in itertools.product(FRACTIONS, REGIMES):
            outcomes = [replay(evidence, rule, fraction, seed, regime) for seed in SEEDS]
            row.append(float(np.mean([o.recall - o.cold_recall for o in outcomes])))
            row.append(float(np.mean([o.complete - o.cold_complete for o in outcomes])))
        table[evidence.catalog] = row
    return table


def score(table: dict[str, list[float]], catalogs_by_family: dict[str, list[str]]) -> tuple[bool, float]:
    """(admissible, mean gain) over the given families."""
    worst = min(min(table[c]) for cs in catalogs_by_family.values() for c in cs)
    gains = [np.mean([np.mean(table[c]) for c in cs]) for cs in catalogs_by_family.values()]
    return worst >= -MAX_LOSS, float(np.mean(gains))


def choose(results: list[tuple[dict, dict]], catalogs_by_family: dict[str, list[str]]) -> tuple[dict, float]:
    best, best_gain = None, -1.0
    for fields, table in results:
        admissible, gain = score(table, catalogs_by_family)
        if admissible and gain > best_gain:
            best, best_gain = fields, gain
    return best or {}, best_gain


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--evidence", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--grid", type=json.loads, default=GRID, help="the grid as JSON (default: GRID)")
    args = parser.parse_args(argv)
    sets = load_all(args.evidence)
    by_family = {f: [e.catalog for e in es] for f, es in families(sets).items()}
    grid = args.grid
    rules = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    started = time.perf_counter()
    results = []
    with Pool(args.processes, _init, (str(args.evidence),)) as pool:
        for done, table in enumerate(pool.imap(_deltas, rules), 1):
            results.append((rules[done - 1], table))
            rate = done / (time.perf_counter() - started)
            print(
                f"\r{done}/{len(rules)} rules, {rate:.2f}/s, {(len(rules) - done) / rate:5.0f} s left",
                end="",
                file=sys.stderr,
            )
    print(file=sys.stderr)
    folds = {}
    for family in by_family:
        others = {f: cs for f, cs in by_family.items() if f != family}
        fields, _ = choose(results, others)
        table = dict(next(t for f, t in results if f == fields)) if fields else {}
        folds[family] = {"rule": fields, "held_out": {c: table.get(c) for c in by_family[family]}}
    shipped, gain = choose(results, by_family)
    shipped_table = next((t for f, t in results if f == shipped), {})
    report = {
        "columns": [
            f"{m} {fr} {rg}" for fr, rg in itertools.product(FRACTIONS, REGIMES) for m in ("recall", "complete")
        ],
        "shipped": {**asdict(LearningRule(**shipped)), "mean_gain": gain} if shipped else None,  # type: ignore[arg-type]
        "shipped_table": shipped_table,
        "folds": folds,
        "all": [[f, t] for f, t in results],
    }
    args.out.write_text(json.dumps(report))
    print(json.dumps({"shipped": report["shipped"]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
