"""Shared index benchmark: a fleet of replica processes against one PostgreSQL + pgvector store.

    python benchmarks/shared_index_benchmark.py [--sizes 5000,50000] [--replicas 4] [--dsn DSN]

Without --dsn it starts its own PostgreSQL from the binaries of .ci/install-postgres
(``SK_TOOLFILTER_POSTGRES=DIR``) on loopback and stops it at the end. Per catalog size it runs, as
separate processes with the bundled local model: today's in-memory index (warm embedding cache,
its best case), the first replica (cold store: embeds and publishes), then the other replicas at
once (warm store). Each reports its start, embedding calls, memory and selection latency; then a
changed catalog is pushed and every replica's next selection is timed. Last, the database's own
nearest-neighbour search (SK's ``search`` on the tool table, exact and HNSW) against ranking in
process. Prints Markdown; wall-clock figures on this machine, not pass/fail tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).parent)]

from synthetic import synthetic_kernel, synthetic_queries, synthetic_tools  # noqa: E402

METHODS = ("semantic", "bm25", "hybrid")
QUERIES = 200


def rss_mib() -> float:
    """Resident memory now (VmRSS), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# --- one process ------------------------------------------------------------------------------
async def run_replica(args: argparse.Namespace) -> None:
    """One process: build the kernel, start the filter, time selections, report JSON lines."""
    from semantic_kernel.connectors.ai.embedding_generator_base import EmbeddingGeneratorBase

    from sk_toolfilter import ToolFilterConfig, ToolFilterManager
    from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator

    class Counting(EmbeddingGeneratorBase):
        """The local model, counting service calls; benchmark queries answered from a table
        filled before timing (so selection figures exclude the query embedding)."""

        ai_model_id: str = "all-MiniLM-L6-v2-int8"
        calls: int = 0
        texts: int = 0
        inner: object = None
        table: dict | None = None

        async def generate_embeddings(self, texts, settings=None, **kwargs):
            if self.table is not None and all(t in self.table for t in texts):
                return np.stack([self.table[t] for t in texts])
            self.calls += 1
            self.texts += len(texts)
            return await self.inner.generate_embeddings(texts)

    tools = synthetic_tools(args.tools)
    if args.changed:  # the release that the push publishes: some descriptions rewritten
        tools = [
            t.__class__(**{**t.__dict__, "description": t.description + " (updated)"}) if i % 500 == 0 else t
            for i, t in enumerate(tools)
        ]
    kernel = synthetic_kernel(tools)
    queries = synthetic_queries(tools, QUERIES)
    service = Counting(inner=LocalEmbeddingGenerator())
    await service.inner.generate_embeddings(["warm up"])
    index = {"store": "memory"}
    if args.role != "memory":
        index = {"store": "postgres", "connection_string": args.dsn, "table_prefix": args.prefix, "catalog": "bench"}
    config = ToolFilterConfig.from_mapping(
        {"index": index, "discovery": {"enabled": False}, "embedding": {"cache_dir": args.cache}}
    )
    started = time.perf_counter()
    manager = await ToolFilterManager.from_kernel(kernel, config, embedding_service=service)
    start = time.perf_counter() - started
    catalog_calls, catalog_texts = service.calls, service.texts
    after_start = rss_mib()
    vectors = await service.inner.generate_embeddings(queries)
    service.table = dict(zip(queries, vectors, strict=True))
    latency = {}
    for method in METHODS:
        manager.config = config.model_copy(update={"search_method": method})
        times = []
        for query in queries:
            t0 = time.perf_counter()
            await manager.filter_tools(query)
            times.append((time.perf_counter() - t0) * 1000)
        latency[method] = (statistics.median(times), float(np.percentile(times, 95)))
    store = manager.index_store
    report = {
        "role": args.role,
        "start_s": start,
        "embedding_calls": catalog_calls,
        "texts_embedded": catalog_texts,
        "loaded": store.stats.loaded if store else 0,
        "rss_mib": after_start,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "latency": latency,
        "version": store.stats.version if store else "",
    }
    print(json.dumps(report), flush=True)
    if args.role == "replica":
        sys.stdin.readline()  # "go": a new version was pushed
        manager.config = config
        t0 = time.perf_counter()
        await manager.filter_tools(queries[0])
        took = time.perf_counter() - t0
        print(json.dumps({"next_selection_s": took, "version": store.stats.version}), flush=True)
    await manager.aclose()


# --- the fleet --------------------------------------------------------------------------------
def spawn(role: str, args: argparse.Namespace, size: int, prefix: str, cache: str, changed: bool = False):
    command = [sys.executable, __file__, "--as", role, "--tools", str(size), "--dsn", args.dsn]
    command += ["--prefix", prefix, "--cache", cache] + (["--changed"] if changed else [])
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def result(process: subprocess.Popen) -> dict:
    line = process.stdout.readline()
    if not line:
        process.wait()
        raise SystemExit(f"a benchmark process failed (exit {process.returncode})")
    return json.loads(line)


def print_row(size: int, label: str, r: dict) -> None:
    lat = " | ".join(f"{r['latency'][m][0]:.2f} / {r['latency'][m][1]:.2f}" for m in METHODS)
    print(
        f"| {size:,} | {label} | {r['start_s']:.2f} s | {r['embedding_calls']} ({r['texts_embedded']:,} texts) "
        f"| {r['rss_mib']:.0f} MiB | {r['peak_mib']:.0f} MiB | {lat} |",
        flush=True,
    )


def fleet(args: argparse.Namespace, size: int) -> str:
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as cache:
        first = spawn("first", args, size, prefix, cache)
        first_result = result(first)
        first.stdin.close()
        first.wait()
        print_row(size, "first replica (cold store)", first_result)
        memory = spawn("memory", args, size, prefix, cache)
        print_row(size, "in-memory index (warm embedding cache)", result(memory))
        memory.wait()
        with tempfile.TemporaryDirectory() as empty_cache:
            replicas = []
            for number in range(2, args.replicas + 1):  # one after another: each start timed alone
                replicas.append(spawn("replica", args, size, prefix, empty_cache))
                print_row(size, f"replica {number} (warm store, no cache)", result(replicas[-1]))
            pushed = spawn("push", args, size, prefix, empty_cache, changed=True)
            push_result = result(pushed)
            pushed.wait()
            reached = []
            for process in replicas:
                process.stdin.write("go\n")
                process.stdin.flush()
                reached.append(result(process))
                process.wait()
        changed = push_result["texts_embedded"]
        seen = sum(r["version"] == push_result["version"] for r in reached)
        slowest = max(r["next_selection_s"] for r in reached)
        CHANGES.append(
            f"| {size:,} | {changed} tools changed: push {push_result['start_s']:.2f} s "
            f"| {seen}/{len(reached)} replicas on the new version at their next selection "
            f"| that selection {slowest * 1000:.0f} ms (slowest) |"
        )
    return prefix


CHANGES: list[str] = []


async def database_search(args: argparse.Namespace, size: int, prefix: str) -> None:
    """SK's vector search in PostgreSQL (exact, then HNSW) vs ranking in process, on the fleet's
    stored catalog (real MiniLM vectors) and real query embeddings."""
    from semantic_kernel.data.vector import DistanceFunction, IndexKind, VectorStoreCollectionDefinition

    from sk_toolfilter.config import IndexConfig
    from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator
    from sk_toolfilter.retrieval.scoring import CatalogVectors
    from sk_toolfilter.store.postgres import PostgresIndexStore
    from sk_toolfilter.store.shared_catalog import tool_record_definition

    config = IndexConfig(store="postgres", connection_string=args.dsn, timeout_seconds=300, table_prefix=prefix)
    store = await PostgresIndexStore.connect(config)
    catalog = store.catalog("bench", "all-MiniLM-L6-v2-int8")
    vectors = (await catalog.load(await catalog.current())).vectors
    dims = vectors.shape[1]
    texts = synthetic_queries(synthetic_tools(size), 50)
    queries = np.asarray(await LocalEmbeddingGenerator().generate_embeddings(texts), dtype=np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    rows = []
    for kind in (IndexKind.FLAT, IndexKind.HNSW):
        fields = list(tool_record_definition(dims).fields)
        fields[-1].index_kind = kind
        fields[-1].distance_function = DistanceFunction.COSINE_SIMILARITY
        table = f"search{uuid.uuid4().hex[:8]}"
        collection = await store._collection(table, VectorStoreCollectionDefinition(fields=fields))
        records = [
            {
                "id": f"k{i}",
                "full_name": f"P-t{i}",
                "plugin": f"P{i % 50}",
                "name": f"t{i}",
                "description": "",
                "parameters": "[]",
                "keywords": "[]",
                "content_hash": "",
                "model_id": "m",
                "dimensions": dims,
                "embedding": vectors[i],
            }
            for i in range(size)
        ]
        started = time.perf_counter()
        for s in range(0, size, 2000):
            await collection.upsert(records[s : s + 2000])
        write = time.perf_counter() - started
        allowed = [f"P{i}" for i in range(25)]  # half the catalog visible, as a policy would allow
        for label, filter_ in (("all tools", None), ("half allowed", f"lambda r: r.plugin in {allowed!r}")):
            times, hits = [], 0
            for query in queries:
                t0 = time.perf_counter()
                found = await collection.search(vector=query.tolist(), top=20, filter=filter_)
                keys = [r.record["id"] async for r in found.results]
                times.append((time.perf_counter() - t0) * 1000)
                scores = vectors @ query
                if filter_:
                    scores = np.where(np.arange(size) % 50 < 25, scores, -2)
                exact = {f"k{i}" for i in np.argsort(-scores)[:20]}
                hits += len(exact & set(keys))
            rows.append(
                f"| {size:,} | PostgreSQL, {'exact (no index)' if kind == IndexKind.FLAT else 'HNSW'} | {label} "
                f"| {statistics.median(times):.2f} | {hits / (20 * len(queries)):.3f} | {write:.1f} s |"
            )
        await collection.ensure_collection_deleted()
    in_process = CatalogVectors(vectors, "int8")
    times = []
    for query in queries:
        t0 = time.perf_counter()
        scores = in_process.scores(query)
        np.argpartition(-scores, 20)[:20]
        times.append((time.perf_counter() - t0) * 1000)
    rows.append(f"| {size:,} | in process (int8 vectors) | all tools | {statistics.median(times):.2f} | — | — |")
    await store.close()
    SEARCH.extend(rows)


SEARCH: list[str] = []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="5000,50000")
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--dsn", help="PostgreSQL with pgvector (default: start one from SK_TOOLFILTER_POSTGRES)")
    parser.add_argument("--as", dest="role", help=argparse.SUPPRESS)
    parser.add_argument("--tools", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    parser.add_argument("--changed", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        asyncio.run(run_replica(args))
        return
    server = None
    if not args.dsn:
        from tests.pg_server import PostgresServer

        install = os.environ.get("SK_TOOLFILTER_POSTGRES")
        if not install:
            raise SystemExit("give --dsn, or run .ci/install-postgres DIR and set SK_TOOLFILTER_POSTGRES=DIR")
        server = PostgresServer(install)
        server.start()
        args.dsn = server.dsn
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
        print("selection ms p50 / p95 per method exclude the query embedding (queries embedded before timing)\n")
        header = " | ".join(f"{m} p50 / p95 ms" for m in METHODS)
        print(f"| tools | process | start | embedding calls | memory after start | peak | {header} |")
        print("|---:|---|---:|---:|---:|---:|" + "---:|" * len(METHODS))
        prefixes = {size: fleet(args, size) for size in sizes}
        print("\n| tools | catalog change | reached | cost |\n|---:|---|---|---|")
        print("\n".join(CHANGES))
        for size in sizes:
            asyncio.run(database_search(args, size, prefixes[size]))
        print("\n| tools | semantic search | tools searched | p50 ms | recall@20 vs exact | write |")
        print("|---:|---|---|---:|---:|---:|")
        print("\n".join(SEARCH))
    finally:
        if server is not None:
            server.remove()


if __name__ == "__main__":
    main()
