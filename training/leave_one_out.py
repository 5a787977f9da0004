"""Leave-one-dataset-out: train without X, evaluate on X, for every dev set used in training.

Each run trains on the shipped run's pairs minus every pair from X (its queries and its tools'
pseudo-queries), so X's catalog and queries are unseen — the closest the dev halves come to a
catalog nobody tuned for. Writes ``<out>/lodo.json`` and ``<out>/lodo.md``.

    python -m training.leave_one_out --pairs training/out/pairs.jsonl --out training/out/lodo [--epochs 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from training import export, train
from training.evaluate import evaluate_model
from training.sources import BENCHMARKS, RETRIEVAL_SETS


def train_and_export(
    folder: Path, epochs: float, root: Path, cache_dir: Path | None, model_id: str, tool_layers: int = 0
) -> None:
    """Train on ``<folder>/pairs.jsonl`` (weights in ``<folder>/model``), export to ``<folder>/onnx``
    (and a trained tool side to ``<folder>/tool_onnx``, which the request encoder's manifest names)."""
    argv = ["--pairs", str(folder / "pairs.jsonl"), "--out", str(folder / "model"), "--epochs", str(epochs)]
    argv += ["--root", str(root), "--log-every", "50"] + (["--cache-dir", str(cache_dir)] if cache_dir else [])
    argv += ["--tool-layers", str(tool_layers)]
    hf = train.train(train.parse_args(argv))
    documents = export.TOOL_SIDE_MODEL_ID
    if tool_layers:
        documents = str(
            export.export(
                folder / "model" / "tool_hf", folder / "tool_onnx", f"{model_id}-tools", documents=None
            ).parent.resolve()
        )
    export.export(hf, folder / "onnx", model_id, documents=documents)


def run(
    pairs: Path, out: Path, sets: list[str], epochs: float, root: Path, cache_dir: Path | None, tool_layers: int = 0
) -> dict:
    saved = out / "lodo.json"  # earlier runs' sets are kept (one set per run is fine)
    results: dict[str, dict] = json.loads(saved.read_text()) if saved.exists() else {}
    lines = pairs.read_text(encoding="utf-8").splitlines()
    for held_out in sets:
        folder = out / held_out
        folder.mkdir(parents=True, exist_ok=True)
        kept = [line for line in lines if line.strip() and json.loads(line)["source"] != held_out]
        (folder / "pairs.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
        print(f"== without {held_out}: {len(kept)} pairs", file=sys.stderr, flush=True)
        train_and_export(folder, epochs, root, cache_dir, f"lodo-{held_out}", tool_layers)
        trained = asyncio.run(evaluate_model(str(folder / "onnx"), [held_out], root=root, cache_dir=cache_dir))
        general = asyncio.run(evaluate_model("all-MiniLM-L6-v2-int8", [held_out], root=root, cache_dir=cache_dir))
        results[held_out] = {"general": general[held_out], "trained_without": trained[held_out]}
        saved.write_text(json.dumps(results, indent=2) + "\n")
    rows = [
        "| held out | semantic: general → trained without it | hybrid: general → trained without it |",
        "|---|---|---|",
    ]
    for name, r in results.items():
        cells = [
            f"{r['general'][m]['recall@5']:.3f} → {r['trained_without'][m]['recall@5']:.3f}"
            for m in ("semantic", "hybrid")
        ]
        rows.append(f"| {name} | {' | '.join(cells)} |")
    (out / "lodo.md").write_text("recall@5 on the held-out dev set\n\n" + "\n".join(rows) + "\n")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sets", default=",".join(RETRIEVAL_SETS))
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--root", type=Path, default=BENCHMARKS)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--tool-layers", type=int, default=0, help="train the tool side's top N layers too")
    args = parser.parse_args(argv)
    sets = [s for s in args.sets.split(",") if s]
    run(args.pairs, args.out, sets, args.epochs, args.root, args.cache_dir, args.tool_layers)
    print((args.out / "lodo.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
