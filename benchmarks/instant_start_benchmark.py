"""Instant start: how soon a cold agent answers, and how soon it ranks with vectors.

    python benchmarks/instant_start_benchmark.py [--catalog real|synthetic] [--tools 5000] [--queries 20]

`--catalog real` (the default): an agent file whose tools are `--tools` real function schemas — the
seal_tools dev catalog first (``../shared/benchmarks``), then the bundled BFCL catalog — opened the way
``sk-toolfilter`` opens it (definition-only functions with their JSON schemas), asked the catalog's own
dev requests. `--catalog synthetic`: short generated tools in a kernel. Both behind the offline model
with an empty embedding cache: once with ``embedding.background_above: null`` (the agent waits for every
vector before its first answer) and once with the default (it answers with BM25 at once and embeds in
the background). Prints, for each: seconds from opening the agent to the first answer, to the first
hybrid answer, and the first answers' latency while the build runs, plus the ratio of the two
first-answer times measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from synthetic import synthetic_kernel, synthetic_queries, synthetic_tools

from sk_toolfilter import ToolFilterConfig, ToolFilterManager

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "benchmarks"


def real_catalog(folder: Path, tools: int, queries: int, embedding: dict[str, Any]) -> tuple[Path, list[str]]:
    """An agent file in `folder` whose catalog holds `tools` real schemas, and dev requests for it."""
    sources = [SHARED / "seal_tools", ROOT / "examples" / "data" / "bfcl"]
    records, seen, requests = [], set(), []
    for source in sources:
        if not (source / "tools.jsonl").exists():
            continue
        for line in (source / "tools.jsonl").read_text(encoding="utf-8").splitlines():
            record = json.loads(line) if line.strip() else None
            if record and len(records) < tools and record["name"] not in seen:
                seen.add(record["name"])
                records.append(record)
        dev = [json.loads(line) for line in (source / "dev.jsonl").read_text(encoding="utf-8").splitlines() if line]
        requests += [row["query"] for row in dev[:queries]]
    catalog = folder / "tools.jsonl"
    catalog.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    agent = folder / "agent.yaml"
    agent.write_text(
        "name: instant\nmodel: {name: gpt-4o-mini}\ninstructions: Call the functions you need.\n"
        "tools:\n  - {type: catalog, name: catalog, path: tools.jsonl}\n"
        f"tool_filtering:\n  embedding: {json.dumps(embedding)}\n",
        encoding="utf-8",
    )
    return agent, requests[:queries]


async def first_answers(manager: ToolFilterManager, requests: list[str], started: float) -> dict[str, Any]:
    first = await manager.select(requests[0])
    first_answer = time.perf_counter() - started
    during = []
    for request in requests[1:]:
        began = time.perf_counter()
        await manager.select(request)
        during.append(1000 * (time.perf_counter() - began))
        await asyncio.sleep(0)
    await manager.vectors_ready()
    hybrid = await manager.select(requests[0])
    return {
        "tools": len(manager.index),
        "first_answer_s": first_answer,
        "first_method": first.ranking.method,
        "ready_s": time.perf_counter() - started,
        "later_method": hybrid.ranking.method,
        "during_p50_ms": statistics.median(during) if during else float("nan"),
    }


async def run(catalog: str, tools: int, queries: int, background_above: int | None) -> dict[str, Any]:
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import load_agent_file

    with tempfile.TemporaryDirectory() as folder:
        embedding = {"cache_dir": str(Path(folder) / "cache"), "background_above": background_above}
        if catalog == "synthetic":
            generated = synthetic_tools(tools)
            requests = synthetic_queries(generated, queries)
            started = time.perf_counter()
            manager = await ToolFilterManager.from_kernel(
                synthetic_kernel(generated), ToolFilterConfig(embedding=embedding)
            )
            try:
                return await first_answers(manager, requests, started)
            finally:
                await manager.aclose()
        agent, requests = real_catalog(Path(folder), tools, queries, embedding)
        started = time.perf_counter()
        async with await open_toolset(load_agent_file(agent), wait=False) as toolset:
            return await first_answers(toolset.manager, requests, started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", choices=("real", "synthetic"), default="real")
    parser.add_argument("--tools", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=20)
    args = parser.parse_args()
    waiting = asyncio.run(run(args.catalog, args.tools, args.queries, None))
    instant = asyncio.run(run(args.catalog, args.tools, args.queries, 500))
    print(f"{waiting['tools']} {args.catalog} tools, empty cache, offline model (this machine, one run each)\n")
    print("| start | first answer | its method | vectors ready | then | requests meanwhile p50 |")
    print("|---|---|---|---|---|---|")
    for label, r in (("wait for the vectors", waiting), ("instant (default)", instant)):
        print(
            f"| {label} | {r['first_answer_s']:.2f} s | {r['first_method']} | {r['ready_s']:.1f} s "
            f"| {r['later_method']} | {r['during_p50_ms']:.2f} ms |"
        )
    print(f"\nfirst answer, instant / waiting: {instant['first_answer_s'] / waiting['first_answer_s']:.3f}x")


if __name__ == "__main__":
    main()
