"""Leave-one-catalog-out for the second stage: one reranker per fold, trained without its family.

Runs :mod:`training.experiments.train_reranker` ``--hold-out F`` for every fold of
:data:`training.experiments.train_reranker.FOLDS` (one after another: the machine has two cores), then
:mod:`training.experiments.rerank_folds` over their held-out scores. Extra arguments go to every training run.

    python -m training.experiments.rerank_lodo --data training/out/rerank --out training/out/rerank/folds -- --epochs 1
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from training.experiments import rerank_folds
from training.experiments.train_reranker import FOLDS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--folds", default=",".join(FOLDS))
    parser.add_argument("extra", nargs="*", help="arguments for training.experiments.train_reranker (after --)")
    args = parser.parse_args(argv)
    for fold in [f for f in args.folds.split(",") if f]:
        folder = args.out / fold
        if (folder / "scores.jsonl").is_file():
            print(f"== {fold}: done before", file=sys.stderr)
            continue
        print(f"== {fold}: training without it", file=sys.stderr, flush=True)
        command = [
            sys.executable,
            "-m",
            "training.experiments.train_reranker",
            "--data",
            str(args.data),
            "--out",
            str(folder),
        ]
        subprocess.run([*command, "--hold-out", fold, *args.extra], check=True)
    return rerank_folds.main(["--folds", str(args.out), "--out", str(args.out / "lodo.md")])


if __name__ == "__main__":
    raise SystemExit(main())
