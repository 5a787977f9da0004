"""Learning from use, replayed: what the filter gains when it learns from the calls the agent makes.

    python benchmarks/learning_replay_benchmark.py [--multi training/out/multi] [--evidence DIR]

For each dev half (and each converted multi-tool catalog with ``--multi``): a random half of its
requests is traffic, the other half measured; 10 % and 50 % of all requests are served in order
through the product's :class:`~sk_toolfilter.retrieval.memory.LearningMemory` with the shipped rule, in
both label regimes — ``sent`` (the model called only the needed tools the filter had in its top 5)
and ``all`` (discovery found every miss) — over 3 seeds (``training.replay``). Prints cold and
learned recall@5 / complete@5 per set (means over the seeds), then the request path's p50 at 199
tools (metatool) without memory and with 20,000 remembered requests, in one run. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sk_toolfilter import LocalEmbeddingGenerator, ToolFilterConfig, ToolFilterManager, ToolIndex  # noqa: E402
from sk_toolfilter.agents.catalog import load_catalog  # noqa: E402
from sk_toolfilter.retrieval.memory import DEFAULT_RULE  # noqa: E402
from training.replay import collect, families, load_all, replay  # noqa: E402
from training.sources import BENCHMARKS  # noqa: E402

FRACTIONS = (0.1, 0.5)
REGIMES = ("sent", "all")
SEEDS = (0, 1, 2)


def replay_table(evidence_dir: Path) -> str:
    sets = load_all(evidence_dir)
    head = "| set | requests | cold recall@5 / complete@5 |"
    head += "".join(f" {int(f * 100)} % {r} |" for f in FRACTIONS for r in REGIMES)
    rows = [head, "|---" * (3 + len(FRACTIONS) * len(REGIMES)) + "|"]
    deltas: dict[str, list[float]] = {}
    for family, members in families(sets).items():
        for evidence in members:
            cells, cold = [], None
            for fraction in FRACTIONS:
                for regime in REGIMES:
                    outcomes = [replay(evidence, DEFAULT_RULE, fraction, seed, regime) for seed in SEEDS]
                    cold = (np.mean([o.cold_recall for o in outcomes]), np.mean([o.cold_complete for o in outcomes]))
                    learned = (np.mean([o.recall for o in outcomes]), np.mean([o.complete for o in outcomes]))
                    cells.append(f" {learned[0]:.3f} / {learned[1]:.3f} |")
                    deltas.setdefault(family, []).append(float(learned[1] - cold[1]))
            assert cold is not None
            rows.append(f"| {evidence.catalog} | {len(evidence)} | {cold[0]:.3f} / {cold[1]:.3f} |" + "".join(cells))
    worst = min(min(d) for d in deltas.values())
    mean = statistics.mean(statistics.mean(d) for d in deltas.values())
    rows.append("")
    rows.append(f"complete@5 change, families weighted equally: mean {mean:+.4f}, worst cell {worst:+.4f}")
    return "\n".join(rows)


async def request_path_ratio(remembered: int = 20_000, requests: int = 1000) -> str:
    """p50 of one request at 199 tools (metatool) through ``select_for_history``, in one run: without
    memory (learning off), with `remembered` requests (a full memory at the default ``max_requests``),
    and the full memory's steady state — every request a fresh history whose completed turn is new, so
    every request learns a row and evicts the oldest. The learning each request schedules runs beside
    it (timed apart, after the request returns)."""
    from semantic_kernel.contents import ChatHistory

    folder = BENCHMARKS / "metatool"
    tools = [t for t, _ in load_catalog(folder / "tools.jsonl")]
    rows = [json.loads(line) for line in (folder / "dev.jsonl").read_text().splitlines() if line.strip()]
    texts = [row["query"] for row in rows]

    async def manager(learning: dict[str, object]) -> ToolFilterManager:
        """A manager on an index of its own: each embeds every request it serves (no shared cache)."""
        return ToolFilterManager(
            await ToolIndex.build(tools, LocalEmbeddingGenerator()), ToolFilterConfig(learning=learning)
        )

    cold = await manager({"enabled": False})
    warm = await manager({"max_requests": remembered})
    full = await manager({"max_requests": remembered})
    index = warm.index
    rng = np.random.default_rng(0)
    # Past requests near the real ones (cosine ~0.9 to one of them) calling that request's tools, each
    # its own conversation: the memory earns trust, and the neighbour search and the reorder both do
    # their full work.
    real = np.concatenate([await index.embed_queries(texts[i : i + 256]) for i in range(0, len(texts), 256)])
    for manager in (warm, full):
        for i in range(remembered):
            noise = rng.standard_normal(real.shape[1]).astype(np.float32)
            vector = real[i % len(real)] + 0.3 * noise / np.linalg.norm(noise)
            manager.learning.memory.learn(vector, rows[i % len(rows)]["gold"], f"k{i}", at=time.time() - 1e5 + i)
        manager.learning.memory.settle()

    def request(number: int, text: str, learning: bool) -> ChatHistory:
        history = ChatHistory()
        if learning:  # a completed turn never seen before, then the request
            history.add_user_message(f"{texts[(number * 7 + 3) % len(texts)]} (turn {number})")
            history.add_assistant_message("Done.")
            history.messages[-1].items.insert(0, _call(rows[(number * 7 + 3) % len(rows)]["gold"][0], number))
        history.add_user_message(text)
        return history

    texts_timed = texts[:requests]
    for manager in (cold, warm, full):
        for number, text in enumerate(texts[:20]):
            await manager.select_for_history(request(-number - 1, text + " (warm-up)", manager is full))
    await full.learning.settled()
    times: dict[str, list[float]] = {"cold": [], "warm": [], "full": []}
    beside: list[float] = []
    pairs = (("cold", cold), ("warm", warm), ("full", full))
    for number, text in enumerate(texts_timed):  # rotating which goes first, so all see the same load
        order = pairs[number % 3 :] + pairs[: number % 3]
        for label, manager in order:
            history = request(number, text, label == "full")
            started = time.perf_counter()
            await manager.select_for_history(history)
            times[label].append((time.perf_counter() - started) * 1000)
            if label == "full":
                started = time.perf_counter()
                await full.learning.settled()
                beside.append((time.perf_counter() - started) * 1000)
    p50 = {k: statistics.median(v) for k, v in times.items()}
    memory = full.learning.memory
    return (
        f"request path p50 at {len(tools)} tools: {p50['cold']:.2f} ms without memory; {p50['warm']:.2f} ms with "
        f"{len(warm.learning.memory):,} remembered requests (ratio {p50['warm'] / p50['cold']:.2f}); full memory, "
        f"every request learning a new turn: {p50['full']:.2f} ms (ratio {p50['full'] / p50['cold']:.2f}; "
        f"{len(memory):,} rows, {memory.nbytes / 2**20:.1f} MB, trust {memory.trust:.2f}), and beside each request "
        f"its learning (embedding the turn, the insert) p50 {statistics.median(beside):.2f} ms"
    )


async def path_replay(name: str, folder: Path, fraction: float = 0.5, seeds: tuple[int, ...] = SEEDS) -> str:
    """The replay through the product's own request path, in arrival order: each traffic request in a
    fresh chat history (a stateless endpoint) is served by ``offer`` and its model calls the needed
    tools it was sent (``capture``, what the SK wrapper and the AF middleware do on a response); then
    each measured request is served and its sent list scored (recall@5 / complete@5 of what is sent,
    cold and learned). Twin conversations stay on one side (``training.replay.halves``)."""
    from semantic_kernel.contents import (
        AuthorRole,
        ChatHistory,
        ChatMessageContent,
        FunctionCallContent,
        FunctionResultContent,
    )

    from sk_toolfilter.measure.evaluation import LabelledQuery, load_queries
    from sk_toolfilter.measure.metrics import complete_at_k, recall_at_k
    from training.labelled_sets import turn_requests
    from training.replay import conversation_of, halves, related_ids

    tools = [t for t, _ in load_catalog(folder / "tools.jsonl")]
    index = await ToolIndex.build(tools, LocalEmbeddingGenerator())
    if name == "bfcl_multiturn":  # each turn in its conversation's history
        queries = [LabelledQuery(i, q, tuple(g)) for i, q, g in turn_requests(folder)]
    else:
        queries = [LabelledQuery(q.id, q.query, tuple(q.gold)) for q in load_queries(folder / "dev.jsonl")]
    ids = [q.id for q in queries]
    groups = related_ids(ids)
    talks: dict[str, ChatHistory] = {}
    cold_sums, sums, trust, rows = np.zeros(2), np.zeros(2), [], []
    for seed in seeds:
        traffic, measured = halves(len(queries), seed, groups)
        traffic = traffic[: round(fraction * len(queries))]
        cold = ToolFilterManager(index, ToolFilterConfig(learning={"enabled": False}))
        warm = ToolFilterManager(index, ToolFilterConfig())
        names = index.names

        def history(i: int, label: str, seed: int = seed) -> ChatHistory:
            """A fresh history per request; a multi-turn conversation's turns share one (per manager)."""
            item = ids[i]
            if "/" not in item:
                fresh = ChatHistory()
                fresh.add_user_message(queries[i].query)
                return fresh
            talk = talks.setdefault(f"{label}/{seed}/{conversation_of(item)}", ChatHistory())
            talk.add_user_message(queries[i].query)
            return talk

        def answered(request: ChatHistory, called: list[str]) -> None:
            """The turn's calls and answer, as the app appends them (the next turn's history shows them)."""
            for number, tool in enumerate(called):
                call = FunctionCallContent(id=f"c{len(request.messages)}_{number}", name=tool)
                request.add_message(ChatMessageContent(role=AuthorRole.ASSISTANT, items=[call]))
                result = FunctionResultContent(id=call.id, name=tool, result="ok")
                request.add_message(ChatMessageContent(role=AuthorRole.TOOL, items=[result]))
            request.add_assistant_message("Done.")

        for i in traffic.tolist():  # both serve the traffic (co-usage learns in both); only one learns from use
            for label, manager in (("cold", cold), ("warm", warm)):
                request = history(i, label)
                sent = (await manager.offer(request, names)).names
                called = [g for g in queries[i].gold if g in set(sent[:5])]
                manager.capture(request, called)
                answered(request, called)
            await warm.learning.settled()
        for i in measured.tolist():
            gold = list(queries[i].gold)
            for label, manager, total in (("cold", cold, cold_sums), ("warm", warm, sums)):
                request = history(i, label)
                sent = (await manager.offer(request, names)).names
                total += (recall_at_k(sent, gold, 5), complete_at_k(sent, gold, 5))
                answered(request, [])  # measured turns teach nothing (their calls are not shown)
        trust.append(warm.learning.memory.trust)
        rows.append(len(warm.learning.memory))
    n = sum(len(halves(len(queries), seed, groups)[1]) for seed in seeds)
    return (
        f"| {name} | {len(queries)} | {cold_sums[0] / n:.3f} / {cold_sums[1] / n:.3f} | {sums[0] / n:.3f} / "
        f"{sums[1] / n:.3f} | {np.mean(rows):.0f} | {np.mean(trust):.2f} |"
    )


def _call(name: str, number: int) -> object:
    from semantic_kernel.contents import FunctionCallContent

    return FunctionCallContent(id=f"call_{number}", name=name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--multi", type=Path, default=None, help="training.multi_tool_sets output")
    parser.add_argument("--evidence", type=Path, default=None, help="keep the first stage's evidence here")
    parser.add_argument("--request-path-only", action="store_true", help="only the request path's p50s")
    parser.add_argument("--path-replay", action="store_true", help="only the replay through the request path")
    args = parser.parse_args()
    if args.request_path_only:
        print(asyncio.run(request_path_ratio()))
        return 0
    if args.path_replay:
        print("| catalog | requests | sent r@5 / c@5, cold | learned (50 % traffic, sent labels) | rows | trust |")
        print("|---|---|---|---|---|---|")
        folders = {
            name: BENCHMARKS / name for name in ("metatool", "bfcl", "bfcl_multiturn", "seal_tools", "livemcpbench")
        }
        if args.multi is not None:
            folders.update({name: args.multi / name for name in ("apibank", "restbench_tmdb", "restbench_spotify")})
        for name, folder in folders.items():
            print(asyncio.run(path_replay(name, folder)), flush=True)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        evidence = args.evidence or Path(scratch)
        collect(BENCHMARKS, args.multi, evidence)
        print(f"Rule: {DEFAULT_RULE}\n")
        print(replay_table(evidence))
    print()
    print(asyncio.run(request_path_ratio()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
