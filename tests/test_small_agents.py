"""An agent whose tools all fit the budget sends exactly what plain Semantic Kernel sends, and the
report says why; ``max_tools_total`` is a hard cap that counts pinned tools (HoloDeck's top_k)."""

import logging

import pytest
import yaml

from sk_toolfilter import ConfigError, ToolFilterConfig, create_tool_filter
from sk_toolfilter.agents.agent import open_toolset
from sk_toolfilter.agents.agent_file import SampleQuery, parse_agent
from sk_toolfilter.config import ToolOverride
from sk_toolfilter.measure.report import build_token_report, render_terminal
from tests.conftest import build_demo_kernel

DISCOVERY = {"ToolSearch-search_tools", "ToolSearch-describe_tool"}


def one_plugin_agent(tmp_path, **filtering):
    return parse_agent(
        {
            "name": "router",
            "model": {"provider": "openai", "name": "gpt-4o-mini"},
            "instructions": "Route tickets.",
            "tools": [{"type": "plugin", "name": "Time", "import": "sk_toolfilter.demo.timetools:TimePlugin"}],
            "tool_filtering": {"search_method": "bm25", "top_k": 20, **filtering},
        },
        base_dir=tmp_path,
    )


async def test_when_every_tool_fits_the_budget_no_discovery_tool_is_added(tmp_path):
    kernel = build_demo_kernel(str(tmp_path))
    for name in [p for p in kernel.plugins if p != "Time"]:
        del kernel.plugins[name]
    everything = {f"Time-{f}" for f in kernel.plugins["Time"].functions}
    manager = await create_tool_filter(kernel, ToolFilterConfig(search_method="bm25", top_k=len(everything)))
    for request in ["what time is it in Tokyo?", "hi", "send an email"]:
        assert set(await manager.filter_tools(request)) == everything
    # One tool more than the budget: filtering pays again, and discovery reaches the rest.
    small = await create_tool_filter(kernel, ToolFilterConfig(search_method="bm25", top_k=len(everything) - 1))
    assert set(await small.filter_tools("what time is it in Tokyo?")) >= DISCOVERY


async def test_the_report_of_a_small_agent_saves_nothing_and_says_why(tmp_path):
    spec = one_plugin_agent(tmp_path)
    async with await open_toolset(spec) as tools:
        report = await build_token_report(
            spec, tools.kernel, tools.manager, [SampleQuery(query="what time is it?"), SampleQuery(query="hello")]
        )
    totals = report.totals
    assert totals["tools_tokens_on"] == totals["tools_tokens_off"] and totals["saved_percent"] == 0.0
    assert "Nothing to save" in render_terminal(report)


async def test_max_tools_total_counts_pins_and_drops_the_lowest_ranked_first(tmp_path):
    kernel = build_demo_kernel(str(tmp_path))
    pins = ["Time-today"]
    config = ToolFilterConfig(search_method="bm25", top_k=5, similarity_threshold=0.0, always_include=pins)
    uncapped = await (await create_tool_filter(kernel, config)).filter_tools("send an email to bob")
    capped_manager = await create_tool_filter(kernel, config.model_copy(update={"max_tools_total": 4}))
    capped = await capped_manager.filter_tools("send an email to bob")
    assert len(capped) == 4 and "Time-today" in capped and set(capped) >= DISCOVERY
    assert capped[0] == uncapped[0] == "Messaging-send_email"
    cut = [d for d in await capped_manager.explain("send an email to bob") if "max_tools_total=4" in d.reason]
    assert cut and not any(d.kept for d in cut)
    with pytest.raises(ValueError, match="max_tools_total=1 is below the 2 tools this configuration pins"):
        ToolFilterConfig(always_include=["Time-today", "Time-now"], max_tools_total=1)


def test_the_cap_check_counts_every_pin_the_configuration_writes():
    overrides = {f"Time-t{i}": {"always_include": True} for i in range(6)}
    with pytest.raises(ValueError, match="max_tools_total=3 is below the 6 tools"):
        ToolFilterConfig(tools_overrides=overrides, max_tools_total=3)
    with pytest.raises(ValueError, match="below the 7 tools"):  # always_include and overrides together, once each
        ToolFilterConfig(always_include=["Time-t0", "Math-add"], tools_overrides=overrides, max_tools_total=3)
    config = ToolFilterConfig(max_tools_total=3)
    with pytest.raises(ValueError, match="max_tools_total=3"):  # a copy is checked like a file (model_copy is not)
        config.updated(tools_overrides=overrides)


async def test_pins_from_every_source_obey_the_hard_cap_and_the_warning_names_the_source(tmp_path, caplog):
    kernel = build_demo_kernel(str(tmp_path))
    pinned_by_source = {
        name: ToolOverride(always_include=True, pinned_by="MCP server 'Files' (a load hint in the tool's _meta)")
        for name in [f"{p}-{f}" for p, plugin in kernel.plugins.items() for f in plugin.functions]
    }
    config = ToolFilterConfig(
        search_method="bm25", always_include=["Time-today"], tools_overrides=pinned_by_source, max_tools_total=3
    )
    manager = await create_tool_filter(kernel, config)
    with caplog.at_level(logging.WARNING):
        for query in ("hi", "send an email to bob"):
            sent = await manager.filter_tools(query)
            assert len(sent) == 3 and sent[0] == "Time-today"  # the file's own pin first
    warnings = [r.getMessage() for r in caplog.records if "max_tools_total=3" in r.getMessage()]
    assert len(warnings) == 1 and "MCP server 'Files'" in warnings[0]
    cut = [d for d in await manager.explain("hi") if "more tools are pinned than it holds" in d.reason]
    assert cut and not any(d.kept for d in cut) and "MCP server 'Files'" in cut[0].reason


def test_a_holodeck_top_k_keeps_its_meaning_pins_included(tmp_path, caplog):
    data = {
        "name": "holodeck-agent",
        "model": {"provider": "openai", "name": "gpt-4o-mini", "temperature": 0.2},
        "instructions": {"inline": "Help."},
        "tools": [{"type": "plugin", "name": "Time", "import": "sk_toolfilter.demo.timetools:TimePlugin"}],
        "tool_filtering": {"top_k": 3},
        "test_cases": [{"input": "what time is it?"}],
    }
    with caplog.at_level(logging.WARNING):
        spec = parse_agent(yaml.safe_load(yaml.safe_dump(data)), base_dir=tmp_path)
    assert spec.tool_filtering.max_tools_total == 3
    own = parse_agent({**data, "instructions": "Help.", "test_cases": None}, base_dir=tmp_path)
    assert own.tool_filtering.max_tools_total is None  # our own format: top_k ranked tools, pins on top
    with pytest.raises(ConfigError):
        parse_agent({**data, "tool_filtering": {"top_k": 3, "max_tools_total": 0}}, base_dir=tmp_path)
