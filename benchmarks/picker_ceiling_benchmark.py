"""What a second stage that picks from the shortlist could gain, and what the picking call costs.

    python benchmarks/picker_ceiling_benchmark.py [--data ../shared/benchmarks] [--limit 400]

For every dev set (bfcl, metatool, seal_tools, livemcpbench) and two first-stage models — the shipped
``minilm-l6-tools-v1`` (trained on these dev halves: an upper bound) and the general
``all-MiniLM-L6-v2-int8`` (never trained on them: a fair figure for an unseen catalog) — prints, at
``top_k`` 5: the first stage's recall@5 and complete@5, and the oracle's (``eval --rerank oracle``:
the best possible pick from the shortlist) at shortlists of 10, 20 and 30: the ceiling of any picker.

Then the picking call's size per request at each shortlist: the prompt the picker sends (system +
user message, counted with o200k_base; the chat format adds ~10 tokens) and the answer for a pick of
five names. Everything is offline (no model is called); prints Markdown, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path

from sk_toolfilter import ToolFilterConfig, ToolIndex
from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.basics.tokenizer import count_tokens
from sk_toolfilter.measure.eval_run import picking_config
from sk_toolfilter.measure.evaluation import evaluate_method, load_queries
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.embeddings import create_embedding_service
from sk_toolfilter.retrieval.faults import EmbeddingCircuit
from sk_toolfilter.retrieval.local_models import GENERAL_MODEL_ID
from sk_toolfilter.retrieval.search import rank_tools
from sk_toolfilter.selection.llm_pick import SYSTEM_PROMPT, LLMToolPicker
from sk_toolfilter.selection.pipeline import SelectionRequest

ROOT = Path(__file__).resolve().parents[1]
SETS = ("bfcl", "metatool", "seal_tools", "livemcpbench")
SHORTLISTS = (10, 20, 30)
MODELS = ("minilm-l6-tools-v1", GENERAL_MODEL_ID)


async def catalog_index(folder: Path, service: object) -> ToolIndex:
    """The dev set's catalog, embedded once (cached on disk; no per-call timeout on a busy machine)."""
    tools = [t for t, _ in load_catalog(folder / "tools.jsonl")]
    cache = EmbeddingCache(None)
    return await ToolIndex.build(tools, service, cache=cache, circuit=EmbeddingCircuit(timeout_seconds=3600))  # type: ignore[arg-type]


async def ceiling_rows(data: Path, limit: int):  # type: ignore[no-untyped-def]
    for model in MODELS:
        config = ToolFilterConfig(embedding={"model": model})
        service = create_embedding_service(config.embedding)
        for name in SETS:
            folder = data / name
            if not (folder / "dev.jsonl").is_file():
                continue
            print(f"{model}: {name}", file=sys.stderr, flush=True)
            index = await catalog_index(folder, service)
            queries = load_queries(folder / "dev.jsonl")[:limit]
            first = await evaluate_method(index, queries, "hybrid", config, (5,), first_request=False)
            cells = [f"{first.metrics['recall@5']:.3f} / {first.metrics['complete@5']:.3f}"]
            for shortlist in SHORTLISTS:
                picked = picking_config(config.updated(rerank={"shortlist": shortlist}))
                oracle = await evaluate_method(
                    index, queries, "hybrid", picked, (5,), rerank="oracle", first_request=False
                )
                cells.append(f"{oracle.metrics['recall@5']:.3f} / {oracle.metrics['complete@5']:.3f}")
            yield f"| {name} | {model} | {len(queries)} | " + " | ".join(cells) + " |"


async def cost_rows(data: Path, limit: int) -> list[str]:
    config = ToolFilterConfig()
    service = create_embedding_service(config.embedding)
    rows = []
    for shortlist in SHORTLISTS:
        picker = LLMToolPicker(None, picking_config(config.updated(rerank={"shortlist": shortlist})).rerank)  # type: ignore[arg-type]
        prompts, answers = [], []
        for name in SETS:
            folder = data / name
            if not (folder / "dev.jsonl").is_file():
                continue
            index = await catalog_index(folder, service)
            texts = [json.loads(line)["query"] for line in (folder / "dev.jsonl").read_text().splitlines()][:limit]
            for text in texts:
                ranking = await rank_tools(index, text, config, limit=max(shortlist, 20), fill=False)
                listed = [t for t in ranking.tools[:shortlist] if t.evidence]
                system = SYSTEM_PROMPT.replace("{limit}", "5")
                prompts.append(count_tokens(system + picker.prompt(SelectionRequest(text), listed)))
                answers.append(count_tokens(json.dumps({"tools": [t.full_name for t in listed[:5]]})))
        rows.append(
            f"| {shortlist} | {statistics.mean(prompts):,.0f} | {statistics.median(prompts):,.0f} | "
            f"{max(prompts):,} | {statistics.mean(answers):,.0f} |"
        )
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "benchmarks")
    parser.add_argument("--limit", type=int, default=400, help="queries per dev set")
    args = parser.parse_args()
    head = " | ".join(f"oracle @{s}: recall@5 / complete@5" for s in SHORTLISTS)
    print(f"| dev set | first stage | queries | first stage: recall@5 / complete@5 | {head} |")
    print("|---|---|---:|---|" + "---|" * len(SHORTLISTS))
    async for row in ceiling_rows(args.data, args.limit):
        print(row, flush=True)
    print()
    print("| shortlist | picking prompt tokens: mean | median | max | answer tokens (5 names): mean |")
    print("|---:|---:|---:|---:|---:|")
    for row in await cost_rows(args.data, args.limit):
        print(row)


if __name__ == "__main__":
    asyncio.run(main())
