"""``sk-toolfilter eval``: evaluate every method on a labelled query set and write the results."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from sk_toolfilter.agents.agent_file import AgentSpec, load_agent_file, parse_agent
from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.basics.errors import ConfigError, closest_names
from sk_toolfilter.basics.progress import Progress
from sk_toolfilter.basics.redaction import library_logger, redact_config
from sk_toolfilter.basics.tokenizer import count_json_tokens
from sk_toolfilter.config import RerankConfig, ToolFilterConfig
from sk_toolfilter.measure.calls_file import learn_calls_file
from sk_toolfilter.measure.conversations import load_steps, render_summary, replay_conversations
from sk_toolfilter.measure.evaluation import (
    LEARNED_FROM_USE,
    LabelledQuery,
    MethodResult,
    RerankMode,
    evaluate_method,
    load_queries,
    miss_line,
    misses,
    misses_heading,
    misses_markdown,
    results_to_json,
    second_stage_line,
)
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.embeddings import cached, create_embedding_service
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.memory import SHARED_SCOPE, LearningMemory
from sk_toolfilter.retrieval.metadata import ToolMetadata, openai_tool_definition
from sk_toolfilter.selection.learning import Learning, describe_trust, memory_for, request_key
from sk_toolfilter.selection.visibility import NameResolver
from sk_toolfilter.store.shared_index import SharedIndex

if TYPE_CHECKING:
    from sk_toolfilter.selection.pipeline import SecondStage

log = library_logger(__name__)

COLUMNS = (
    "recall@1",
    "recall@3",
    "recall@5",
    "recall@10",
    "complete@5",
    "ndcg@10",
    "mrr",
    "all_sent",
    "mean_tools_sent",
)
"""``all_sent``: the share of queries whose gold tools were all sent (the rest are the misses listed)."""
TERMINAL_MISSES = 10


def _parse_list(value: str, kind: type, name: str) -> list[Any]:
    try:
        return [kind(v.strip()) for v in value.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"--{name}: expected a comma-separated list, got {value!r}") from None


@dataclass
class EvalTarget:
    """What eval sends its queries through: the index, the configuration the agent's manager runs with
    (bare names resolved, source rules in), and the discovery tools the app pins beside them."""

    index: ToolIndex
    config: ToolFilterConfig
    discovery: frozenset[str] = frozenset()
    learned: LearningMemory | None = None
    """``--scope VALUE``: what the agent learned, as the requests of that scope read it."""

    @property
    def catalog_size(self) -> int:
        return len(self.index) - len(self.discovery)


async def _open_target(
    args: argparse.Namespace, methods: list[str], closers: list[Callable[[], Awaitable[None]]]
) -> EvalTarget:
    """``--tools``: the catalog indexed here (the disk cache, or the shared store); ``--agent``: the agent's
    own toolset, opened as its app opens it, so eval sends what the app sends (the discovery tools,
    overrides and source rules included) — with learning from use off (eval never writes the agent's
    memory; ``--learn`` measures a calls file, ``--scope`` what the agent learned, read only) and the
    second stage measured by ``--rerank``."""
    scope = getattr(args, "scope", None)
    if scope is not None and (not args.agent or getattr(args, "learn", None)):
        raise ConfigError("--scope measures what an agent learned: use it with --agent, and without --learn")
    if scope is not None and methods == ["bm25"]:
        raise ConfigError("--scope: learning from use compares request vectors; measure semantic or hybrid")
    if args.tools:
        config = apply_overrides(ToolFilterConfig(), args.set)
        tools = [t for t, _ in load_catalog(args.tools)]
        return EvalTarget(await _eval_index(tools, config, methods, closers), config)
    from sk_toolfilter.agents.agent import open_toolset

    spec = load_agent_file(args.agent)
    config = apply_overrides(spec.tool_filtering, args.set)
    # vectors for every method but bm25 alone (an agent that ranks with bm25 is opened with hybrid)
    vectors_method = config.search_method if config.search_method != "bm25" else "hybrid"
    if scope is not None and not config.learning.enabled:
        raise ConfigError(f"{args.agent}: learning.enabled is false: nothing is learned or kept")
    open_with = config.updated(
        search_method="bm25" if methods == ["bm25"] else vectors_method,
        rerank=RerankConfig(),  # --scope: the agent's learning read (file, table), never written
        learning={**config.learning.model_dump(), "enabled": scope is not None, "read_only": True},
    )
    toolset = await open_toolset(
        spec.model_copy(update={"tool_filtering": open_with}), progress=Progress("embedding tools", unit="tools")
    )
    closers.append(toolset.aclose)
    manager = toolset.manager
    resolved = manager.config.updated(rerank=config.rerank, learning=config.learning)
    learned = _scope_memory(manager.learning, scope, config) if scope is not None else None
    return EvalTarget(manager.index, resolved, frozenset(manager.discovery_names), learned)


def _scope_memory(learning: Learning, scope: str, config: ToolFilterConfig) -> LearningMemory:
    """``--scope VALUE``: the agent's rows of that scope (hashed as the app hashes it) in a memory of their
    own, as that scope's requests read them; a scope with no rows is an error naming what there is."""
    stored = learning.scope_value(scope)  # (a 'shared' agent has no scopes: refused there)
    rows = [row for row in learning.memory.rows() if row.scope == stored]
    if not rows:
        raise ConfigError(
            f"--scope: the agent's learning holds no requests of this scope ({len(learning.memory):,} in "
            f"{len(learning.memory.scopes())} other scope(s)); `sk-toolfilter learned` lists them"
        )
    memory = memory_for(config.learning)
    memory.restore(row._replace(scope=SHARED_SCOPE) for row in rows)  # eval reads one shared scope
    print(f"learned from use: the agent's {len(memory):,} requests of scope {scope!r}")
    print(describe_trust(memory))
    return memory


def _with_sent_gold(query: LabelledQuery, resolver: NameResolver) -> LabelledQuery:
    """`query` with each gold name spelled as the agent sends it (:class:`NameResolver`, as ``report`` and
    the agent file read tool names: a catalog's own long name → ``bfcl-…_re_5165ec``, bare and near
    spellings → the full name); a name that names no tool stays as written (and is reported)."""
    gold = tuple(resolver.resolve(name, f"{query.where} gold") for name in query.gold)
    return query if gold == query.gold else dataclasses.replace(query, gold=gold)


def measured_cutoffs(results: Sequence[MethodResult]) -> list[int]:
    """The ``--k`` cut-offs the results were measured at, ascending."""
    return sorted({int(key.split("@")[1]) for r in results for key in r.metrics if key.startswith("recall@")})


def headline_k(results: Sequence[MethodResult]) -> int:
    """The cut-off of the complete@k column and of the per-category lines: 5 when measured (``--k``), else
    the largest cut-off measured."""
    ks = measured_cutoffs(results)
    return 5 if 5 in ks or not ks else ks[-1]


def shown_columns(results: Sequence[MethodResult]) -> tuple[str, ...]:
    """The metric columns of what was measured: recall at each ``--k`` cut-off, complete at the headline
    one, then nDCG@10, MRR and tools sent (never a column of a cut-off nobody asked for)."""
    keys = {key for r in results for key in r.metrics}
    rest = [c for c in COLUMNS if not c.startswith(("recall@", "complete@")) and c in keys]
    return (*(f"recall@{k}" for k in measured_cutoffs(results)), f"complete@{headline_k(results)}", *rest)


def render_table(results: list[MethodResult], columns: tuple[str, ...] | None = None) -> str:
    names = (*(columns or shown_columns(results)), "tokens_sent", "p50_ms")
    if any("picker_tokens" in r.metrics for r in results):
        names = (*names, "picker_tokens")
    widths = [max(10, len(c) + 2) for c in names]
    first = max(10, *(len(r.method) + 1 for r in results))
    rows = [f"{'method':{first}}" + "".join(f"{c:>{w}}" for c, w in zip(names, widths, strict=True))]
    for r in results:
        values = [r.metrics.get(c, float("nan")) for c in names]
        rows.append(f"{r.method:{first}}" + "".join(f"{v:{w}.3f}" for v, w in zip(values, widths, strict=True)))
    return "\n".join(rows)


def picking_config(config: ToolFilterConfig) -> ToolFilterConfig:
    """`config` with ``rerank: llm`` (its shortlist, timeout and cache kept where they were set): what
    ``eval --rerank oracle|llm`` measures."""
    if config.rerank.type == "llm":
        return config
    given = config.rerank.model_dump(exclude_unset=True, exclude={"type", "model"})
    return config.updated(rerank={**given, "type": "llm"})


SECOND_STAGE_MODELS = ("cross-encoder", "learned")
"""``eval --rerank`` values that are a ``rerank.type`` of the first stage's own (no model call)."""


def measured_config(config: ToolFilterConfig, mode: str) -> ToolFilterConfig:
    """The configuration one ``--rerank`` mode is measured with: the agent's own (``none``), a picking
    stage (``oracle``, ``llm``: :func:`picking_config`), or ``rerank: cross-encoder | learned`` (its
    default shortlist unless the agent set one for that same type)."""
    if mode == "none":
        return config
    if mode in SECOND_STAGE_MODELS:
        return config if config.rerank.type == mode else config.updated(rerank={"type": mode})
    return picking_config(config)


def eval_picker(args: argparse.Namespace, config: ToolFilterConfig) -> SecondStage:
    """``eval --rerank llm``: the picker on the agent file's model (``--agent``), else on the model the
    environment names (OPENAI_API_KEY, OPENAI_BASE_URL)."""
    from sk_toolfilter.agents.agent import create_chat_service
    from sk_toolfilter.agents.agent_file import ModelSpec
    from sk_toolfilter.integration.picker_chat import semantic_kernel_picker

    model = load_agent_file(args.agent).model if args.agent else ModelSpec()
    try:
        service = create_chat_service(model)
    except ConfigError as exc:
        raise ConfigError(f"--rerank llm picks with a chat model, and {exc}") from None
    return semantic_kernel_picker(config.rerank, service=service)


def render_markdown(results: list[MethodResult], n_queries: int, n_tools: int, by_category: bool) -> str:
    cols = (*shown_columns(results), "tokens_sent", "p50_ms", "p95_ms")
    k = headline_k(results)
    out = [f"{n_queries} queries, {n_tools} tools.", "", "| method | " + " | ".join(cols) + " |"]
    out.append("|---" * (len(cols) + 1) + "|")
    for r in results:
        out.append(f"| {r.method} | " + " | ".join(f"{r.metrics.get(c, float('nan')):.3f}" for c in cols) + " |")
    stages = [line for line in (second_stage_line(r, n_queries) for r in results) if line is not None]
    if stages:
        out += ["", "Second stage (p50_ms and p95_ms include its time):", "", *(f"- {line}" for line in stages)]
    out += [
        "",
        "## Misses",
        "",
        "Queries whose gold tools were not all sent (`all_sent` is the share of the others; rank: the tool's "
        "place in the first stage's ranking, which complete@k and recall@k read).",
        "",
    ]
    for r in results:
        out += misses_markdown(r)
    if by_category:
        out += ["", f"| method | category | recall@{k} | complete@{k} | mrr |", "|---|---|---|---|---|"]
        for r in results:
            for category, m in r.by_category.items():
                out.append(
                    f"| {r.method} | {category} | {m[f'recall@{k}']:.3f} | {m[f'complete@{k}']:.3f} | {m['mrr']:.3f} |"
                )
    return "\n".join(out) + "\n"


def apply_overrides(config: ToolFilterConfig, assignments: list[str]) -> ToolFilterConfig:
    """`config` with ``KEY=VALUE`` settings applied (dotted keys for nested blocks; YAML values). What
    the configuration did not set stays unset (a default that depends on another key still follows it)."""
    from pydantic import BaseModel

    data = config.model_dump(mode="python", exclude_unset=True)
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {assignment!r}: expected KEY=VALUE, e.g. top_k=8")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        target: dict[str, Any] = data
        model: type[BaseModel] | None = ToolFilterConfig
        *parents, leaf = key.strip().split(".")
        for parent in parents:
            info = model.model_fields.get(parent) if model is not None else None
            block = info.annotation if info is not None else None
            if model is not None and not (isinstance(block, type) and issubclass(block, BaseModel)):
                raise ConfigError(f"--set {key}: tool_filtering has no block {parent!r}")
            target = target.setdefault(parent, {})
            model = block if isinstance(block, type) and issubclass(block, BaseModel) else None
        if model is not None and leaf not in model.model_fields:
            raise ConfigError(f"--set {key}: unknown tool_filtering setting {leaf!r}")
        target[leaf] = value
    return ToolFilterConfig.from_mapping(data)


def _conversation_spec(args: argparse.Namespace) -> AgentSpec:
    if args.tools:
        spec = parse_agent(
            {"name": "conversations", "tools": [{"type": "catalog", "name": "catalog", "path": args.tools}]},
            source="--tools",
            base_dir=Path.cwd(),
        )
    else:
        spec = load_agent_file(args.agent)
    config = apply_overrides(spec.tool_filtering, args.set)
    return spec.model_copy(update={"tool_filtering": config})


async def run_conversation_eval(args: argparse.Namespace) -> int:
    """``eval --conversations``: replay recorded conversations through the real wrapper and score each step."""
    from sk_toolfilter.agents.agent import open_toolset

    if getattr(args, "rerank", "none") != "none":
        raise ConfigError(
            "--rerank measures labelled queries (--queries); a replay of --conversations runs the agent's own "
            "rerank setting"
        )
    if getattr(args, "learn", None) or getattr(args, "scope", None):
        raise ConfigError(
            "--learn and --scope measure labelled queries (--queries); a replay of --conversations learns as it "
            "goes when learning.enabled is set (--set learning.enabled=true)"
        )
    steps = load_steps(args.conversations)
    if args.limit:
        keep = list(dict.fromkeys(s.conversation for s in steps))[: args.limit]
        steps = [s for s in steps if s.conversation in set(keep)]
    spec = _conversation_spec(args)
    async with await open_toolset(spec, progress=Progress("embedding tools", unit="tools")) as toolset:
        replay = await replay_conversations(
            toolset.kernel, toolset.manager, steps, progress=Progress("replaying steps", unit="steps")
        )
        catalog = len(toolset.manager.index) - len(toolset.manager.discovery_names)
    print(f"{len(steps)} steps, {catalog} tools (plus discovery); all tools would be sent without filtering")
    print(render_summary(replay, by_category=args.by_category))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        payload = {
            "summary": replay.summary(),
            "by_category": replay.by_category(),
            "config": redact_config(spec.tool_filtering.model_dump(mode="json")),
            "misses": [{"id": r.step.id, "gold": r.step.gold, "sent": r.sent} for r in replay.misses()],
        }
        (out / "conversations.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        (out / "conversations.md").write_text("```\n" + render_summary(replay, True) + "\n```\n", encoding="utf-8")
        print(f"Wrote {out / 'conversations.json'} and {out / 'conversations.md'}")
    return 0


async def run_eval(args: argparse.Namespace) -> int:
    """``sk-toolfilter eval --queries``: rank every labelled query with each method (and second stage),
    print the table, and write eval.json and eval.md with ``--out``."""
    methods = _parse_list(args.methods, str, "methods")
    unknown = sorted(set(methods) - {"bm25", "semantic", "hybrid"})
    if unknown:
        raise ConfigError(f"--methods: unknown method(s) {', '.join(unknown)}; use bm25, semantic, hybrid")
    ks = _parse_list(args.k, int, "k")
    if not ks or min(ks) < 1:
        raise ConfigError("--k: cut-offs must be positive integers")
    queries = load_queries(args.queries)[: args.limit]  # never empty: load_queries refuses an empty set
    closers: list[Callable[[], Awaitable[None]]] = []
    try:
        target = await _open_target(args, methods, closers)
        index, config = target.index, target.config
        queries = _checked_gold(queries, index)
        tool_tokens = np.array([count_json_tokens(openai_tool_definition(t)) for t in index.tools])
        tokens_all = float(
            sum(n for t, n in zip(index.tools, tool_tokens, strict=True) if t.full_name not in target.discovery)
        )
        results = []
        modes: list[RerankMode] = ["none"] if args.rerank == "none" else ["none", args.rerank]
        learned = await _learned(args, index, config, queries) if args.learn else target.learned
        memories = [None, learned] if learned is not None else [None]
        for method, mode, memory in ((m, r, s) for m in methods for r in modes for s in memories):
            if memory is not None and method == "bm25":
                continue  # learning compares request vectors: BM25 has none
            measured = measured_config(config, mode)
            label = f"{method}{'' if mode == 'none' else ', ' + mode}{'' if memory is None else LEARNED_FROM_USE}"
            result = await evaluate_method(
                index,
                queries,
                method,
                measured,
                ks,
                progress=Progress(f"querying ({label})", unit="queries"),
                tool_tokens=tool_tokens,
                rerank="none" if mode in SECOND_STAGE_MODELS else mode,
                picker=eval_picker(args, measured) if mode == "llm" else None,
                memory=memory,
            )
            result.metrics["tokens_all"] = tokens_all
            results.append(result)
    finally:
        for close in reversed(closers):
            await close()
    print(f"{len(queries)} queries, {target.catalog_size} tools; all tools = {int(tokens_all):,} schema tokens")
    _write_eval(args, config, results, len(queries), target.catalog_size)
    return 0


async def _learned(
    args: argparse.Namespace, index: ToolIndex, config: ToolFilterConfig, queries: list[LabelledQuery]
) -> LearningMemory:
    """``--learn FILE``: a memory (bounded as ``learning`` says) that learned the calls file; a warning
    when measured queries are in it too (their own answers are remembered: the figure flatters)."""
    if not index.has_embeddings:
        raise ConfigError("--learn: learning from use compares request vectors; this index has no embeddings")
    memory = memory_for(config.learning)
    result = await learn_calls_file(
        args.learn, index, memory, "eval", lambda _: True, Progress("learning requests", unit="requests")
    )
    print(result.summary(args.learn))
    print(describe_trust(memory))
    learned = {request_key("eval", q.query) for q in queries} & set(memory.keys())
    if learned:
        log.warning("%d of the measured queries are in %s: their own answers are learned", len(learned), args.learn)
    return memory


async def _eval_index(
    tools: list[ToolMetadata],
    config: ToolFilterConfig,
    methods: list[str],
    closers: list[Callable[[], Awaitable[None]]],
) -> ToolIndex:
    """The index eval ranks: built here with the disk cache, or from (and into) the shared store."""
    service = create_embedding_service(config.embedding) if set(methods) - {"bm25"} else None
    cache = EmbeddingCache(config.embedding.cache_dir) if config.embedding.cache else None
    if service is not None and cache is not None:
        service = cached(service, cache)  # queries too are embedded once across methods and runs
    build = partial(
        ToolIndex.build,
        bm25_config=config.bm25,
        batch_size=config.embedding.batch_size,
        progress=Progress("embedding tools", unit="tools") if service else None,
        cache=cache,
        precision=config.embedding.precision,
    )
    if config.index.store != "memory" and service is not None:  # the catalog from (or into) the shared store
        store = await SharedIndex.open(config.index, service)
        closers.append(store.aclose)
        build = partial(store.build, publish=config.index.publish, **build.keywords)
    return await build(tools, service)


def _checked_gold(queries: list[LabelledQuery], index: ToolIndex) -> list[LabelledQuery]:
    """`queries` with their gold spelled as the agent sends it; ConfigError naming any that names no tool."""
    resolver = NameResolver(index.names)
    queries = [_with_sent_gold(q, resolver) for q in queries]  # gold written with the catalog's own names
    unknown_gold = [(q.where, g) for q in queries for g in q.gold if g not in index]
    if unknown_gold:
        shown = "; ".join(
            f"{where}: {g!r} (closest: {', '.join(closest_names(g, index.names)) or 'none'})"
            for where, g in unknown_gold[:5]
        )
        more = f" and {len(unknown_gold) - 5} more" if len(unknown_gold) > 5 else ""
        raise ConfigError(f"--queries: gold tools not in the catalog: {shown}{more}")
    return queries


def _write_eval(
    args: argparse.Namespace, config: ToolFilterConfig, results: list[MethodResult], n_queries: int, n_tools: int
) -> None:
    """The table (and second-stage lines) on the terminal; eval.json and eval.md with ``--out``."""
    print(render_table(results))
    for line in filter(None, (second_stage_line(r, n_queries) for r in results)):
        print(line)
    for r in results:
        missed = misses(r)
        print(f"{misses_heading(r)}{':' if missed else ''}")
        for query in missed[:TERMINAL_MISSES]:
            print(f"  {miss_line(query)}")
        if len(missed) > TERMINAL_MISSES:
            where = "eval.md and eval.json list" if args.out else "--out DIR writes eval.md and eval.json with"
            print(f"  and {len(missed) - TERMINAL_MISSES} more ({where} every miss)")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        public_config = redact_config(config.model_dump(mode="json"))
        payload = results_to_json(results, n_queries, n_tools, {"config": public_config})
        if not args.by_category:
            payload.pop("by_category")
        (out / "eval.json").write_text(json.dumps(payload, indent=2, allow_nan=False) + "\n", encoding="utf-8")
        (out / "eval.md").write_text(render_markdown(results, n_queries, n_tools, args.by_category))
        print(f"Wrote {out / 'eval.json'} and {out / 'eval.md'}")
    elif args.by_category:
        k = headline_k(results)
        for r in results:
            for category, m in r.by_category.items():
                print(f"{r.method:10} {category:24} recall@{k} {m[f'recall@{k}']:.3f} mrr {m['mrr']:.3f}")
