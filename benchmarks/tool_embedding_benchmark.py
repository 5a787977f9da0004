"""Tool-side embedding throughput: the library's encoder against a plain onnxruntime loop, same run.

    python benchmarks/tool_embedding_benchmark.py [--texts 600] [--model all-MiniLM-L6-v2-dynamic-int8]

The texts are what the index embeds for real catalog tools (``ToolMetadata.embedding_text``, seal_tools
dev catalog, or the bundled BFCL catalog). The plain loop is what a user would write first: batches of
32 in catalog order, each padded to its longest text, onnxruntime's default session. Then the
library's ``OnnxEncoder`` per texts-per-run setting (1, the default: each text alone; more: texts of
similar length together) and thread count. Prints texts per
second, the ratio to the plain loop, and the largest vector difference from the plain loop's vectors
(1 - cosine). First, the tool side's export against the general model's own file (the same weights):
texts per second of each through the library's encoder and of a plain loop on the general file, and how
far the export's vectors are from the general file's. Prints Markdown; not a test.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.retrieval.encoders import OnnxEncoder
from sk_toolfilter.retrieval.index import embedding_texts
from sk_toolfilter.retrieval.local_models import GENERAL_MODEL_ID, TOOL_SIDE_MODEL_ID, resolve_local_model

ROOT = Path(__file__).resolve().parents[1]


def tool_texts(data: Path, n: int) -> list[str]:
    catalog = data / "seal_tools" / "tools.jsonl"
    if not catalog.exists():
        catalog = ROOT / "examples" / "data" / "bfcl" / "tools.jsonl"
    return embedding_texts([t for t, _ in load_catalog(catalog)])[:n]


def plain_loop(model_file: Path, tokenizer_file: Path, texts: list[str]) -> tuple[float, np.ndarray]:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    tokenizer.enable_truncation(max_length=256)
    session = ort.InferenceSession(str(model_file), providers=["CPUExecutionProvider"])
    started = time.perf_counter()
    rows = []
    for start in range(0, len(texts), 32):
        encodings = tokenizer.encode_batch(texts[start : start + 32])
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        rows.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
    return len(texts) / (time.perf_counter() - started), np.concatenate(rows)


def timed(encoder: OnnxEncoder, texts: list[str]) -> tuple[float, np.ndarray]:
    encoder.embed(texts[:8])  # load
    started = time.perf_counter()
    vectors = encoder.embed(texts)
    return len(texts) / (time.perf_counter() - started), vectors


def compare_exports(texts: list[str]) -> None:
    """The tool side's dynamic-int8 export against the general file it was made from."""
    general, export = resolve_local_model(GENERAL_MODEL_ID), resolve_local_model(TOOL_SIDE_MODEL_ID)
    plain_rate, _ = plain_loop(general.model_file, general.tokenizer_file, texts)
    general_rate, general_vectors = timed(OnnxEncoder(general), texts)
    export_rate, export_vectors = timed(OnnxEncoder(export), texts)
    cosines = np.sum(general_vectors * export_vectors, axis=1)
    print(f"{len(texts)} tool texts; plain onnxruntime loop on the general file: {plain_rate:.1f} texts/s\n")
    print("| file (library encoder) | texts/s | ratio to the plain loop | cosine to the general file: min / p50 |")
    print("|---|---:|---:|---|")
    print(f"| {GENERAL_MODEL_ID} | {general_rate:.1f} | {general_rate / plain_rate:.2f}x | 1 / 1 |")
    print(
        f"| {TOOL_SIDE_MODEL_ID} (the tool side) | {export_rate:.1f} | {export_rate / plain_rate:.2f}x "
        f"| {cosines.min():.4f} / {np.median(cosines):.4f} |\n",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=600)
    parser.add_argument("--model", default=TOOL_SIDE_MODEL_ID)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "benchmarks")
    args = parser.parse_args()
    files = resolve_local_model(args.model)
    texts = tool_texts(args.data, args.texts)
    compare_exports(texts)
    plain_rate, plain_vectors = plain_loop(files.model_file, files.tokenizer_file, texts)
    print(f"{len(texts)} tool texts, model {files.id}; plain onnxruntime loop: {plain_rate:.1f} texts/s\n")
    print("| encoder | batch | threads | texts/s | ratio to the plain loop | max 1 - cosine to the plain loop |")
    print("|---|---:|---:|---:|---:|---:|")
    for threads in (0, 1, 2):
        for batch in (1, 8, 16, 32, 64):
            rate, vectors = timed(OnnxEncoder(files, batch_size=batch, threads=threads), texts)
            drift = float(np.max(1 - np.sum(vectors * plain_vectors, axis=1)))
            label = "default" if threads == 0 else str(threads)
            batch_label = f"{batch} (default)" if batch == 1 and threads == 0 else str(batch)
            ratio = rate / plain_rate
            print(f"| OnnxEncoder | {batch_label} | {label} | {rate:.1f} | {ratio:.2f}x | {drift:.1e} |", flush=True)


if __name__ == "__main__":
    main()
