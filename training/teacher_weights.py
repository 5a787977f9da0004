"""The shipped request encoder's weights back in PyTorch, read from its int8 ONNX file.

Only the int8 export of ``minilm-l6-tools-v1`` ships (its fp32 weights were a training by-product).
A student starts closer to its teacher from the teacher's own layers than from the general
model's, so this rebuilds them: every quantized matrix is dequantized (``(q - zero_point) × scale``
per output column, exactly what onnxruntime computes with) and every float tensor (biases, layer
norms) is copied, by the names the export kept; the embeddings, which stayed frozen in training,
come dequantized too. ``check`` reports how close the rebuilt fp32 network is to the int8 file.

    python -m training.teacher_weights --out training/out/teacher-hf
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import torch

from training.train import base_model_dir

SHIPPED = Path(__file__).resolve().parent.parent / "sk_toolfilter" / "retrieval" / "models" / "minilm-l6-tools-v1"
_MATMUL = re.compile(r"^/(?P<module>encoder/layer\.\d+/.+)/MatMul_quant$")


def _dequantized(initializers: dict[str, np.ndarray], name: str) -> np.ndarray:
    q = initializers[f"{name}_quantized"].astype(np.float32)
    zero = initializers[f"{name}_zero_point"].astype(np.float32)
    scale = initializers[f"{name}_scale"].astype(np.float32)
    axis = 1 if q.ndim == 2 and scale.ndim == 1 and scale.shape[0] == q.shape[1] else 0
    shape = (1, -1) if axis == 1 else (-1, 1)
    return (q - zero.reshape(shape)) * scale.reshape(shape)


def teacher_model(onnx_file: Path = SHIPPED / "model.onnx"):
    """A transformers ``BertModel`` holding the int8 teacher's weights, dequantized."""
    import onnx
    from onnx import numpy_helper
    from transformers import AutoModel

    graph = onnx.load(str(onnx_file)).graph
    initializers = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    model = AutoModel.from_pretrained(str(base_model_dir()))
    state = model.state_dict()
    updated: dict[str, torch.Tensor] = {}
    for key in state:
        if key in initializers:  # biases and layer norms stay float in the export
            updated[key] = torch.from_numpy(initializers[key].copy())
        elif f"{key}_quantized" in initializers:  # embeddings (quantized under their own names)
            updated[key] = torch.from_numpy(_dequantized(initializers, key))
    for node in graph.node:
        match = _MATMUL.match(node.name) if node.op_type == "MatMulInteger" else None
        if match is None:
            continue
        key = match["module"].replace("/", ".") + ".weight"
        weight = node.input[1].removesuffix("_quantized")
        updated[key] = torch.from_numpy(_dequantized(initializers, weight).T.copy())  # MatMul B is W^T
    missing = [k for k in state if k not in updated and not k.startswith("pooler.")]
    if missing:
        raise ValueError(f"{onnx_file}: no weights found for {missing[:5]}")
    model.load_state_dict({**state, **updated})
    return model.eval()


def check(model, texts: list[str]) -> float:
    """The lowest cosine between the rebuilt network and the int8 file over `texts` (mean pooled)."""
    from transformers import AutoTokenizer

    from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator
    from training.train import encode

    tokenizer = AutoTokenizer.from_pretrained(str(base_model_dir()))
    with torch.no_grad():
        rebuilt = encode(model, tokenizer, texts, 256).numpy()
    shipped = LocalEmbeddingGenerator().embed_queries_sync(texts)
    return float(np.min(np.sum(rebuilt * shipped, axis=1)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    model = teacher_model()
    texts = ["check the price of NVDA", "send an email to bob about the meeting", "what's the weather in Paris"]
    print(f"lowest cosine to the int8 teacher: {check(model, texts):.4f}", file=sys.stderr)
    model.save_pretrained(str(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
