"""Agent loops on BFCL v4 multi-turn (dev half): is the next tool on offer at every step?

    python benchmarks/agent_loop_benchmark.py [--data ../shared/benchmarks] [--limit N] [--variants all|default|caching]
        [--framework semantic-kernel|agent-framework] [--co-usage agent|conversation] [--model ID]

Every step is replayed through the real ``FilteredChatCompletion`` around a real
``OpenAIChatCompletion`` on a recording transport (the same path as ``sk-toolfilter eval
--conversations``); each conversation grows one ``ChatHistory``. Prints, per configuration: step
recall (all, first step of a turn, later steps), turn completeness, mean tools and tool-schema
tokens per request (discovery tools included), the share of requests whose tools list is the previous
request's and tool tokens as billed with OpenAI's prompt caching (cached prefix at 50 %:
``sk_toolfilter.measure.caching``; ``--variants caching`` compares fresh and sticky lists), and
selection time per request; the base category
separately, because long_context conversations repeat the user turns of their base twin and the
co-usage learner has seen those turns by then. ``--co-usage conversation`` starts every conversation
with no co-usage: no other conversation of the set (a twin included) can help it.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sk_toolfilter.agents.agent_file import FRAMEWORKS, Framework
from sk_toolfilter.measure.conversations import CO_USAGE_SCOPES, CoUsageScope, replay_catalog_conversations

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "no agent-loop policy (query only)": {"agent_loop": {"enabled": False}},
    "- request parts": {"agent_loop": {"split_request": False}},
    "- co-usage": {"agent_loop": {"co_usage": False}},
    "- lookups": {"agent_loop": {"lookup_tools": False}},
    "- turn tools": {"agent_loop": {"keep_turn_tools": False}},
    "- previous-turn tools": {"agent_loop": {"previous_turn_tools": False}},
    "budget 8": {"agent_loop": {"max_tools": 8}},
    "sticky lists": {"selection_mode": "sticky"},
}


async def run(
    data: Path,
    overrides: dict[str, Any],
    limit: int | None,
    keep: Callable[[str], bool] | None = None,
    framework: Framework = "semantic-kernel",
    co_usage_scope: CoUsageScope = "agent",
) -> dict[str, dict[str, float]]:
    """Figures of one configuration (an agent file's ``tool_filtering`` block) on BFCL multi-turn."""
    folder = data / "bfcl_multiturn"
    return await replay_catalog_conversations(
        folder, overrides, limit=limit, keep=keep, framework=framework, co_usage_scope=co_usage_scope
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "benchmarks"))
    parser.add_argument("--limit", type=int, help="first N conversations only")
    parser.add_argument("--variants", default="all", choices=["all", "default", "caching"])
    parser.add_argument(
        "--framework",
        default="semantic-kernel",
        choices=FRAMEWORKS,
        help="replay through the SK wrapper or Agent Framework's chat middleware",
    )
    parser.add_argument(
        "--co-usage",
        default="agent",
        choices=CO_USAGE_SCOPES,
        help="co-usage shared by all conversations (a long-running agent) or started empty for each one",
    )
    parser.add_argument("--model", help="embedding.model (default: the shipped model)")
    args = parser.parse_args()
    names = {"all": list(VARIANTS), "default": ["default"], "caching": ["default", "sticky lists"]}[args.variants]
    print(
        "| configuration | step recall | first step | later steps | turn complete | base: step / turn "
        "| tools / request | tool tokens / request | tools list kept | billed with caching | select p50 / p95 ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        overrides = VARIANTS[name] | ({"embedding": {"model": args.model}} if args.model else {})
        figures = asyncio.run(
            run(Path(args.data), overrides, args.limit, framework=args.framework, co_usage_scope=args.co_usage)
        )
        a, b = figures["all"], figures.get("base", figures["all"])
        print(
            f"| {name} | {a['step_recall']:.3f} | {a['first_step_recall']:.3f} | {a['later_step_recall']:.3f} "
            f"| {a['turn_complete']:.3f} | {b['step_recall']:.3f} / {b['turn_complete']:.3f} | {a['mean_tools']:.2f} "
            f"| {a['mean_tool_tokens']:.0f} | {a['prefix_kept']:.0%} | {a['mean_billed_tool_tokens']:.0f} "
            f"| {a['p50_ms']:.1f} / {a['p95_ms']:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
