"""Cross-validation by conversation on bfcl_multiturn (dev): the loop figures a new conversation gets.

The shipped model has seen every dev conversation's requests, so the loop benchmark on dev says
little about conversations nobody trained on. Here the dev conversations are split in two folds
(by entry number, so a base conversation and its long_context twin stay together). For each fold:

1. ``train``: a model trained on every pair except the fold's own turn requests (pseudo-queries
   from tool texts stay: they hold no conversation);
2. ``loop``: every candidate loop configuration (:data:`CANDIDATES`) replayed on the *other* fold
   with that model; the best (step recall, then fewer tools) is chosen there and reported on this
   fold — fit on one part, report the other.

Replays start every conversation with no co-usage (``--co-usage conversation``, the default): with
co-usage shared across a fold's conversations, a conversation learned from the others — its
long_context twin repeats its user turns — and the estimate (0.952) overstated unseen conversations
(held-out half: 0.893). ``--co-usage agent`` gives the shared figure for comparison.

    python -m training.experiments.conversation_folds --pairs training/out/pairs.jsonl --out training/out/folds
        [--stage loop] [--co-usage conversation|agent]

Writes ``<out>/folds-<co-usage>.json`` and ``<out>/folds-<co-usage>.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

from sk_toolfilter.measure.conversations import CO_USAGE_SCOPES, CoUsageScope
from training.sources import BENCHMARKS

FOLDS = 2
# Loop configurations compared (each an agent file's tool_filtering block; "default" = shipped defaults).
CANDIDATES: dict[str, dict[str, Any]] = {
    "default": {},
    "no co-usage": {"agent_loop": {"co_usage": False}},
    "no lookups": {"agent_loop": {"lookup_tools": False}},
    "no request parts": {"agent_loop": {"split_request": False}},
    "no previous-turn tools": {"agent_loop": {"previous_turn_tools": False}},
    "budget 6": {"agent_loop": {"max_tools": 6}},
    "top_k 3": {"top_k": 3},
    "blend semantic 0.8": {"method_weights": {"semantic": 0.8, "bm25": 0.2}},
    "blend semantic 0.9": {"method_weights": {"semantic": 0.9, "bm25": 0.1}},
    "blend semantic 0.8, no request parts": {
        "method_weights": {"semantic": 0.8, "bm25": 0.2},
        "agent_loop": {"split_request": False},
    },
}


def fold_of(entry: str) -> int:
    """The fold of a conversation: base_N and long_context_N share N, so they share a fold."""
    match = re.search(r"(\d+)$", entry)
    key = match.group(1) if match else entry
    return int(hashlib.sha1(f"sk-toolfilter-fold:{key}".encode()).hexdigest(), 16) % FOLDS


def requests_by_fold(steps_file: Path) -> dict[str, set[int]]:
    """Each turn request's text → the folds of the conversations it occurs in."""
    folds: dict[str, set[int]] = {}
    for line in steps_file.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        for message in row["messages"]:
            if message.get("role") == "user":
                folds.setdefault(str(message["content"]), set()).add(fold_of(row["entry"]))
    return folds


def train_folds(pairs: Path, out: Path, root: Path, epochs: float, cache_dir: Path | None) -> None:
    from training.leave_one_out import train_and_export

    requests = requests_by_fold(root / "bfcl_multiturn" / "dev.jsonl")
    lines = [line for line in pairs.read_text(encoding="utf-8").splitlines() if line.strip()]
    for fold in range(FOLDS):
        folder = out / f"fold{fold}"
        if (folder / "onnx" / "model.json").exists():
            print(f"== fold {fold}: model exists, kept", file=sys.stderr, flush=True)
            continue
        folder.mkdir(parents=True, exist_ok=True)
        kept = []
        for line in lines:
            pair = json.loads(line)
            seen_in = requests.get(pair["query"], set())
            if pair["source"] == "bfcl_multiturn" and pair["kind"] == "query" and fold in seen_in:
                continue
            kept.append(line)
        (folder / "pairs.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
        print(f"== fold {fold}: {len(kept)} of {len(lines)} pairs", file=sys.stderr, flush=True)
        train_and_export(folder, epochs, root, cache_dir, f"fold{fold}")


def _replay(root: Path, model: str, overrides: dict[str, Any], fold: int, scope: CoUsageScope) -> dict[str, float]:
    from sk_toolfilter.measure.conversations import replay_catalog_conversations

    block = {**overrides, "embedding": {"model": model}}
    keep = lambda conversation: fold_of(conversation) == fold  # noqa: E731
    folder = root / "bfcl_multiturn"
    return asyncio.run(replay_catalog_conversations(folder, block, keep=keep, co_usage_scope=scope))["all"]


def _key(summary: dict[str, float]) -> tuple[float, float]:
    return (round(summary["step_recall"], 4), -summary["mean_tools"])


def loop_folds(out: Path, root: Path, general: str, shipped: str, scope: CoUsageScope) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for fold in range(FOLDS):
        model = str(out / f"fold{fold}" / "onnx")
        other = (fold + 1) % FOLDS
        fitted = {name: _replay(root, model, cfg, other, scope) for name, cfg in CANDIDATES.items()}
        chosen = max(fitted, key=lambda name: _key(fitted[name]))
        print(f"== fold {fold}: chosen on fold {other}: {chosen}", file=sys.stderr, flush=True)
        results[f"fold{fold}"] = {
            "chosen": chosen,
            "co_usage": scope,
            "fit_on_other_fold": fitted,
            "held_out": _replay(root, model, CANDIDATES[chosen], fold, scope),
            "held_out_default": _replay(root, model, {}, fold, scope),
            "general_model_default": _replay(root, general, {}, fold, scope),
            "shipped_model_default (has seen it)": _replay(root, shipped, {}, fold, scope),
        }
        (out / f"folds-{scope}.json").write_text(json.dumps(results, indent=2) + "\n")
    return results


def _cells(s: dict[str, float]) -> str:
    return (
        f"{s['step_recall']:.3f} | {s['first_step_recall']:.3f} | {s['later_step_recall']:.3f} "
        f"| {s['turn_complete']:.3f} | {s['mean_tools']:.2f}"
    )


def write_table(out: Path, results: dict[str, Any], scope: CoUsageScope) -> str:
    rows = [
        "| fold | row | step recall | first step | later steps | turn complete | tools/request |",
        "|---|---|---|---|---|---|---|",
    ]
    for fold, r in results.items():
        for label in ("held_out", "held_out_default", "general_model_default", "shipped_model_default (has seen it)"):
            name = f"chosen ({r['chosen']})" if label == "held_out" else label
            rows.append(f"| {fold} | {name} | {_cells(r[label])} |")
        rows += [f"| {fold} | fit on the other fold: {n} | {_cells(s)} |" for n, s in r["fit_on_other_fold"].items()]
    text = f"bfcl_multiturn dev, cross-validated by conversation (co-usage: {scope})\n\n" + "\n".join(rows) + "\n"
    (out / f"folds-{scope}.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--stage", choices=["train", "loop", "all"], default="all")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--root", type=Path, default=BENCHMARKS)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--general", default="all-MiniLM-L6-v2-int8")
    parser.add_argument("--shipped", default="minilm-l6-tools-v1")
    parser.add_argument(
        "--co-usage",
        choices=CO_USAGE_SCOPES,
        default="conversation",
        help="start every conversation with no co-usage (leak-free), or share it across the fold's conversations",
    )
    args = parser.parse_args(argv)
    if args.stage in ("train", "all"):
        train_folds(args.pairs, args.out, args.root, args.epochs, args.cache_dir)
    if args.stage in ("loop", "all"):
        results = loop_folds(args.out, args.root, args.general, args.shipped, args.co_usage)
        print(write_table(args.out, results, args.co_usage))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
