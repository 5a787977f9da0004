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

from sk_toolfilter.basics.display import shorten
from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.basics.input_files import json_lines, json_object
from sk_toolfilter.config import SearchMethod, ToolFilterConfig
from sk_toolfilter.measure.metrics import complete_at_k, ndcg_at_k, recall_at_k, reciprocal_rank
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.memory import LearningMemory
from sk_toolfilter.selection.manager import ToolFilterManager
from sk_toolfilter.selection.pipeline import Selection, StageOutcome

if TYPE_CHECKING:
    from semantic_kernel.contents import ChatHistory

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
    memory: LearningMemory | None = None,
    first_request: bool = True,
) -> MethodResult:
    """Send every query through a :class:`ToolFilterManager` on `index` configured as `config` with
    `method` (:func:`eval_manager`) as the first request of a conversation: what is ``sent`` is what the
    SK wrapper and the Agent Framework middleware send for the same words (``sk-toolfilter search`` too:
    the agent loop's budget and lookups included); rank metrics read its first-stage ranking (strict: only
    gold names count). With `tool_tokens` (schema tokens per index position), also the mean ``tokens_sent``.
    ``rerank="oracle"``: reordered by :func:`oracle_pick` (``rerank.shortlist`` deep, ``top_k`` picked);
    ``"llm"``: `picker` is the manager's second stage (its tokens counted: ``picker_tokens``). `memory`:
    learning from use reads it (``, learned from use``). ``first_request=False``: each query ranked bare
    (no turn, so no agent loop), as the benchmarks and the training pipeline compare first stages."""
    manager = eval_manager(index, config, method, picker if rerank == "llm" else None, memory)
    shortlist = config.rerank.shortlist if rerank != "none" else 0
    rows: list[dict[str, float]] = []
    categories: dict[str, list[dict[str, float]]] = {}
    latencies = []
    stage: Counter[str] = Counter()
    per_query: list[dict[str, Any]] = []
    for done, item in enumerate(queries, 1):
        started = time.perf_counter()
        if first_request:
            selection = await manager.select_for_history(one_message(item.query))
        else:  # the first stage and its cut alone (no turn, so no agent loop): what the benchmarks compare
            selection = await manager.select(item.query)
        latencies.append((time.perf_counter() - started) * 1000)  # the second stage's time included
        ranked, sent = _ranked_and_sent(selection, item, rerank, shortlist, config.top_k, stage)
        row = _query_row(item, ranked, sent, ks, index, tool_tokens)
        if rerank == "llm":
            cost = selection.second_stage.cost if selection.second_stage is not None else {}
            row["picker_tokens"] = cost.get("input_tokens", 0.0) + cost.get("output_tokens", 0.0)
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
    name = method_name(method, config, rerank) + (LEARNED_FROM_USE if memory is not None else "")
    return MethodResult(name, metrics, by_category, stages, per_query)


def _ranked_and_sent(
    selection: Selection, item: LabelledQuery, rerank: RerankMode, shortlist: int, top_k: int, stage: Counter[str]
) -> tuple[list[str], list[str]]:
    """(the ranking the metrics read, the tools sent) of one query: the selection's, the oracle's pick
    first (``rerank="oracle"``), or the second stage's pick first (its outcome counted in `stage`)."""
    ranked, sent, outcome = [t.full_name for t in selection.ranking.tools], selection.names, selection.second_stage
    if rerank == "oracle":
        sent = oracle_pick(ranked, item.gold, shortlist, top_k) or sent
        return picked_first(ranked, sent), sent
    if outcome is not None:
        stage.update(_stage_counts(outcome))
        if outcome.picked is not None:
            ranked = picked_first(ranked, outcome.picked)
    return ranked, sent


LEARNED_FROM_USE = ", learned from use"
"""What a row measured with learning from use adds to its name (``hybrid, learned from use``): never
to be read as the learned ranker (``rerank: learned``, ``hybrid+learned@30``)."""


def one_message(text: str) -> ChatHistory:
    """A conversation whose one message is the user's `text` (what an adapter sees on a first request)."""
    from semantic_kernel.contents import ChatHistory

    history = ChatHistory()
    history.add_user_message(text)
    return history


def eval_manager(
    index: ToolIndex,
    config: ToolFilterConfig,
    method: SearchMethod,
    picker: SecondStage | None = None,
    memory: LearningMemory | None = None,
) -> ToolFilterManager:
    """The manager eval sends its queries through: `config` with `method` on `index`, `picker` as its
    second stage, learning from use reading `memory` only, in one shared scope (no file, no table: eval
    never reads or writes what the agent learned)."""
    learning = {**config.learning.model_dump(), "enabled": memory is not None, "file": None, "scope": "shared"}
    manager = ToolFilterManager(index, config.updated(search_method=method, learning=learning))
    manager.set_second_stage(picker)
    if memory is not None:
        manager.learning.memory = memory
    return manager


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
    row["all_sent"] = float(set(item.gold) <= set(sent))  # 1 - all_sent: the share of misses
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


def misses(result: MethodResult) -> list[dict[str, Any]]:
    """`result`'s misses: the queries whose gold tools were not all sent (``1 - all_sent`` of them)."""
    return [q for q in result.queries if q["missing"]]


def miss_line(query: dict[str, Any], markdown: bool = False) -> str:
    """One miss, e.g. ``q7 'unsubscribe jane': missing Crm-record_opt_out (rank 2); sent Crm-add_to_campaign``
    (`markdown`: the id in bold, names in backticks)."""
    code, bold = ("`", "**") if markdown else ("", "")
    missing = ", ".join(f"{code}{g}{code} (rank {query['rank'][g] or '-'})" for g in query["missing"])
    sent = ", ".join(f"{code}{n}{code}" for n in query["sent"]) or "nothing"
    return f"{bold}{query['id']}{bold} {shorten(query['query'], 120)!r}: missing {missing}; sent {sent}"


def misses_heading(result: MethodResult) -> str:
    """``Misses of hybrid: 3 of 20 queries (gold tools not all sent; all_sent 0.850)``."""
    share = result.metrics.get("all_sent", float("nan"))
    return (
        f"Misses of {result.method}: {len(misses(result))} of {len(result.queries)} queries "
        f"(gold tools not all sent; all_sent {share:.3f})"
    )


def misses_markdown(result: MethodResult, shown: int = 50) -> list[str]:
    """eval.md's list of `result`'s misses (queries whose gold tools were not all sent), with what was sent."""
    missed = misses(result)
    lines = [f"### {misses_heading(result)}", ""]
    lines += [f"- {miss_line(q, markdown=True)}" for q in missed[:shown]]
    if len(missed) > shown:
        lines.append(f"- and {len(missed) - shown} more (eval.json lists every query)")
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
