"""Fit the hybrid blend (the semantic weight of the z-score fusion) by leave-one-dataset-out.

The shipped model has seen every dev set, so its dev scores flatter the semantic leg. Each dev set
is therefore scored with the model trained without it (``training.leave_one_out``); the weight is
chosen on the other sets and reported on the held-out one, then fitted on all of them for the
default.

    python -m training.fit_fusion --lodo training/out/lodo [--grid 0.5,0.6,0.7,0.8,0.9] [--model-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from sk_toolfilter.config import ToolFilterConfig
from training.evaluate import evaluate_model
from training.sources import BENCHMARKS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lodo", type=Path, required=True, help="the leave_one_out output folder")
    parser.add_argument("--grid", default="0.5,0.6,0.7,0.8,0.9")
    parser.add_argument("--root", type=Path, default=BENCHMARKS)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--model-dir", type=Path, default=None, help="write the fitted blend into its model.json")
    args = parser.parse_args(argv)
    grid = [float(w) for w in args.grid.split(",")]
    sets = sorted(p.name for p in args.lodo.iterdir() if (p / "onnx" / "model.json").is_file())
    recall: dict[str, dict[float, float]] = {}
    for name in sets:
        recall[name] = {}
        for weight in grid:
            config = ToolFilterConfig(method_weights={"semantic": weight, "bm25": round(1 - weight, 3)})
            result = asyncio.run(
                evaluate_model(
                    str(args.lodo / name / "onnx"),
                    [name],
                    root=args.root,
                    methods=("hybrid",),
                    config=config,
                    cache_dir=args.cache_dir,
                )
            )
            recall[name][weight] = result[name]["hybrid"]["recall@5"]
    rows = ["| held out | weight chosen on the others | recall@5 there | best weight for it |", "|---|---|---|---|"]
    for name in sets:
        others = [s for s in sets if s != name]
        chosen = max(grid, key=lambda w: sum(recall[s][w] for s in others) / max(1, len(others)))
        best = max(grid, key=lambda w: recall[name][w])
        rows.append(f"| {name} | {chosen} | {recall[name][chosen]:.3f} | {best} ({recall[name][best]:.3f}) |")
    overall = max(grid, key=lambda w: sum(recall[s][w] for s in sets))
    text = "\n".join(rows) + f"\n\nFitted on all held-out sets: semantic weight {overall}.\n"
    (args.lodo / "fusion.json").write_text(json.dumps({"recall": recall, "chosen": overall}, indent=2) + "\n")
    (args.lodo / "fusion.md").write_text(text)
    print(text, file=sys.stderr)
    if args.model_dir is not None:  # the runtime uses it when a config sets no method_weights
        manifest_path = args.model_dir / "model.json"
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        manifest["hybrid_weights"] = {"semantic": overall, "bm25": round(1 - overall, 3)}
        manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
