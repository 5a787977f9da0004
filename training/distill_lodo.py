"""Leave-one-dataset-out for the distilled request encoder: does the student read requests it never
saw as its teacher does?

For each dev set X: a student distilled without any text of X (its requests, their parts, its
tools' pseudo-requests), evaluated on X through the product's ranking beside the teacher. The
teacher itself was trained on X, so this isolates what the student adds: the gap between a
student and its teacher on texts the student never met. Writes ``<out>/distill_lodo.json`` and
``<out>/distill_lodo.md``.

    python -m training.distill_lodo --out training/out/distill_lodo [--sets metatool,bfcl] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from training import distill
from training.evaluate import evaluate_model
from training.sources import BENCHMARKS, RETRIEVAL_SETS


def run(out: Path, sets: list[str], root: Path, cache_dir: Path | None, extra: list[str]) -> dict:
    saved = out / "distill_lodo.json"  # earlier runs' sets are kept
    results: dict[str, dict] = json.loads(saved.read_text()) if saved.exists() else {}
    for held_out in sets:
        folder = out / held_out
        print(f"== student without {held_out}", file=sys.stderr, flush=True)
        argv = ["--out", str(folder), "--exclude", held_out, "--root", str(root), "--id", f"student-lodo-{held_out}"]
        argv += (["--cache-dir", str(cache_dir)] if cache_dir else []) + extra
        onnx = distill.distill(distill.parse_args(argv))
        student = asyncio.run(evaluate_model(str(onnx), [held_out], root=root, cache_dir=cache_dir))
        teacher = asyncio.run(evaluate_model(distill.TEACHER, [held_out], root=root, cache_dir=cache_dir))
        results[held_out] = {"teacher": teacher[held_out], "student_without": student[held_out]}
        saved.write_text(json.dumps(results, indent=2) + "\n")
    rows = [
        "| held out | semantic: teacher → student without it | hybrid: teacher → student without it |",
        "|---|---|---|",
    ]
    for name, r in results.items():
        cells = [
            f"{r['teacher'][m]['recall@5']:.3f} → {r['student_without'][m]['recall@5']:.3f}"
            for m in ("semantic", "hybrid")
        ]
        rows.append(f"| {name} | {' | '.join(cells)} |")
    (out / "distill_lodo.md").write_text("recall@5 on the held-out dev set\n\n" + "\n".join(rows) + "\n")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sets", default=",".join(RETRIEVAL_SETS))
    parser.add_argument("--root", type=Path, default=BENCHMARKS)
    parser.add_argument("--cache-dir", type=Path, default=None)
    args, extra = parser.parse_known_args(argv)  # anything else goes to training.distill
    run(args.out, [s for s in args.sets.split(",") if s], args.root, args.cache_dir, extra)
    print((args.out / "distill_lodo.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
