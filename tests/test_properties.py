"""Property-based tests: any query, any tool metadata, any config — no crash, clear errors."""

import asyncio

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sk_toolfilter import ConfigError, ToolFilterConfig, ToolFilterManager, ToolIndex
from sk_toolfilter.agents.agent_file import parse_agent
from sk_toolfilter.retrieval.metadata import ParameterMetadata, ToolMetadata
from sk_toolfilter.retrieval.text import tokenize
from tests.conftest import HashEmbedder

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

identifiers = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,20}", fullmatch=True)
texts = st.text(max_size=300)


@st.composite
def catalogs(draw):
    n = draw(st.integers(min_value=0, max_value=25))
    tools, seen = [], set()
    for _ in range(n):
        plugin, name = draw(identifiers), draw(identifiers)
        if f"{plugin}-{name}" in seen:
            continue
        seen.add(f"{plugin}-{name}")
        params = tuple(
            ParameterMetadata(draw(identifiers), "str", draw(texts), draw(st.booleans()))
            for _ in range(draw(st.integers(0, 4)))
        )
        description = draw(st.one_of(st.just(""), texts, texts.map(lambda s: s * 40)))
        tools.append(ToolMetadata(plugin, name, f"{plugin}-{name}", description, params))
    return tools


def run(coro):
    return asyncio.run(coro)


@SETTINGS
@given(catalog=catalogs(), query=st.one_of(texts, st.text(min_size=1, max_size=40).map(lambda s: s * 2500)))
def test_any_query_on_any_catalog_returns_real_names(catalog, query):
    async def check():
        index = await ToolIndex.build(catalog, HashEmbedder())
        for method in ("bm25", "semantic", "hybrid"):
            manager = ToolFilterManager(index, ToolFilterConfig(search_method=method))
            names = await manager.filter_tools(query)
            assert len(names) <= 5 and set(names) <= set(index.names)
            assert len(set(names)) == len(names)

    run(check())


@SETTINGS
@given(text=st.text(max_size=500))
def test_tokenizer_never_fails_and_yields_lowercase_tokens(text):
    tokens = tokenize(text)
    assert all(t and t == t.lower() for t in tokens)


values = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10), st.floats(allow_nan=True), texts, st.lists(texts, max_size=3)
)


@SETTINGS
@given(block=st.dictionaries(st.sampled_from([*ToolFilterConfig.model_fields, "bogus", "topk"]), values, max_size=5))
def test_any_tool_filtering_block_is_valid_or_a_clear_config_error(block):
    try:
        config = ToolFilterConfig.from_mapping(block)
    except ConfigError as exc:
        message = str(exc)
        assert message.startswith("tool_filtering") and "Traceback" not in message
        for line in message.splitlines():
            assert line.startswith("tool_filtering")
    else:
        assert config.top_k > 0 and 0 <= config.similarity_threshold <= 1


@SETTINGS
@given(raw=st.text(max_size=200))
def test_any_yaml_text_is_an_agent_or_a_clear_config_error(raw):
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError:
        return
    try:
        parse_agent(data, source="agent.yaml")
    except ConfigError as exc:
        assert str(exc).startswith("agent.yaml")


def test_duplicate_function_names_across_plugins_are_distinct_tools():
    tools = [
        ToolMetadata("A", "search", "A-search", "Search A"),
        ToolMetadata("B", "search", "B-search", "Search B"),
    ]
    index = run(ToolIndex.build(tools))
    assert index.names == ["A-search", "B-search"]
