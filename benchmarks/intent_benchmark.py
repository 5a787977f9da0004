"""Intent coverage and small talk on the dev halves: recall@5 and complete@5 by how many tools a
request needs, how often a request that needs no tool sends a catalog tool, and how many dev requests
(each needs a tool) are judged small talk and sent none.

    python benchmarks/intent_benchmark.py [--data ../shared/benchmarks] [--model minilm-l6-tools-v1]
        [--datasets metatool,bfcl,seal_tools,livemcpbench]

Three configurations run the real pipeline (``rank_tools`` and the cut): the previous behaviour
(requests split only from 3 sentences, no small-talk check), the default, and the default without
intent coverage. Small talk is measured on lists of 20 requests each: ``TUNING`` (used to
choose ``no_tool_margin`` and the small-talk descriptions), ``HELD_OUT`` and ``HELD_OUT_2`` (held
out when the margin was chosen; their misses were read when the subjectless rule was designed) and
``FRESH`` (written after that rule was final, before it was measured), ``FRESH_2`` (written before
closed-class words were set aside, measured before and after), ``FRESH_3`` and ``FRESH_4`` (written
before the exemplars; FRESH_3's misses were read while they were built, FRESH_4 was measured only
once they were final), ``FRESH_5`` (written before longer questions about the assistant were judged
by the examples; counted before and after, its misses not read until stop 45), ``FRESH_6`` (written at
the start of stop 45, before FRESH_5's misses were read). None of these requests is an exemplar.

With ``--clinc PATH`` (a clone of clinc/oos-eval) it also measures on CLINC150's validation and test
splits — the exemplars come from its train split only — with and without the exemplars: how often
its 15 conversational intents send a catalog tool, and how often its other intents' requests (each
needs a tool) are judged small talk. Tool and query embeddings are cached on disk, so re-runs only
pay for ranking.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np

from sk_toolfilter import LocalEmbeddingGenerator, ToolFilterConfig, ToolIndex
from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.measure.evaluation import load_queries
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.cutoff import apply_cutoff
from sk_toolfilter.retrieval.embeddings import cached
from sk_toolfilter.retrieval.search import rank_tools
from sk_toolfilter.retrieval.small_talk import SMALL_TALK_EXAMPLES

TUNING = list(SMALL_TALK_EXAMPLES)
HELD_OUT = ["hey there", "thx", "what are you able to help with?", "good night", "okay cool", "nice!", "are you a bot?",
            "see you later", "perfect, that's it", "no thanks", "hello, how's it going?", "awesome", "cheers", "I see",
            "what's up", "sure", "goodbye!", "much appreciated", "who made you?", "wow"]  # fmt: skip
HELD_OUT_2 = ["hiya", "thanks a ton", "you're the best", "good afternoon", "alright", "ok thanks, bye",
              "what's your name?", "how do you work?", "are you there?", "nope", "yep", "haha",
              "thank you, that's helpful", "take care", "hello again", "what are you?", "can you hear me?",
              "never mind, thanks", "sounds good", "ok got it"]  # fmt: skip
FRESH = ["hey!", "thank you!", "what else can you do?", "ok, bye", "how are you doing?", "no, that's all", "yes",
         "are you still there?", "good evening!", "great, thanks a lot", "who are you exactly?", "can you help?",
         "sorry, never mind", "that's it", "hello?", "okay", "thanks, bye!", "what is this?", "all good",
         "nothing else"]  # fmt: skip
# Written before closed-class words (indefinite pronouns, a few adverbs) were set aside, and measured
# before and after that change.
FRESH_2 = ["morning!", "thanks so much", "is there anything else you can help with?", "bye for now",
           "how's your day?", "no, I'm good", "yeah", "hold on a second", "good job", "that's all for now",
           "who built this?", "are you real?", "oops, my mistake", "hmm", "cool, thanks", "what do you think?",
           "let me think about it", "you're funny", "nah", "see ya"]  # fmt: skip
# Written before the small-talk descriptions were extended to the dialogue acts of ISO 24617-2 (time
# management, apologies and self-correction, questions about the assistant), measured before and after.
FRESH_3 = ["hey, how's it going?", "thanks, that really helped", "wait a minute", "sorry, wrong window",
           "what model are you?", "who created you?", "good evening", "talk to you later", "lmao",
           "that's not what I meant", "can we start over?", "you there?", "never mind, I figured it out",
           "nice one", "are you human?", "appreciate it!", "one sec", "cheers mate", "how old are you?",
           "have a nice day"]  # fmt: skip
# Written with FRESH_3, measured only after the change FRESH_3's misses were read for: the clean figure.
FRESH_4 = ["yo", "thank you kindly", "brb", "my bad", "who are you working for?", "are you an AI?",
           "good night, talk tomorrow", "that makes sense", "hang on", "welcome back", "please hold",
           "sorry about that", "you rock", "what's your purpose?", "where are you from?", "fine, thanks",
           "I'm back", "forget it", "whoops", "what version are you?"]  # fmt: skip
# Written before the graded rule for longer questions about the assistant (stop 44), measured once after it.
FRESH_5 = ["hi again, how have you been?", "thanks, you saved me a lot of time", "what languages do you speak?",
           "do you ever get tired?", "ok perfect", "sorry, I typed that by accident", "bye, have a great weekend",
           "are you smarter than me?", "what's your favorite color?", "I don't need anything right now",
           "nope, that's everything", "do you like music?", "wait, let me check something first",
           "you are very helpful", "good morning, how are you today?", "can I ask you something personal?",
           "that was quick, thanks", "hmm, not sure", "do you dream?", "later!"]  # fmt: skip
# Written at the start of stop 45, before FRESH_5's misses were read: the clean list for what follows.
FRESH_6 = ["hello there!", "thanks a million", "what can you help me with today?", "goodbye, thanks for everything",
           "how's everything going?", "no that's fine", "ok sounds great", "much obliged, friend",
           "are you a real person?", "what should I call you?", "cool beans", "just saying hi",
           "that's all I needed", "you've been great", "hmm interesting", "let's stop here", "see you tomorrow",
           "can you tell me about yourself?", "what are your capabilities?", "good to know, thanks"]  # fmt: skip
SMALL_TALK_LISTS = {
    "tuning": TUNING,
    "held out": HELD_OUT,
    "held out 2": HELD_OUT_2,
    "fresh": FRESH,
    "fresh 2": FRESH_2,
    "fresh 3": FRESH_3,
    "fresh 4": FRESH_4,
    "fresh 5": FRESH_5,
    "fresh 6": FRESH_6,
}

CONFIGS: dict[str, dict[str, Any]] = {
    "before (sentences from 3, no small-talk check)": {"no_tool_margin": None, "_steps": False},
    "default": {},
    "default without intent coverage": {"split_queries": False},
}


async def sends_a_tool(index: ToolIndex, request: str, config: ToolFilterConfig) -> bool:
    ranking = await rank_tools(index, request, config, limit=20)
    return any(d.kept for d in apply_cutoff(ranking.tools, config, no_tool_reason=ranking.no_tool_reason))


async def measure(index: ToolIndex, queries: list[Any], config: ToolFilterConfig) -> dict[str, Any]:
    rows, judged_small_talk = [], 0
    for query in queries:
        ranking = await rank_tools(index, query.query, config, limit=10)
        judged_small_talk += ranking.no_tool_reason is not None
        top5 = {t.full_name for t in ranking.tools[:5]}
        gold = set(query.gold)
        rows.append((len(gold), len(gold & top5) / len(gold), float(gold <= top5)))
    table = np.array(rows)
    by_need = {}
    for need, label in ((1, "1"), (2, "2"), (3, "3"), (4, "4+")):
        chosen = table[:, 0] == need if need < 4 else table[:, 0] >= 4
        if chosen.any():
            by_need[label] = (float(table[chosen, 1].mean()), float(table[chosen, 2].mean()), int(chosen.sum()))
    small_talk = [sum([await sends_a_tool(index, r, config) for r in rs]) for rs in SMALL_TALK_LISTS.values()]
    return {
        "recall@5": float(table[:, 1].mean()),
        "complete@5": float(table[:, 2].mean()),
        "by_need": by_need,
        "small_talk": small_talk,
        "judged_small_talk": judged_small_talk,
    }


def config_for(settings: dict[str, Any]) -> ToolFilterConfig:
    return ToolFilterConfig.model_validate({k: v for k, v in settings.items() if not k.startswith("_")})


def read_clinc(clone: Path) -> dict[str, dict[str, list[str]]]:
    """CLINC150's validation and test splits at the exemplars' pinned commit (read as the exemplar
    builder reads its train split): conversational requests, and the other intents' requests."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's training package
    from training import small_talk_exemplars as builder

    full = builder.read_clinc(clone)
    conversational, either = set(builder.NO_TOOL_INTENTS), set(builder.EITHER)
    return {
        split: {
            "small talk": [t for t, intent in full[split] if intent in conversational],
            "tool requests": [t for t, intent in full[split] if intent not in conversational | either],
        }
        for split in ("val", "test")
    }


def exemplars_enabled(enabled: bool) -> contextlib.AbstractContextManager[object]:
    """Turn the exemplar check off (the descriptions and the subjectless rule still judge)."""
    from sk_toolfilter.retrieval import small_talk

    off = patch.multiple(small_talk, EXEMPLAR_MARGIN=float("inf"), CLEAR_MARGIN=float("inf"))
    return contextlib.nullcontext() if enabled else off


async def clinc_rates(index: ToolIndex, clinc: dict[str, dict[str, list[str]]], config: ToolFilterConfig) -> list[str]:
    cells = []
    for requests in clinc.values():
        sent = [await sends_a_tool(index, r, config) for r in requests["small talk"]]
        rankings = [await rank_tools(index, r, config, limit=5) for r in requests["tool requests"]]
        judged = [ranking.no_tool_reason is not None for ranking in rankings]
        cells += [f"{np.mean(sent):.3f} ({len(sent)})", f"{np.mean(judged):.4f} ({len(judged)})"]
    return cells


async def main(data: Path, model: str, datasets: list[str], clinc_clone: Path | None = None) -> None:
    cache = EmbeddingCache(Path.home() / ".cache" / "sk-toolfilter" / "benchmarks")
    service = cached(LocalEmbeddingGenerator(model=model), cache)
    print(f"model {model}; recall@5 / complete@5 (queries) by tools needed; small talk: requests sending a tool\n")
    lists, sizes = " / ".join(SMALL_TALK_LISTS), list(SMALL_TALK_LISTS.values())
    columns = f"recall@5 | complete@5 | 1 | 2 | 3 | 4+ | small talk sending a tool ({lists}) | dev judged small talk"
    print(f"| dataset | configuration | {columns} |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    indexes: dict[str, ToolIndex] = {}
    for name in datasets:
        tools = [t for t, _ in load_catalog(data / name / "tools.jsonl")]
        queries = load_queries(data / name / "dev.jsonl")
        index = await ToolIndex.build(tools, service, cache=cache)
        for label, settings in CONFIGS.items():
            with steps_enabled(settings.get("_steps", True)):
                result = await measure(index, queries, config_for(settings))
            by_need = result["by_need"]
            cells = ["{:.3f} / {:.3f} ({})".format(*by_need[k]) if k in by_need else "–" for k in ("1", "2", "3", "4+")]
            print(
                f"| {name} | {label} | {result['recall@5']:.4f} | {result['complete@5']:.4f} | "
                + " | ".join(cells)
                + " | "
                + " / ".join(f"{n}/{len(r)}" for n, r in zip(result["small_talk"], sizes, strict=True))
                + f" | {result['judged_small_talk']}/{len(queries)} |",
                flush=True,
            )
        indexes[name] = index
    if clinc_clone is None:
        return
    clinc = read_clinc(clinc_clone)
    print("\nCLINC150 (the exemplars come from its train split): small talk sending a catalog tool, and requests")
    print("of its other intents (each needs a tool) judged small talk")
    print(
        "| dataset | exemplars | val: small talk sending a tool | val: tool requests judged small talk | test | test |"
    )
    print("|---|---|---|---|---|---|")
    for name, index in indexes.items():
        for enabled in (False, True):
            with exemplars_enabled(enabled):
                cells = await clinc_rates(index, clinc, ToolFilterConfig())
            print(f"| {name} | {'on (default)' if enabled else 'off'} | " + " | ".join(cells) + " |", flush=True)


def steps_enabled(enabled: bool) -> contextlib.AbstractContextManager[object]:
    """Turn step boundaries off for the 'before' row (the previous splitter: sentences only)."""
    from sk_toolfilter.retrieval import search, text

    def sentences_only(request: str, minimum: int) -> list[str]:
        return parts if len(parts := text.split_query_parts(request)) >= minimum else []

    return contextlib.nullcontext() if enabled else patch.object(search, "split_request_intents", sentences_only)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "benchmarks")
    parser.add_argument("--model", default="minilm-l6-tools-v1")
    parser.add_argument("--datasets", default="metatool,bfcl,seal_tools,livemcpbench")
    parser.add_argument("--clinc", type=Path, default=None, help="a clone of clinc/oos-eval (CLINC150)")
    args = parser.parse_args()
    asyncio.run(main(args.data, args.model, [d for d in args.datasets.split(",") if d], args.clinc))
