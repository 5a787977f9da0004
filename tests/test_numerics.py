"""The shipped int8 networks compute the same numbers on every x86 CPU.

onnxruntime multiplies u8 × s8 with a saturating instruction where a CPU has no VNNI, and exactly where
it has: the same request got vectors up to 0.057 cosine apart on two CPUs. The shipped networks multiply
u8 × u8 (``training/exact_int8.py``), exact on every instruction set; this is checked on the graph, and
by running the encoders under an emulated AVX2 CPU (``qemu-x86_64 -cpu Haswell``, installed by .ci/run)
beside this machine's own.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from sk_toolfilter.retrieval.local_models import MODELS_DIR
from tests.conftest import require_server

ENCODERS = ["minilm-l6-tools-v1", "minilm-l2-tools-v1", "all-MiniLM-L6-v2-dynamic-int8"]

EMBED = """
import sys
import numpy as np
from sk_toolfilter.retrieval.encoders import OnnxEncoder
from sk_toolfilter.retrieval.local_models import resolve_local_model
from sk_toolfilter.retrieval.numerics import PROBE_TEXTS

texts = [*PROBE_TEXTS, "Set a new alarm with a specified time and optional custom name.", "send bob the Q3 report"]
vectors = {name: OnnxEncoder(resolve_local_model(name), threads=1).embed(texts) for name in sys.argv[2:]}
np.savez(sys.argv[1], **vectors)
"""


def test_every_shipped_int8_network_multiplies_u8_by_u8():
    fixtures = Path(__file__).resolve().parent / "fixtures"
    networks = sorted([*MODELS_DIR.glob("*/model.onnx"), *fixtures.glob("*/model.onnx")])
    # The test reranker is exported as a trained one is (training.export.export_int8).
    assert {p.parent.name for p in networks} >= {*ENCODERS, "tiny_reranker"}
    for path in networks:
        model = onnx.load(str(path))
        initializers = {i.name: i for i in model.graph.initializer}
        weights = [initializers[n.input[1]] for n in model.graph.node if n.op_type == "MatMulInteger"]
        assert weights, path
        assert all(w.data_type == onnx.TensorProto.UINT8 for w in weights), path  # never int8 (saturates)


def test_the_encoders_give_an_emulated_avx2_cpu_the_vectors_they_give_this_one(tmp_path):
    qemu = require_server(
        os.environ.get("SK_TOOLFILTER_QEMU"),
        "QEMU user mode",
        "run .ci/install-qemu DIR and set SK_TOOLFILTER_QEMU=$(command -v qemu-x86_64)",
    )
    script = tmp_path / "embed.py"
    script.write_text(EMBED)
    here, avx2 = tmp_path / "here.npz", tmp_path / "avx2.npz"
    for command in ([sys.executable], [qemu, "-cpu", "Haswell", sys.executable]):
        out = here if len(command) == 1 else avx2
        done = subprocess.run([*command, str(script), str(out), *ENCODERS], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    with np.load(here) as a, np.load(avx2) as b:
        for name in ENCODERS:
            # The same integer products; only the float steps around them may round differently.
            assert np.min(np.sum(a[name] * b[name], axis=1)) > 0.9999, name


@pytest.mark.parametrize("name", ENCODERS)
def test_an_int8_network_of_the_old_kind_is_made_exact_without_changing_it(name, tmp_path):
    # training/exact_int8.py on a network with int8 weights: uint8 weights after, the same vectors.
    from training.exact_int8 import exact_integer_products

    model = onnx.load(str(MODELS_DIR / name / "model.onnx"))
    initializers = {i.name: i for i in model.graph.initializer}
    for node in model.graph.node:  # back to int8 weights, as onnxruntime's quantizer writes them
        if node.op_type == "MatMulInteger":
            weights = initializers[node.input[1]]
            shifted = onnx.numpy_helper.to_array(weights).astype(np.int16) - 128
            weights.CopyFrom(onnx.numpy_helper.from_array(shifted.astype(np.int8), weights.name))
            zero = initializers[node.input[3]]
            zero_shifted = onnx.numpy_helper.to_array(zero).astype(np.int16) - 128
            zero.CopyFrom(onnx.numpy_helper.from_array(zero_shifted.astype(np.int8), zero.name))
    old = tmp_path / "model.onnx"
    onnx.save(model, str(old))
    assert exact_integer_products(old) > 0 and exact_integer_products(old) == 0  # once; then nothing to do
    assert old.read_bytes() == (MODELS_DIR / name / "model.onnx").read_bytes()
