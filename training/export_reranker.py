"""Export a trained cross-encoder (``training.train_reranker``) to int8 ONNX in the layout the runtime loads.

The graph takes ``input_ids``, ``attention_mask`` and ``token_type_ids`` of (request, tool) pairs and
returns ``scores`` (one per pair); weights are quantized to int8 per channel (onnxruntime dynamic
quantization). ``model.json`` says ``kind: cross-encoder``.

    python -m training.export_reranker --run training/out/rerank/all \\
        --out sk_toolfilter/retrieval/models/minilm-l2-rerank-v1
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import torch

from sk_toolfilter.retrieval.local_models import sha256_of
from sk_toolfilter.retrieval.rerank import RERANK_MAX_TOKENS, RERANKER_MODEL_ID
from training.export import TOKENIZER
from training.train import base_model_dir
from training.train_reranker import CrossEncoder


def export(run: Path, out: Path, model_id: str = RERANKER_MODEL_ID, description: str = "") -> Path:
    """Write ``model.onnx`` (int8), ``tokenizer.json`` and ``model.json`` into `out`; returns the manifest."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    saved = torch.load(run / "reranker.pt", map_location="cpu")
    model = CrossEncoder(base_model_dir(), int(saved["layers"]))
    model.load_state_dict(saved["state"])
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    ids = torch.tensor([[101, 2023, 102, 2178, 3793, 102], [101, 2023, 102, 2178, 102, 0]])
    mask = (ids > 0).long()
    types = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 0]])
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "model-fp32.onnx"
        torch.onnx.export(
            model,
            (ids, mask, types),
            str(fp32),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["scores"],
            dynamic_axes={n: {0: "batch", 1: "sequence"} for n in ("input_ids", "attention_mask", "token_type_ids")}
            | {"scores": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
        quantize_dynamic(str(fp32), str(out / "model.onnx"), weight_type=QuantType.QInt8, per_channel=True)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="a train_reranker --out folder")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--id", default=RERANKER_MODEL_ID)
    args = parser.parse_args(argv)
    print(export(args.run, args.out, args.id))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
