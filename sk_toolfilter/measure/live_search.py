"""``sk-toolfilter report AGENT --provider-search --live``: the input tokens the provider bills for each
sample query sent three ways — every tool loaded (filtering off), the filter's selection (on), and the
selection loaded with every other usable tool deferred beside ``tool_search`` (provider search) — read
from the responses' ``usage`` (OpenAI Responses API, the agent file's model: gpt-5.4 or later).

It calls the real endpoint (three short requests per query, ``tool_choice: none``, at most 16 output
tokens, ``store: false``), so it costs money and needs the key the ``model:`` block names. These are
the measured figures; ``report --provider-search`` without ``--live`` gives the documented estimate.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sk_toolfilter.selection.offer import search_offer

if TYPE_CHECKING:
    from semantic_kernel import Kernel

    from sk_toolfilter.agents.agent_file import AgentSpec, SampleQuery
    from sk_toolfilter.basics.progress import ProgressCallback
    from sk_toolfilter.selection.manager import ToolFilterManager

MODES = ("off", "on", "provider_search")


@dataclass
class LiveQuery:
    query: str
    input_tokens: dict[str, int | None]
    """Billed input tokens per mode (None: the response reported none)."""
    cached_tokens: dict[str, int | None]
    loaded: list[str]
    deferred: int


def live_client(spec: AgentSpec) -> Any:
    """The agent file's model as Agent Framework's Responses client with provider tool search (a model
    without tool search is a ConfigError naming it)."""
    from sk_toolfilter.agent_framework.provider_search import ToolSearchOpenAIChatClient
    from sk_toolfilter.agents.agent import openai_client

    return ToolSearchOpenAIChatClient(model=spec.model.name, async_client=openai_client(spec.model))


async def measure_live(
    spec: AgentSpec,
    kernel: Kernel,
    manager: ToolFilterManager,
    queries: Sequence[SampleQuery],
    client: Any,
    progress: ProgressCallback | None = None,
) -> list[LiveQuery]:
    """Each query sent off / on / with provider search through `client`; the billed input tokens."""
    from agent_framework import Message

    from sk_toolfilter.agent_framework.messages import to_chat_history
    from sk_toolfilter.agent_framework.provider_search import mark_deferred
    from sk_toolfilter.agent_framework.setup import kernel_filter

    discovery = set(manager.discovery_names)
    tools = [
        t for t in kernel_filter(manager, kernel).tools if t.name not in discovery and not manager.is_hidden(t.name)
    ]
    by_name = {t.name: t for t in tools}
    rows = []
    for done, item in enumerate(queries, 1):
        messages = [Message(role="user", contents=[item.query])]
        offer = await manager.offer(to_chat_history(messages), list(by_name))
        plan = search_offer(manager, list(by_name), list(offer.names), manager.config.provider_search)
        sent = {
            "off": (tools, ()),
            "on": ([by_name[n] for n in plan.names], ()),
            "provider_search": ([by_name[n] for n in plan.on_wire], plan.deferred),
        }
        tokens: dict[str, int | None] = {}
        cached: dict[str, int | None] = {}
        for mode in MODES:
            chosen, deferred = sent[mode]
            mark_deferred(deferred, chosen)
            options = {"tools": chosen, "tool_choice": "none", "max_tokens": 16, "store": False}
            usage = (await client.get_response(messages, options=options)).usage_details or {}
            tokens[mode], cached[mode] = usage.get("input_token_count"), usage.get("cache_read_input_token_count")
        mark_deferred((), ())
        rows.append(LiveQuery(item.query, tokens, cached, list(plan.names), len(plan.deferred)))
        if progress is not None:
            progress(done, len(queries))
    return rows


def render_live(rows: Sequence[LiveQuery], model: str) -> str:
    """The measured table and totals (Markdown)."""
    totals = {m: sum(r.input_tokens[m] or 0 for r in rows) for m in MODES}
    missing = sum(r.input_tokens[m] is None for r in rows for m in MODES)
    lines = [
        f"Measured with {model} (OpenAI Responses API, billed input tokens from each response's usage):",
        "",
        "| query | off | on | provider search | loaded | deferred |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r.query.replace('|', '/')} | {r.input_tokens['off']} | {r.input_tokens['on']} | "
            f"{r.input_tokens['provider_search']} | {', '.join(r.loaded) or '(none)'} | {r.deferred} |"
            for r in rows
        ),
        f"| **total** | {totals['off']:,} | {totals['on']:,} | {totals['provider_search']:,} | | |",
    ]
    if missing:
        lines += ["", f"{missing} responses reported no input tokens (counted as 0)."]
    return "\n".join(lines) + "\n"


def write_live(rows: Sequence[LiveQuery], model: str, out_dir: str | Path) -> Path:
    """``live.json`` and ``live.md`` in `out_dir`; returns the Markdown file."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "live.json").write_text(json.dumps({"model": model, "queries": [asdict(r) for r in rows]}, indent=2) + "\n")
    (out / "live.md").write_text(render_live(rows, model))
    return out / "live.md"
