"""Everything stays bounded: discovery answers, caches under endless re-indexing, demo math, names."""

import contextlib
import logging
import random

from hypothesis import given, settings, strategies as st
from semantic_kernel import Kernel
from semantic_kernel.functions import kernel_function

from sk_toolfilter import ToolFilterConfig, create_tool_filter
from sk_toolfilter.agents.agent_file import parse_agent
from sk_toolfilter.agents.json_schema import tool_parameters
from sk_toolfilter.agents.sources import add_sources
from sk_toolfilter.agents.tool_names import MAX_TOOL_NAME, function_name
from sk_toolfilter.demo.mathtools import MathPlugin
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.text import tokenize
from sk_toolfilter.selection.discovery import render_matches

_text = st.text(min_size=0, max_size=400)


@settings(max_examples=150, deadline=None)
@given(
    names=st.lists(st.text(st.characters(min_codepoint=48, max_codepoint=122), min_size=1, max_size=80), max_size=60),
    description=_text,
    query=st.text(max_size=3000),
    detail=st.sampled_from(["auto", "full", "summary", "names", "counts", "bogus"]),
    limit=st.one_of(st.none(), st.integers(-5, 500).map(str), st.text(max_size=5)),
    max_chars=st.integers(500, 3000),
)
def test_discovery_answers_never_exceed_max_chars_footer_included(names, description, query, detail, limit, max_chars):
    tools = [ToolMetadata(f"P{i % 7}", n, f"P{i % 7}-{n}", description * 3) for i, n in enumerate(names)]
    text, shown = render_matches(tools, query, detail, limit, max_chars)
    assert len(text) <= max_chars
    assert text.rstrip().endswith("]") or "[cut:" in text
    assert all(name in text for name in shown)  # what the footer promises is on the page


class HugePlugin:
    @kernel_function(description="Describe everything. " + "x" * 1_000_000)
    def everything(self, topic: str) -> str:
        return topic


async def test_describe_tool_of_a_one_megabyte_description_is_capped(demo_kernel):
    demo_kernel.add_plugin(HugePlugin(), "Huge")
    await create_tool_filter(demo_kernel, ToolFilterConfig(search_method="bm25"))
    answer = str(
        await demo_kernel.invoke(plugin_name="ToolSearch", function_name="describe_tool", name="Huge-everything")
    )
    assert len(answer) <= 6000 and answer.startswith("Huge-everything(topic: str)")
    missing = str(await demo_kernel.invoke(plugin_name="ToolSearch", function_name="describe_tool", name="x" * 100_000))
    assert len(missing) <= 6000


class Churn:
    """A plugin whose one tool changes its description on every re-index (a live MCP server, say)."""

    def __init__(self, n: int) -> None:
        @kernel_function(name="status", description=f"Report service status, revision {n}.")
        def status() -> str:
            return "ok"

        self.status = status


async def test_caches_stay_bounded_over_1500_reindexes(demo_kernel, hash_embedder, tmp_path):
    config = ToolFilterConfig(search_method="hybrid", embedding={"cache_dir": str(tmp_path / "c")})
    manager = await create_tool_filter(demo_kernel, config, embedding_service=hash_embedder)
    manager._upkeep.embedding_cache = EmbeddingCache(tmp_path / "c", max_entries=200)
    for n in range(1500):
        demo_kernel.add_plugin(Churn(n), "Ops")
        await manager.refresh()
    assert len(manager.index.bm25.token_cache) == len(manager.index)
    assert len(manager.index.vectors_by_text()) == len(manager.index)
    assert all(len(entries) <= 200 for entries in manager._upkeep.embedding_cache._memory.values())
    assert "Ops-status" in (await manager.select("report the service status")).names


def test_demo_calculate_bounds_its_work():
    math = MathPlugin()
    assert math.calculate("9**9**9") == "cannot evaluate: the result would be too large"
    assert math.calculate("(3 + 4) * 2 ** 3") == "56"
    assert math.calculate("1" * 500).startswith("cannot evaluate: expressions are limited")
    assert math.calculate("10**99 * 10**99").startswith("cannot evaluate: numbers beyond")


def test_long_function_names_are_shortened_stably_with_a_warning(caplog):
    raw = "get_the_current_weather_forecast_for_a_city_and_every_district_within_it"
    name = function_name("WeatherService", raw)
    assert len(f"WeatherService-{name}") <= MAX_TOOL_NAME
    assert name == function_name("WeatherService", raw)  # stable across runs
    assert function_name("WeatherService", raw, {name}) != name  # unique within a plugin
    assert "is called" in caplog.text and raw in caplog.text


def test_parameters_that_collide_once_cleaned_are_renamed_not_merged(caplog):
    with caplog.at_level(logging.WARNING):
        params = tool_parameters({"properties": {"a.b": {"type": "string"}, "a_b": {"type": "integer"}}}, "P-f")
    assert [p["name"] for p in params.dicts] == ["a_b", "a_b_"]
    assert params.original_names == {"a_b": "a.b", "a_b_": "a_b"}
    assert "parameter 'a_b' of P-f is sent as 'a_b_'" in caplog.text  # the collision is a warning


async def test_a_catalog_with_long_names_registers_names_the_api_accepts(tmp_path):
    catalog = tmp_path / "tools.jsonl"
    long_name = "x" * 90
    catalog.write_text(f'{{"name": "{long_name}", "description": "A tool."}}\n{{"name": "{long_name}y"}}\n')
    spec = parse_agent({"name": "a", "tools": [{"type": "catalog", "name": "cat", "path": str(catalog)}]})
    kernel = Kernel()
    await add_sources(kernel, spec, contextlib.AsyncExitStack())
    names = [f.fully_qualified_name for f in kernel.plugins["cat"]]
    assert len(names) == 2 and len(set(names)) == 2 and all(len(n) <= MAX_TOOL_NAME for n in names)


# --- text caches are bounded in bytes and never keep a long run --------------------------------------
def test_long_unbroken_runs_in_requests_are_never_kept_by_the_tokenizer_caches():
    from sk_toolfilter.retrieval import names, text

    caches = [text._run_tokens, text._normalize_word, text._stem, text.humanize_identifier, names._is_compound]
    secret = "sk" + "Q" * 19_998  # a pasted token: one run of letters
    rng = random.Random(7)
    for i in range(300):
        run = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(2_000)) + str(i)
        tokenize(f"please summarize {run} for me")
    tokenize(f"my key is {secret}")
    assert tokenize(f"my key is {secret}") == tokenize(f"my key is {secret}")  # still tokenized, just not kept
    for cache in caches:
        assert all(len(k[0] if isinstance(k, tuple) else k) <= cache.max_key_chars for k in cache._entries)
        assert cache.bytes <= cache.max_bytes


def test_a_text_cache_holds_at_most_its_bytes_whatever_the_number_of_distinct_words():
    from sk_toolfilter.basics.text_cache import BoundedTextCache

    cache = BoundedTextCache(lambda word: tuple(word), max_bytes=200_000)
    for i in range(20_000):
        assert cache(f"word{i:05d}") == tuple(f"word{i:05d}")
    assert 0 < cache.bytes <= 200_000 and len(cache) < 20_000
    assert "word19999" in cache and "word00000" not in cache  # the oldest went first
