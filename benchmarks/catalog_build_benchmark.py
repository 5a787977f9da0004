"""Building a real catalog's vectors: tools per second and peak memory, against the encoder's best setting.

    python benchmarks/catalog_build_benchmark.py [--data ../shared/benchmarks] [--sweep-texts 1000]

Real catalogs only: the bundled BFCL catalog (1,287 tools), the seal_tools dev catalog (4,076 tools)
and 5,000 tools of both (seal_tools first). Each is measured in a fresh process: the catalog is
loaded and the offline model warmed on one text (the process's baseline), then ``ToolIndex.build``
embeds every tool with the default service and no cache — what a cold agent does — and the process's
peak RSS is read. Then the library's encoder (``OnnxEncoder``) runs a random sample of the same tool
texts at several texts-per-run settings (1, 8, 32) and the best rate is set against the build's: the
build's overhead over the encoder's floor. Prints Markdown; not a test (timings belong here).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = (1, 8, 32)
"""Texts per ONNX run tried on the sample (1 is the default)."""


def catalogs(data: Path) -> dict[str, list[tuple[Path, int]]]:
    """Each measured catalog: its files and how many tools to take of each (0: all)."""
    bfcl = ROOT / "examples" / "data" / "bfcl" / "tools.jsonl"
    seal = data / "seal_tools" / "tools.jsonl"
    chosen = {"bfcl (bundled)": [(bfcl, 0)]}
    if seal.exists():
        chosen["seal_tools (dev)"] = [(seal, 0)]
        chosen["seal_tools + bfcl, 5,000"] = [(seal, 0), (bfcl, 0)]
    return chosen


def load_tools(parts: list[tuple[Path, int]], limit: int | None) -> list:
    from sk_toolfilter.agents.catalog import load_catalog

    tools, seen = [], set()
    for path, take in parts:
        loaded = [t for t, _ in load_catalog(path, default_plugin=path.parent.name)]
        for tool in loaded[: take or None]:
            if tool.full_name not in seen:
                seen.add(tool.full_name)
                tools.append(tool)
    return tools[:limit]


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(spec: str) -> dict:
    """In a fresh process: build one catalog cold, then sweep the encoder on a sample of its texts."""
    import asyncio

    import numpy as np

    from sk_toolfilter import ToolFilterConfig, ToolIndex
    from sk_toolfilter.retrieval.embeddings import create_embedding_service
    from sk_toolfilter.retrieval.encoders import OnnxEncoder
    from sk_toolfilter.retrieval.index import embedding_texts
    from sk_toolfilter.retrieval.local_models import TOOL_SIDE_MODEL_ID, resolve_local_model

    job = json.loads(spec)
    tools = load_tools([(Path(p), n) for p, n in job["parts"]], job["limit"])
    service = create_embedding_service(ToolFilterConfig().embedding)
    service.embed_sync(["warm up"])  # type: ignore[union-attr]  # the model's files loaded: the baseline
    baseline = peak_mb()
    started = time.perf_counter()
    asyncio.run(ToolIndex.build(tools, service))
    took = time.perf_counter() - started
    build_peak = peak_mb()
    texts = embedding_texts(tools)
    sample = random.Random(0).sample(texts, min(job["sweep"], len(texts)))
    rates = {}
    for batch in SETTINGS:
        encoder = OnnxEncoder(resolve_local_model(TOOL_SIDE_MODEL_ID), batch_size=batch)
        encoder.embed(sample[:4])
        began = time.perf_counter()
        vectors = encoder.embed(sample)
        rates[batch] = len(sample) / (time.perf_counter() - began)
        assert np.isfinite(vectors).all()
    return {
        "tools": len(tools),
        "seconds": took,
        "rate": len(tools) / took,
        "baseline_mb": baseline,
        "peak_mb": build_peak,
        "sweep": rates,
        "sample": len(sample),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "benchmarks")
    parser.add_argument("--sweep-texts", type=int, default=1000, help="sample of tool texts for the encoder sweep")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # internal: one catalog in this process
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    print("Cold builds of real catalogs (default service, no cache; one fresh process each, this machine)\n")
    print(
        "| catalog | tools | build | tools/s | peak RSS above the process | encoder on a sample: texts/s at "
        + " / ".join(f"{b}" for b in SETTINGS)
        + " per run | best / build |"
    )
    print("|---|---:|---:|---:|---:|---|---:|")
    for label, parts in catalogs(args.data).items():
        job = {"parts": [(str(p), n) for p, n in parts], "limit": 5000, "sweep": args.sweep_texts}
        done = subprocess.run(
            [sys.executable, __file__, "--measure", json.dumps(job)], capture_output=True, text=True, check=True
        )
        r = json.loads(done.stdout.strip().splitlines()[-1])
        sweep = {int(k): v for k, v in r["sweep"].items()}
        best = max(sweep.values())
        print(
            f"| {label} | {r['tools']:,} | {r['seconds']:.1f} s | {r['rate']:.1f} | "
            f"{(r['peak_mb'] - r['baseline_mb']) / 1024:.2f} GB (of {r['peak_mb'] / 1024:.2f}) | "
            + " / ".join(f"{sweep[b]:.1f}" for b in SETTINGS)
            + f" ({r['sample']} texts) | {best / r['rate']:.2f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
