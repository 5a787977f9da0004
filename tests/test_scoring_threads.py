"""Rankings do not depend on how many threads BLAS may use (the scoring kernel bypasses its pool)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import asyncio, json, sys
import numpy as np
sys.path.insert(0, "benchmarks")
from synthetic import synthetic_queries, synthetic_tools
from sk_toolfilter import ToolFilterConfig, ToolIndex
from sk_toolfilter.retrieval.search import rank_tools

async def main():
    tools = synthetic_tools(3000)
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((len(tools), 384)).astype(np.float32)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    indexes = [ToolIndex(tools, embeddings=unit, precision=p) for p in ("float32", "int8")]
    out = {}
    for query in synthetic_queries(tools, 40):
        q = rng.standard_normal(384).astype(np.float32)
        for index in indexes:
            scores = index.cosine_scores(q / np.linalg.norm(q))
            key = index.precision + ":" + query
            out[key] = [int(j) for j in np.argsort(-scores, kind="stable")[:10]] + [float(scores.max())]
    print(json.dumps(out))

asyncio.run(main())
"""


def rankings(threads: int) -> dict:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout)


def test_semantic_scores_and_rankings_are_identical_with_one_and_many_blas_threads():
    """For both precisions (float32 and int8)."""
    assert rankings(1) == rankings(8)
