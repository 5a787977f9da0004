"""Leave-one-catalog-out for the second stage: per fold and as the mean of the folds, recall@5,
complete@5 and complete@5 of requests needing 3+ tools, first stage alone vs both stages.

    python -m training.multi_tool_sets --checkout callnavi=PATH ... --out MULTI      # the public sets
    python -m training.rerank_shortlists --multi MULTI --out DATA                    # first-stage shortlists
    python -m training.experiments.rerank_lodo --data DATA --out FOLDS -- --epochs 1             # one reranker per fold
    python benchmarks/rerank_folds_benchmark.py --folds FOLDS

Each fold holds out one family (the four dev sets; CallNavi; NESTFUL + RestBench + ACEBench), never in
its reranker's training; the second stage's settings (shortlist depth, weight of the first stage's
order) are chosen on the other folds and reported on the held-out one. Prints Markdown; not a test.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from training.experiments.rerank_folds import evaluate, load_folds, table

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folds", type=Path, required=True, help="training.experiments.rerank_lodo's output folder")
    args = parser.parse_args()
    folds = load_folds(args.folds)
    if not folds:
        raise SystemExit(f"no <fold>/scores.jsonl under {args.folds} (run training.experiments.rerank_lodo first)")
    print(table(folds, evaluate(folds)))
