"""Makes an int8 ONNX network compute the same numbers on every x86 CPU.

onnxruntime's dynamic quantization writes ``MatMulInteger`` nodes whose weights are int8 (u8 activations
× s8 weights). Without AVX-512 VNNI / AVX-VNNI, onnxruntime multiplies u8 × s8 with an instruction that
adds pairs of products into 16 bits and saturates; with VNNI it does not. The same request then gets
vectors up to 0.057 cosine apart on two x86 CPUs (measured: AMD EPYC with AVX-512 VNNI against an AVX2
CPU, and the same AVX2 numbers under ``qemu-x86_64 -cpu Haswell``).

The weights are shifted into uint8 with a zero point of 128: ``(w + 128) - 128`` is ``w``, so the network
is unchanged, and u8 × u8 products are exact on every instruction set. The vectors are those a VNNI CPU
computed before, now on every CPU (``-cpu Haswell`` and VNNI gave identical vectors, max |Δ| 0.0); the
cost is ~16 % fewer texts per second on a VNNI CPU (``benchmarks/tool_embedding_benchmark.py``).

    python -m training.exact_int8 sk_toolfilter/retrieval/models/*/model.onnx   # rewrites and updates model.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path


def exact_integer_products(path: Path) -> int:
    """Rewrite `path` in place with uint8 weights (zero point + 128) in every ``MatMulInteger``; returns
    how many nodes changed (0 for a network already exact)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    initializers = {i.name: i for i in model.graph.initializer}
    changed = 0
    for node in model.graph.node:
        if node.op_type != "MatMulInteger" or node.input[1] not in initializers:
            continue
        weights = initializers[node.input[1]]
        values = numpy_helper.to_array(weights)
        if values.dtype != np.int8:
            continue
        zero_name = node.input[3] if len(node.input) > 3 and node.input[3] else ""
        zero = numpy_helper.to_array(initializers[zero_name]) if zero_name else np.zeros((), np.int8)
        weights.CopyFrom(numpy_helper.from_array((values.astype(np.int16) + 128).astype(np.uint8), weights.name))
        shifted = numpy_helper.from_array((zero.astype(np.int16) + 128).astype(np.uint8), zero_name or "")
        if zero_name:
            initializers[zero_name].CopyFrom(shifted)
        else:  # no zero point: one of 128 (scalar, as the operator allows)
            shifted.name = f"{node.input[1]}_zero_point_u8"
            model.graph.initializer.append(shifted)
            while len(node.input) < 4:
                node.input.append("")
            node.input[3] = shifted.name
        changed += 1
    if changed:
        onnx.save(model, str(path))
    return changed


def update_manifest(model_file: Path) -> None:
    """Write the model file's new sha256 into the ``model.json`` beside it."""
    manifest = model_file.parent / "model.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["files"]["model"]["sha256"] = hashlib.sha256(model_file.read_bytes()).hexdigest()
    manifest.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", type=Path, help="model.onnx files (their model.json is updated)")
    for path in parser.parse_args(argv).models:
        changed = exact_integer_products(path)
        if changed:
            update_manifest(path)
        print(f"{path}: {changed} MatMulInteger node(s) made exact")


if __name__ == "__main__":
    main()
