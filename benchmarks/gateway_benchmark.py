"""The MCP gateway (``sk-toolfilter serve``): search quality through it, the tokens a client carries,
and what a search and a proxied call cost against calling the tool directly.

    python benchmarks/gateway_benchmark.py [--data ../shared/benchmarks] [--rounds 200]

* **quality** — on each dev half, every request is the query of one ``search_tools`` (a fresh session,
  ``limit`` 5): recall@5 of the tools it shows, beside recall@5 of :meth:`ToolFilterManager.select`'s
  ranking for the same text (default configuration, every vector ready);
* **tokens** — per request, what a client's context carries: every tool's schema (the raw union the
  servers list, OpenAI function format) against the gateway's three schemas plus that request's search
  answer (o200k_base);
* **latency** — on the bundled agent: a search (in process; and over stdio through the MCP SDK's
  client, the whole protocol), ``Math-convert_units`` run through ``call_tool`` against the kernel
  function itself, and with ``SK_TOOLFILTER_MCP_SERVERS`` set (``.ci/install-mcp-servers``) the
  registry server ``server-everything``'s ``echo`` through the gateway against the same server called
  with the MCP SDK's client directly.

Prints Markdown; timings are this machine's, medians of `rounds`. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sk_toolfilter import LocalEmbeddingGenerator, ToolFilterConfig, ToolFilterManager, ToolIndex
from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.basics.tokenizer import count_json_tokens, count_tokens
from sk_toolfilter.gateway.desk import GatewayDesk, GatewaySession
from sk_toolfilter.measure.evaluation import load_queries
from sk_toolfilter.measure.metrics import recall_at_k
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.embeddings import cached
from sk_toolfilter.retrieval.metadata import openai_tool_definition

ROOT = Path(__file__).resolve().parents[1]
DEV = ("metatool", "bfcl", "seal_tools", "livemcpbench")


def bundled_agent(workdir: Path, *extra_sources: dict[str, Any]) -> Path:
    """The bundled agent.yaml with its sandbox in `workdir` (and `extra_sources` added)."""
    import shutil

    import yaml

    data = yaml.safe_load((ROOT / "agent.yaml").read_text())
    for source in data["tools"]:
        if "init" in source:
            source["init"]["root"] = str(workdir / "sandbox")
    data["tools"] += list(extra_sources)
    shutil.copytree(ROOT / "instructions", workdir / "instructions", dirs_exist_ok=True)
    path = workdir / "agent.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def listed_tokens(desk: GatewayDesk) -> int:
    """The gateway's ``tools/list`` as a client hands it to an OpenAI model (function definitions)."""
    return sum(
        count_json_tokens({"type": "function", "function": {"name": t.name, "description": t.description,
                                                             "parameters": t.input_schema}})
        for t in desk.listed()
    )  # fmt: skip


async def quality_and_tokens(data: Path) -> None:
    cache = EmbeddingCache(Path.home() / ".cache" / "sk-toolfilter" / "benchmarks")
    service = cached(LocalEmbeddingGenerator(), cache)
    print("| set | requests | tools | search_tools recall@5 | filter ranking recall@5 | union tokens / request "
          "| gateway tokens / request (list + answer) | saved |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name in DEV:
        tools = [t for t, _ in load_catalog(data / name / "tools.jsonl")]
        queries = load_queries(data / name / "dev.jsonl")
        index = await ToolIndex.build(tools, service, cache=cache)
        manager = ToolFilterManager(index, ToolFilterConfig())
        await manager.vectors_ready()
        desk = GatewayDesk(manager, kernel=None)
        union = sum(count_json_tokens(openai_tool_definition(t)) for t in tools)
        listing = listed_tokens(desk)
        through, ranked, answers = [], [], []
        for q in queries:
            session = GatewaySession()
            answer = await desk.search(session, q.query, limit=5)
            answers.append(count_tokens(answer))
            through.append(recall_at_k(list(session.found), q.gold, 5))  # the tools it shows, in order
            order = [t.full_name for t in (await manager.select(q.query)).ranking.tools]
            ranked.append(recall_at_k(order, q.gold, 5))
        carried = listing + statistics.mean(answers)
        print(
            f"| {name} | {len(queries)} | {len(tools)} | {statistics.mean(through):.3f} | "
            f"{statistics.mean(ranked):.3f} | {union:,} | {carried:,.0f} ({listing} + {statistics.mean(answers):.0f}) "
            f"| {1 - carried / union:.1%} |",
            flush=True,
        )


async def p50_ms(run: Callable[[], Awaitable[Any]], rounds: int) -> float:
    await run()  # warm
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        await run()
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


async def latency(rounds: int, workdir: Path) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from semantic_kernel.functions import KernelArguments

    from sk_toolfilter.agents.agent import open_toolset

    path = bundled_agent(workdir)
    arguments = {"value": 10, "from_unit": "km", "to_unit": "mi"}
    print("\n| what | p50 ms |\n|---|---|")
    async with await open_toolset(path) as tools:
        desk = GatewayDesk(tools.manager, tools.kernel)
        queries = iter(["convert 10 km to miles", "list the files in my folder", "what time is it in Tokyo"] * rounds)
        search = await p50_ms(lambda: desk.search(GatewaySession(), next(queries)), rounds)
        print(f"| search_tools, in process | {search:.2f} |")
        function = tools.kernel.get_function("Math", "convert_units")
        direct = await p50_ms(lambda: function.invoke(tools.kernel, KernelArguments(**arguments)), rounds)
        session = GatewaySession()
        proxied = await p50_ms(lambda: desk.call(session, "Math-convert_units", arguments), rounds)
        print(f"| Math-convert_units: the kernel function itself | {direct:.3f} |")
        print(f"| Math-convert_units: call_tool, in process | {proxied:.3f} |")
    server = StdioServerParameters(command=sys.executable, args=["-m", "sk_toolfilter.cli", "serve", str(path)])
    async with stdio_client(server) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        search = await p50_ms(lambda: client.call_tool("search_tools", {"query": "convert 10 km to miles"}), rounds)
        call = await p50_ms(
            lambda: client.call_tool("call_tool", {"name": "Math-convert_units", "arguments": arguments}), rounds
        )
        print(f"| search_tools over stdio (MCP SDK client) | {search:.2f} |")
        print(f"| call_tool Math-convert_units over stdio | {call:.2f} |")
    servers = os.environ.get("SK_TOOLFILTER_MCP_SERVERS")
    if servers:
        await registry_latency(Path(servers, "npm/node_modules/.bin/mcp-server-everything"), workdir, rounds)


async def registry_latency(everything: Path, workdir: Path, rounds: int) -> None:
    """server-everything's echo: the MCP SDK's client straight to it, against the gateway's call_tool."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from sk_toolfilter.agents.agent import open_toolset

    backend = StdioServerParameters(command=str(everything), args=["stdio"])
    async with stdio_client(backend) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        direct = await p50_ms(lambda: client.call_tool("echo", {"message": "hello"}), rounds)
    path = bundled_agent(
        workdir / "registry", {"type": "mcp", "name": "Everything", "command": str(everything), "args": ["stdio"]}
    )
    async with await open_toolset(path) as tools:
        desk, session = GatewayDesk(tools.manager, tools.kernel), GatewaySession()
        proxied = await p50_ms(lambda: desk.call(session, "Everything-echo", {"message": "hello"}), rounds)
    print(f"| Everything echo: the MCP SDK's client to the server | {direct:.2f} |")
    print(f"| Everything echo: call_tool, in process (the gateway's own client to the server) | {proxied:.2f} |")


def main() -> None:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "benchmarks")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(quality_and_tokens(args.data))
    with tempfile.TemporaryDirectory() as workdir:
        (Path(workdir) / "registry").mkdir()
        asyncio.run(latency(args.rounds, Path(workdir)))


if __name__ == "__main__":
    main()
