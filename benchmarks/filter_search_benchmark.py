"""The filter answering the provider's tool search (``provider_search.search: filter``), on the bundled
BFCL catalog (examples/data/bfcl: 1,287 tools, its 1,088 dev requests).

    python benchmarks/filter_search_benchmark.py [--limit N] [--results 1,3,5,8]

For each request, the model's search query is the request itself. The search answer is what
:class:`~sk_toolfilter.provider_wire.search_answer.SearchSession` (the desk the wire transports use) loads
for it with nothing loaded yet; the filter's ranking is ``ToolFilterManager.select``'s first stage for
the same text. Prints recall@k of both (they must be equal: one ranking path; the count of requests
whose answer differs from the ranking's top k is printed too) and the OpenAI tool tokens per request of
each way of sending, counted with the report's tokenizer on the tools array: filtering (the selection
loaded), provider search (the selection loaded, every other tool deferred by name and description, the
hosted search tool) and filter-answered search (the same with the client-executed search tool, plus the
definitions one answer of k tools adds). The local embedding model; waits for ``vectors_ready()``.
Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from pathlib import Path

from sk_toolfilter import LocalEmbeddingGenerator, ToolFilterConfig, ToolFilterManager, ToolIndex
from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.basics.tokenizer import count_json_tokens
from sk_toolfilter.measure.evaluation import load_queries
from sk_toolfilter.measure.metrics import recall_at_k
from sk_toolfilter.measure.provider_search_tokens import provider_search_tokens
from sk_toolfilter.provider_wire.search_answer import SearchSession
from sk_toolfilter.retrieval.metadata import openai_tool_definition
from sk_toolfilter.selection.offer import search_offer

DATA = Path(__file__).resolve().parents[1] / "examples" / "data" / "bfcl"
ENCODING = "o200k_base"
TOKENS_EVERY = 10
"""Tool tokens are counted on every 10th request."""


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="first N requests (0: all)")
    parser.add_argument("--results", default="1,3,5,8", help="answer sizes k to measure")
    args = parser.parse_args()
    sizes = [int(k) for k in args.results.split(",")]
    tools = [tool for tool, _ in load_catalog(DATA / "tools.jsonl")]
    queries = load_queries(DATA / "dev.jsonl")[: args.limit or None]
    index = await ToolIndex.build(tools, LocalEmbeddingGenerator())
    config = ToolFilterConfig(provider_search={"enabled": True, "search": "filter"})
    manager = ToolFilterManager(index, config)
    await manager.vectors_ready()
    every = [t.full_name for t in tools]
    definitions = {t.full_name: openai_tool_definition(t) for t in tools}
    ranking_recall: dict[int, list[float]] = {k: [] for k in sizes}
    answer_recall: dict[int, list[float]] = {k: [] for k in sizes}
    differ = dict.fromkeys(sizes, 0)
    tokens: dict[str, list[int]] = {"filtering": [], "provider search": [], "filter-answered search": []}
    for number, query in enumerate(queries, 1):
        ranked = [t.full_name for t in (await manager.select(query.query)).ranking.tools if t.evidence]
        for k in sizes:
            session = SearchSession(manager, (), tuple(every), k)
            answer = list((await session.answer(f"q{number}-{k}", {"query": query.query})).names)
            ranking_recall[k].append(recall_at_k(ranked, query.gold, k))
            answer_recall[k].append(recall_at_k(answer, query.gold, k))
            differ[k] += answer != ranked[:k]
        if number % TOKENS_EVERY == 1:  # counting 1,287 deferred tools twice per request is the slow part
            _count_tokens(tokens, manager, await manager.filter_tools(query.query), every, definitions, answer)
        if number % 100 == 0:
            print(f"  {number}/{len(queries)} requests", flush=True)
    print(f"\nFilter-answered tool search, bundled BFCL catalog ({len(tools):,} tools, {len(queries)} requests):")
    print("| k | recall@k, filter ranking | recall@k, search answer | answers differing from the ranking |")
    print("|---:|---:|---:|---:|")
    for k in sizes:
        r, a = statistics.mean(ranking_recall[k]), statistics.mean(answer_recall[k])
        print(f"| {k} | {r:.3f} | {a:.3f} | {differ[k]} |")
    counted = len(tokens["filtering"])
    print(f"\nOpenAI tool tokens per request (mean of {counted} requests, every {TOKENS_EVERY}th; filter-answered: "
          f"plus one answer of {sizes[-1]} tools):")  # fmt: skip
    print("| way of sending | tool tokens |")
    print("|---|---:|")
    for mode, counts in tokens.items():
        print(f"| {mode} | {statistics.mean(counts):,.0f} |")


def _count_tokens(
    tokens: dict[str, list[int]],
    manager: ToolFilterManager,
    selection: list[str],
    every: list[str],
    definitions: dict[str, dict],
    answer: list[str],
) -> None:
    every_tool = [definitions[n] for n in every]
    plan = search_offer(manager, every, selection, manager.config.provider_search)
    loaded = [definitions[n] for n in selection if n in definitions]
    tokens["filtering"].append(count_json_tokens(loaded, ENCODING) if loaded else 0)
    tokens["provider search"].append(provider_search_tokens(every_tool, plan, ENCODING)[0])
    found = [definitions[n] for n in answer]
    answered = provider_search_tokens(every_tool, plan, ENCODING, answered=True)[0]
    tokens["filter-answered search"].append(answered + (count_json_tokens(found, ENCODING) if found else 0))


if __name__ == "__main__":
    asyncio.run(main())
