"""Measuring retrieval quality on a labelled query set (recall@k, complete@k, nDCG@10, MRR, latency)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from sk_toolfilter.basics.breaker import Breaker
from sk_toolfilter.basics.display import shorten
from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.basics.input_files import json_lines, json_object
from sk_toolfilter.config import SearchMethod, ToolFilterConfig
from sk_toolfilter.measure.metrics import complete_at_k, ndcg_at_k, recall_at_k, reciprocal_rank
from sk_toolfilter.retrieval.cutoff import apply_cutoff
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.search import rank_tools
from sk_toolfilter.retrieval.usage import UsageMemory
from sk_toolfilter.selection.pipeline import SelectionRequest, StageOutcome, run_second_stage

if TYPE_CHECKING:
    from sk_toolfilter.selection.pipeline import SecondStage


@dataclass(frozen=True)
class LabelledQuery:
    id: str
    query: str
    gold: tuple[str, ...]
    category: str = ""
    where: str = field(default="", compare=False)
    """``file:line`` it was read from (for errors that name it)."""


@dataclass
class MethodResult:
    """Aggregated metrics of one method over a query set."""

    method: str
    metrics: dict[str, float] = field(default_factory=dict)
    by_category: dict[str, dict[str, float]] = field(default_factory=dict)
    second_stage: dict[str, int] = field(default_factory=dict)
    queries: list[dict[str, Any]] = field(default_factory=list)
    """Per query: its ``id``, ``query``, ``gold``, the tools ``sent``, the ``missing`` gold tools (not
    sent) and the ``rank`` of each gold tool in the ranking (None: beyond it)."""
    """With a picking second stage: requests it was ``tried`` on, ``picked`` (its pick was sent), ``fell
    back`` (the first stage's cut was sent), and each fallback's reason (``fell back: timeout``, …)."""


def load_queries(path: str | Path) -> list[LabelledQuery]:
    """Queries in the benchmarks' ``dev.jsonl`` format (``id``, ``query``, ``gold``, ``category``)."""
    queries = []
    for where, value in json_lines(path, "queries"):
        raw = json_object(value, where)
        missing = [key for key in ("query", "gold") if key not in raw]
        if missing:
            raise ConfigError(f"{where}: not a labelled query (missing {', '.join(repr(k) for k in missing)})")
        gold, query = raw["gold"], raw["query"]
        if isinstance(gold, str):
            raise ConfigError(
                f"{where}: 'gold' must be a list of tool names, not one string (write [{json.dumps(gold)}])"
            )
        if not isinstance(gold, list) or not gold or not all(isinstance(g, str) and g.strip() for g in gold):
            raise ConfigError(
                f"{where}: 'gold' must be a non-empty list of tool names (full names, e.g. \"Plugin-function\")"
            )
        if not isinstance(query, str) or not query.strip():
            raise ConfigError(f"{where}: 'query' must be a non-empty string")
        queries.append(
            LabelledQuery(
                id=str(raw.get("id", where.rsplit(":", 1)[-1])),
                query=query,
                gold=tuple(gold),
                category=str(raw.get("category", "")),
                where=where,
            )
        )
    if not queries:
        raise ConfigError(f'{path}: no queries (one JSON object per line: {{"query": ..., "gold": [...]}})')
    return queries


def _aggregate(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: float(np.mean([r[key] for r in rows])) for key in rows[0]} if rows else {}


RerankMode = Literal["none", "oracle", "llm"]
"""``eval --rerank``: the first stage alone; the best possible pick from its shortlist (the ceiling of
any second stage); or the configured chat model picking (:class:`~sk_toolfilter.LLMToolPicker`)."""


def oracle_pick(ranked: Sequence[str], gold: Sequence[str], shortlist: int, limit: int) -> list[str]:
    """The best pick a second stage could make: the gold tools among the first `shortlist`, at most
    `limit`, in ranking order (what a perfect picker reading the shortlist would send)."""
    wanted = set(gold)
    return [name for name in ranked[:shortlist] if name in wanted][:limit]


def picked_first(ranked: Sequence[str], picked: Sequence[str]) -> list[str]:
    """The ranking a pick gives: the picked tools, then the rest in the first stage's order."""
    chosen = set(picked)
    return [*picked, *(n for n in ranked if n not in chosen)]


async def evaluate_method(
    index: ToolIndex,
    queries: Sequence[LabelledQuery],
    method: SearchMethod,
    config: ToolFilterConfig,
    ks: Sequence[int] = (1, 3, 5, 10),
    *,
    progress: Callable[[int, int], None] | None = None,
    tool_tokens: np.ndarray | None = None,
    rerank: RerankMode = "none",
    picker: SecondStage | None = None,
    memory: UsageMemory | None = None,
) -> MethodResult:
    """Rank every query with `method`; strict metrics (only gold names count). With `tool_tokens`
    (schema tokens per catalog position), also the mean ``tokens_sent``. ``rerank="oracle"``: reordered by
    :func:`oracle_pick` (``rerank.shortlist`` deep, ``top_k`` picked); ``"llm"``: by `picker` (its tokens
    counted: ``picker_tokens``). `memory`: learning from use reorders every ranking (`` +learned``)."""
    method_config = config.model_copy(update={"search_method": method})
    shortlist = config.rerank.shortlist if rerank != "none" else 0
    depth = max(max(ks), 10, config.top_k, shortlist)
    rows: list[dict[str, float]] = []
    categories: dict[str, list[dict[str, float]]] = {}
    latencies = []
    stage: Counter[str] = Counter()
    per_query: list[dict[str, Any]] = []
    breaker = Breaker(config.rerank.failure_threshold, config.rerank.cooldown_seconds)
    for done, item in enumerate(queries, 1):
        started = time.perf_counter()
        ranking = await rank_tools(index, item.query, method_config, limit=depth, memory=memory)
        ranked = [t.full_name for t in ranking.tools]
        cut = apply_cutoff(ranking.tools, method_config, no_tool_reason=ranking.no_tool_reason)
        sent = [d.full_name for d in cut if d.kept]
        pick_tokens = 0.0
        if rerank == "oracle":
            sent = oracle_pick(ranked, item.gold, shortlist, config.top_k) or sent
            ranked = picked_first(ranked, sent)
        elif rerank == "llm" and picker is not None:
            outcome = await run_second_stage(picker, SelectionRequest(item.query), ranking, config.top_k, breaker)
            pick_tokens = outcome.cost.get("input_tokens", 0.0) + outcome.cost.get("output_tokens", 0.0)
            stage.update(_stage_counts(outcome))
            if outcome.picked is not None:
                sent = outcome.picked
                ranked = picked_first(ranked, sent)
        latencies.append((time.perf_counter() - started) * 1000)  # the second stage's time included
        row = _query_row(item, ranked, sent, ks, index, tool_tokens)
        if rerank == "llm":
            row["picker_tokens"] = pick_tokens
        rows.append(row)
        categories.setdefault(item.category, []).append(row)
        per_query.append(_query_outcome(item, sent, ranked))
        if progress is not None:
            progress(done, len(queries))
    metrics = _aggregate(rows)
    if latencies:
        metrics["p50_ms"] = float(np.percentile(latencies, 50))
        metrics["p95_ms"] = float(np.percentile(latencies, 95))
    by_category = {c: _aggregate(r) for c, r in sorted(categories.items())}
    stages = dict(stage) if rerank == "llm" else {}
    name = method_name(method, config, rerank) + (" +learned" if memory is not None else "")
    return MethodResult(name, metrics, by_category, stages, per_query)


def _query_row(
    item: LabelledQuery,
    ranked: Sequence[str],
    sent: Sequence[str],
    ks: Sequence[int],
    index: ToolIndex,
    tool_tokens: np.ndarray | None,
) -> dict[str, float]:
    """One query's metrics (strict: only gold names count)."""
    row = {f"recall@{k}": recall_at_k(ranked, item.gold, k) for k in ks}
    row.update({f"complete@{k}": complete_at_k(ranked, item.gold, k) for k in ks})
    row["ndcg@10"] = ndcg_at_k(ranked, item.gold, 10)
    row["mrr"] = reciprocal_rank(ranked, item.gold)
    row["recall_sent"] = recall_at_k(sent, item.gold, len(sent)) if sent else 0.0
    row["mean_tools_sent"] = float(len(sent))
    if tool_tokens is not None:
        row["tokens_sent"] = float(sum(tool_tokens[index.position(n)] for n in sent))
    return row


def _query_outcome(item: LabelledQuery, sent: Sequence[str], ranked: Sequence[str]) -> dict[str, Any]:
    """One query's hits and misses (:attr:`MethodResult.queries`)."""
    position = {name: rank for rank, name in enumerate(ranked, 1)}
    chosen = set(sent)
    return {
        "id": item.id,
        "query": item.query,
        "gold": list(item.gold),
        "sent": list(sent),
        "missing": [g for g in item.gold if g not in chosen],
        "rank": {g: position.get(g) for g in item.gold},
    }


def misses_markdown(result: MethodResult, shown: int = 50) -> list[str]:
    """eval.md's list of `result`'s misses (queries whose gold tools were not all sent), with what was sent."""
    misses = [q for q in result.queries if q["missing"]]
    lines = [f"### Misses of {result.method}: {len(misses)} of {len(result.queries)} queries", ""]
    for q in misses[:shown]:
        missing = ", ".join(f"`{g}` (rank {q['rank'][g] or '-'})" for g in q["missing"])
        sent = ", ".join(f"`{n}`" for n in q["sent"]) or "nothing"
        lines.append(f"- **{q['id']}** {shorten(q['query'], 120)!r}: missing {missing}; sent {sent}")
    if len(misses) > shown:
        lines.append(f"- and {len(misses) - shown} more (eval.json lists every query)")
    return [*lines, ""]


def method_name(method: SearchMethod, config: ToolFilterConfig, rerank: RerankMode = "none") -> str:
    """A row's name: the first stage's method and any second stage (``hybrid+cross-encoder@10``,
    ``hybrid+llm@20``, ``hybrid+oracle@20``)."""
    if rerank != "none":
        return f"{method}+{rerank}@{config.rerank.shortlist}"
    if config.rerank.type in ("cross-encoder", "learned"):
        return f"{method}+{config.rerank.type}@{config.rerank.shortlist}"
    return method


def _stage_counts(outcome: StageOutcome) -> list[str]:
    """What one outcome adds to :attr:`MethodResult.second_stage`."""
    if not outcome.attempted:
        return []
    if outcome.picked is not None:
        return ["tried", "picked"]
    return ["tried", "fell back", f"fell back: {outcome.fallback}"]


def second_stage_line(result: MethodResult, n_queries: int) -> str | None:
    """What a picking second stage did over the queries, e.g. ``hybrid+llm@20: tried on 10 of 10
    queries: 7 picked, 3 fell back (timeout 2, call failed 1)``; None without one."""
    counts = result.second_stage
    if "+llm@" not in result.method and not counts:
        return None
    reasons = sorted(
        ((k.split(": ", 1)[1], n) for k, n in counts.items() if k.startswith("fell back: ")), key=lambda x: -x[1]
    )
    why = f" ({', '.join(f'{reason} {n}' for reason, n in reasons)})" if reasons else ""
    return (
        f"{result.method}: tried on {counts.get('tried', 0)} of {n_queries} queries: {counts.get('picked', 0)} picked, "
        f"{counts.get('fell back', 0)} fell back{why}"
    )


def results_to_json(
    results: Sequence[MethodResult], n_queries: int, n_tools: int, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    stages = {r.method: r.second_stage for r in results if r.second_stage or "+llm@" in r.method}
    return {
        "n_queries": n_queries,
        "n_tools": n_tools,
        **(extra or {}),
        "methods": {r.method: r.metrics for r in results},
        **({"second_stage": stages} if stages else {}),
        "by_category": {r.method: r.by_category for r in results},
        "queries": {r.method: r.queries for r in results},
    }
