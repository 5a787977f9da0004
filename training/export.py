"""Export the fine-tuned query encoder to int8 ONNX in the layout the runtime loads (``model.json`` manifest).

The graph takes ``input_ids``, ``attention_mask`` and ``token_type_ids`` and returns
``last_hidden_state``, like the previous default; pooling and normalization stay in the runtime.
Weights are quantized to int8 per channel (onnxruntime dynamic quantization).

    python -m training.export --hf training/out/model/hf --out sk_toolfilter/retrieval/models/<id> --id <id>
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from transformers import AutoModel, AutoTokenizer

from sk_toolfilter.retrieval.local_models import TOOL_SIDE_MODEL_ID, sha256_of
from training.exact_int8 import exact_integer_products

TOKENIZER = (
    Path(__file__).resolve().parent.parent
    / "sk_toolfilter"
    / "retrieval"
    / "models"
    / "all-MiniLM-L6-v2"
    / "tokenizer.json"
)


INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def export_int8(model: torch.nn.Module, sample: tuple, output: str, output_axes: dict[int, str], path: Path) -> None:
    """`model` (taking ``input_ids``, ``attention_mask``, ``token_type_ids``) as an int8 ONNX file: exported
    with opset 17 (batch and sequence dynamic), then onnxruntime's dynamic quantization per channel, its
    integer products made exact on every CPU (:func:`training.exact_int8.exact_integer_products`)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "model-fp32.onnx"
        torch.onnx.export(
            model,
            sample,
            str(fp32),
            input_names=list(INPUTS),
            output_names=[output],
            dynamic_axes={name: {0: "batch", 1: "sequence"} for name in INPUTS} | {output: output_axes},
            opset_version=17,
            dynamo=False,
        )
        quantize_dynamic(str(fp32), str(path), weight_type=QuantType.QInt8, per_channel=True)
    exact_integer_products(path)  # the same numbers on every x86 CPU (training/exact_int8.py)


def export(
    hf_dir: Path, out: Path, model_id: str, *, description: str = "", documents: str | None = TOOL_SIDE_MODEL_ID
) -> Path:
    """Write ``model.onnx`` (int8), ``tokenizer.json`` and ``model.json`` into `out`; returns the manifest path.

    `documents` names the model that embeds the tools (a shipped id or a model folder); ``None`` makes
    the export embed its own documents (a trained tool side, ``train.py --tool-layers``)."""

    model = AutoModel.from_pretrained(str(hf_dir)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(hf_dir))
    out.mkdir(parents=True, exist_ok=True)
    sample = tokenizer(
        ["an example query", "a longer example tool description text"], padding=True, return_tensors="pt"
    )
    export_int8(
        model,
        (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]),
        "last_hidden_state",
        {0: "batch", 1: "sequence"},
        out / "model.onnx",
    )
    # The tokenizer is the base model's, unchanged by training: the vendored file is shared.
    shutil.copyfile(TOKENIZER, out / "tokenizer.json")
    manifest = {
        "id": model_id,
        "description": description,
        # Asymmetric: this encoder embeds requests; by default the general model's weights (as dynamic
        # int8) embed tools.
        **({"documents": documents} if documents else {}),
        "dimensions": int(model.config.hidden_size),
        "pooling": "mean",
        "max_length": 256,
        "files": {
            "model": {"path": "model.onnx", "sha256": sha256_of(out / "model.onnx")},
            "tokenizer": {"path": "tokenizer.json", "sha256": sha256_of(out / "tokenizer.json")},
        },
    }
    manifest.update(carried_blends(out / "model.json"))
    (out / "model.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return out / "model.json"


CHOSEN_BLENDS = ("hybrid_weights", "loop_hybrid_weights")
"""Manifest entries chosen by cross-validation for a model (``training.fit_fusion``, the conversation folds)."""


def carried_blends(previous: Path) -> dict[str, object]:
    """The blends of the manifest an export replaces, kept (and said so): a rebuild must not drop the
    turn blend the folds chose; re-run the folds or ``fit_fusion`` to refit them for the new weights."""
    if not previous.is_file():
        return {}
    try:
        old = json.loads(previous.read_text())
    except (OSError, ValueError):
        return {}
    kept = {key: old[key] for key in CHOSEN_BLENDS if isinstance(old, dict) and key in old}
    if kept:
        print(
            f"kept {', '.join(f'{k}={v}' for k, v in kept.items())} from the manifest this export replaces "
            "(chosen for the previous weights: re-run the conversation folds or training.fit_fusion to refit)",
            file=sys.stderr,
        )
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hf", type=Path, required=True, help="the fine-tuned model (save_pretrained folder)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--id", required=True, help="the model id (embedding caches are keyed by it)")
    args = parser.parse_args(argv)
    manifest = export(args.hf, args.out, args.id)
    size = (args.out / "model.onnx").stat().st_size / 1e6
    print(f"{manifest} ({size:.1f} MB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
