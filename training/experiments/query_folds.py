"""Same catalogs, unseen requests: the estimate for the held-out halves of the benchmarks.

The held-out halves ask new questions of the same catalogs, which leave-one-dataset-out (a whole
catalog unseen) does not measure. Here half of every retrieval set's dev queries (by a hash of the
query id) are left out of training; a model trained on the rest is evaluated on them, beside the
general model and the shipped model (which has seen them).

    python -m training.experiments.query_folds --pairs training/out/pairs.jsonl --out training/out/query_fold
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
from pathlib import Path

from sk_toolfilter.measure.evaluation import load_queries
from training.evaluate import evaluate_model
from training.leave_one_out import train_and_export
from training.sources import BENCHMARKS, RETRIEVAL_SETS


def left_out(source: str, query_id: str) -> bool:
    """The half of a set's dev queries kept out of training."""
    return int(hashlib.sha1(f"sk-toolfilter-query-fold:{source}:{query_id}".encode()).hexdigest(), 16) % 2 == 0


def held_out_texts(root: Path) -> dict[str, set[str]]:
    return {
        name: {q.query for q in load_queries(root / name / "dev.jsonl") if left_out(name, q.id)}
        for name in RETRIEVAL_SETS
    }


def evaluate(model: str, root: Path) -> dict[str, dict[str, float]]:
    """recall@5 per set and method on the left-out queries."""
    results = asyncio.run(evaluate_model(model, RETRIEVAL_SETS, root=root, keep=lambda s, q: left_out(s, q.id)))
    return {name: {m: r[m]["recall@5"] for m in r} for name, r in results.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--root", type=Path, default=BENCHMARKS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    texts = held_out_texts(args.root)
    lines = [line for line in args.pairs.read_text(encoding="utf-8").splitlines() if line.strip()]
    kept = []
    for line in lines:
        pair = json.loads(line)
        if not (pair["kind"] == "query" and pair["query"] in texts.get(pair["source"], set())):
            kept.append(line)
    (args.out / "pairs.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
    print(f"{len(kept)} of {len(lines)} pairs kept", flush=True)
    if not (args.out / "onnx" / "model.json").exists():
        train_and_export(args.out, args.epochs, args.root, None, "query-fold")
    results = {
        label: evaluate(model, args.root)
        for label, model in (
            ("general", "all-MiniLM-L6-v2-int8"),
            ("trained without these queries", str(args.out / "onnx")),
            ("shipped (has seen them)", "minilm-l6-tools-v1"),
        )
    }
    (args.out / "query_fold.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
