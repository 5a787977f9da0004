"""Rebuild the shipped tool-retrieval model in one command: pairs -> fine-tune -> int8 ONNX -> eval -> card.

    python -m training.rebuild                        # the shipped model (about 45 min on 2 cores)
    python -m training.rebuild --exclude metatool --out training/out/lodo-metatool   # leave one out
    python -m training.rebuild --tiny --out /tmp/tiny # the whole pipeline on a few pairs (CI)

Writes ``<out>/pairs.jsonl``, ``<out>/model/hf`` (fp32 weights), ``<model-dir>/model.onnx``,
``tokenizer.json``, ``model.json`` and ``MODEL_CARD.md``, and ``<out>/eval.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from training import build_pairs, export, model_card, train
from training.evaluate import evaluate_model
from training.sources import BENCHMARKS, RETRIEVAL_SETS, SOURCES

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_ID = "minilm-l6-tools-v1"
SHIPPED_DIR = ROOT / "sk_toolfilter" / "retrieval" / "models" / SHIPPED_ID


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "training" / "out" / "shipped")
    parser.add_argument("--model-dir", type=Path, default=None, help="where the ONNX model goes")
    parser.add_argument("--id", default=SHIPPED_ID)
    parser.add_argument("--root", type=Path, default=BENCHMARKS)
    parser.add_argument("--sources", default=",".join(s.name for s in SOURCES), help="dev sets (folders of --root)")
    parser.add_argument("--exclude", default="", help="comma-separated sources to leave out")
    parser.add_argument("--tiny", action="store_true", help="a few pairs and steps: checks the pipeline, not the model")
    parser.add_argument("--pseudo-per-source", type=int, default=800, help="pseudo-query items mined per source")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument(
        "--mining-model", default=build_pairs.GENERAL_MODEL_ID, help="model id or folder that mines hard negatives"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pairs", type=Path, default=None, help="train on this pair file (from build_pairs)")
    args = parser.parse_args(argv)
    excluded = [s for s in args.exclude.split(",") if s]
    model_dir = args.model_dir or (SHIPPED_DIR if not (excluded or args.tiny) else args.out / "onnx")
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    def stage(text: str) -> None:
        print(f"[{(time.perf_counter() - started) / 60:5.1f} min] {text}", file=sys.stderr, flush=True)

    sources = [s for s in args.sources.split(",") if s and s not in excluded]
    pairs_file = args.out / "pairs.jsonl"
    if args.pairs is not None:
        stage(f"pairs from {args.pairs}")
        pairs = [build_pairs.Pair(**p) for p in train.load_pairs(args.pairs) if p["source"] in sources]
    else:
        stage(f"pairs from {', '.join(sources)}")
        pairs = asyncio.run(
            build_pairs.build_pairs(
                sources,
                root=args.root,
                pseudo_per_source=args.pseudo_per_source,
                limit=12 if args.tiny else None,
                mining_model=args.mining_model,
                log=lambda m: stage("  " + m),
            )
        )
    pairs_file.write_text("".join(json.dumps(asdict(p), ensure_ascii=False) + "\n" for p in pairs), encoding="utf-8")
    counts = build_pairs.count_pairs(pairs)
    stage(f"{len(pairs)} pairs")

    train_args = train.parse_args(
        [
            "--pairs", str(pairs_file), "--out", str(args.out / "model"), "--epochs", str(args.epochs),
            "--threads", str(args.threads), "--root", str(args.root),
            *(["--batch-size", "8", "--max-pairs", "16", "--log-every", "1"] if args.tiny else []),
        ]
    )  # fmt: skip
    stage("fine-tuning")
    hf_dir = train.train(train_args)
    stage("exporting int8 ONNX")
    export.export(hf_dir, model_dir, args.id, description="all-MiniLM-L6-v2 fine-tuned for tool retrieval")
    stage("evaluating on the dev halves")
    # Retrieval dev sets (bfcl_multiturn is a conversation replay: benchmarks/agent_loop_benchmark.py).
    known = {src.name for src in SOURCES}
    sets = [s for s in [*sources, *excluded] if s in RETRIEVAL_SETS or s not in known]
    after = asyncio.run(evaluate_model(str(model_dir), sets, root=args.root, limit=20 if args.tiny else None))
    (args.out / "eval.json").write_text(json.dumps(after, indent=2) + "\n")
    log = json.loads((args.out / "model" / "train_log.json").read_text())
    model_card.write(model_dir, counts=counts, train_log=log, after=after, excluded=excluded, argv=sys.argv[1:])
    stage(f"done: {model_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
