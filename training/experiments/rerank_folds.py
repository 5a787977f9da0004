"""Leave-one-catalog-out for the second stage: every fold's held-out scores -> one table, parameters chosen by it.

Reads ``<folds>/<fold>/scores.jsonl`` (:mod:`training.experiments.train_reranker` ``--hold-out``: each held-out
request's first-stage shortlist with the reranker's score of every tool) and reports, per fold and as
the mean of the folds, recall@5, complete@5 and complete@5 of requests needing 3+ tools for:

- the first stage alone (its order);
- the second stage over the first ``depth`` tools, for each (depth, blend) of the grid, where the
  reranker's score gets ``w * -log(1 + first-stage position)`` added, ``w`` = the weight learned in
  training (``blend`` "learned") or a fixed one (0: the network alone);
- "chosen": for each fold, the (depth, blend) with the best mean complete@5 on the *other* folds,
  reported on this one (the leave-one-catalog-out estimate of choosing it).

    python -m training.experiments.rerank_folds --folds training/out/rerank/folds [--out table.md]
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path

from sk_toolfilter.measure.metrics import complete_at_k, recall_at_k

DEPTHS = (10, 15, 20)
BLENDS: tuple[float | str, ...] = ("learned", 0.0, 1.0, 2.0, 4.0)
METRICS = ("recall@5", "complete@5", "complete@5 (3+)", "recall@10", "complete@10")


def reorder(row: dict, depth: int, blend: float | str) -> list[str]:
    """The shortlist with its first `depth` tools reordered by the reranker (ties: first-stage order)."""
    head = range(min(depth, len(row["shortlist"])))
    weight = float(row.get("prior_weight", 0.0)) if blend == "learned" else float(blend)
    score = {i: row["scores"][i] - weight * math.log(i + 1) for i in head}
    order = sorted(head, key=lambda i: (-score[i], i))
    return [row["shortlist"][i] for i in order] + row["shortlist"][len(order) :]


def metrics(rows: Sequence[dict], order_of) -> dict[str, float]:  # type: ignore[no-untyped-def]
    out: dict[str, list[float]] = {m: [] for m in METRICS}
    for row in rows:
        ranked = order_of(row)
        out["recall@5"].append(recall_at_k(ranked, row["gold"], 5))
        out["complete@5"].append(complete_at_k(ranked, row["gold"], 5))
        out["recall@10"].append(recall_at_k(ranked, row["gold"], 10))
        out["complete@10"].append(complete_at_k(ranked, row["gold"], 10))
        if len(set(row["gold"])) >= 3:
            out["complete@5 (3+)"].append(complete_at_k(ranked, row["gold"], 5))
    return {m: (sum(v) / len(v) if v else float("nan")) for m, v in out.items()}


def load_folds(folder: Path) -> dict[str, list[dict]]:
    return {
        f.parent.name: [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        for f in sorted(folder.glob("*/scores.jsonl"))
    }


def evaluate(folds: dict[str, list[dict]]) -> dict:
    """{"first": {fold: metrics}, "grid": {(depth, blend): {fold: metrics}}, "chosen": {fold: (setting, metrics)}}."""
    first = {name: metrics(rows, lambda r: r["shortlist"]) for name, rows in folds.items()}
    grid = {
        (d, b): {name: metrics(rows, lambda r, d=d, b=b: reorder(r, d, b)) for name, rows in folds.items()}
        for d in DEPTHS
        for b in BLENDS
    }
    chosen = {}
    for name in folds:
        others = [f for f in folds if f != name]

        def on_others(setting: tuple[int, float | str], others: list[str] = others) -> float:
            return sum(grid[setting][f]["complete@5"] for f in others) / max(1, len(others))

        best = max(grid, key=on_others)
        chosen[name] = (best, grid[best][name])
    return {"first": first, "grid": grid, "chosen": chosen}


def _mean(values: Sequence[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else float("nan")


def table(folds: dict[str, list[dict]], result: dict) -> str:
    def cells(m: dict[str, float]) -> str:
        keys = ("recall@5", "complete@5", "complete@5 (3+)")
        return " | ".join("–" if math.isnan(m[k]) else f"{m[k]:.3f}" for k in keys)  # – : no such request

    lines = [
        "| fold (held out) | requests | first stage: recall@5 | complete@5 | complete@5 3+ | both stages (setting "
        "chosen on the other folds): recall@5 | complete@5 | complete@5 3+ | chosen (depth, weight) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rows in folds.items():
        setting, chosen = result["chosen"][name]
        lines.append(
            f"| {name} | {len(rows)} | {cells(result['first'][name])} | {cells(chosen)} | {setting[0]}, {setting[1]} |"
        )
    mean_first = {k: _mean([m[k] for m in result["first"].values()]) for k in METRICS}
    mean_chosen = {k: _mean([c[1][k] for c in result["chosen"].values()]) for k in METRICS}
    lines.append(
        f"| **mean of folds** | {sum(len(r) for r in folds.values())} | {cells(mean_first)} | {cells(mean_chosen)} | |"
    )
    lines += ["", "Mean of the folds for every setting (depth, blend): recall@5 / complete@5 / complete@5 3+", ""]
    lines += [
        "| depth | blend | recall@5 | complete@5 | complete@5 3+ | worst fold's complete@5 change |",
        "|---|---|---|---|---|---|",
    ]
    for (depth, blend), per_fold in result["grid"].items():
        mean = {k: _mean([m[k] for m in per_fold.values()]) for k in METRICS}
        worst = min(per_fold[f]["complete@5"] - result["first"][f]["complete@5"] for f in per_fold)
        lines.append(
            f"| {depth} | {blend} | {mean['recall@5']:.3f} | {mean['complete@5']:.3f} | "
            f"{mean['complete@5 (3+)']:.3f} | {worst:+.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folds", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    folds = load_folds(args.folds)
    if not folds:
        parser.error(f"no <fold>/scores.jsonl under {args.folds}")
    text = table(folds, evaluate(folds))
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
