"""Property-based tests: any query, any tool metadata, any config — no crash, clear errors."""

import asyncio

import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from sk_toolfilter import ConfigError, ToolFilterConfig, ToolFilterManager, ToolIndex
from sk_toolfilter.agents.agent_file import parse_agent
from sk_toolfilter.retrieval.metadata import ParameterMetadata, ToolMetadata
from sk_toolfilter.retrieval.text import split_request_clauses, split_request_intents, tokenize
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
@given(
    request=st.lists(
        st.one_of(texts, st.sampled_from([", ", " and ", ", then ", " then ", ". ", "; ", "\n", "lock the doors"])),
        max_size=12,
    ).map("".join)
)
def test_the_needs_of_any_request_are_non_empty_pieces_of_it_in_order(request):
    assert_in_order_pieces(split_request_clauses(request), request)


@SETTINGS
@given(
    request=st.lists(
        st.one_of(
            texts,
            st.sampled_from([", then ", " and also ", ", also ", ". Also, ", ". ", "\n", "  ", "book a flight"]),
        ),
        max_size=12,
    ).map("".join)
)
def test_the_intents_of_any_request_are_non_empty_pieces_of_it_in_order(request):
    assert_in_order_pieces(split_request_intents(request), request)


def assert_in_order_pieces(pieces: list[str], request: str) -> None:
    """Each piece is non-empty, stripped, and found after the previous one in the request (its runs
    of whitespace read as one space)."""
    single_spaced = " ".join(request.split())
    position = 0
    for piece in pieces:
        assert piece and piece == piece.strip()
        found = single_spaced.find(piece, position)
        assert found >= 0, (request, piece)
        position = found + len(piece)


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


any_unicode = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=200)


@SETTINGS
@given(query=st.one_of(any_unicode, any_unicode.map(lambda s: (s or "x") * 3000)))
def test_any_unicode_query_even_with_lone_surrogates_is_ranked_semantically(query):
    from sk_toolfilter.retrieval.search import rank_tools

    async def check():
        tools = [ToolMetadata("Mail", "send_email", "Mail-send_email", "Send an email to someone.")]
        index = await ToolIndex.build(tools, HashEmbedder())
        ranking = await rank_tools(index, query, ToolFilterConfig(search_method="semantic"))
        assert ranking.fallback_reason is None
        assert not index.circuit.is_open

    run(check())


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=12,
)


@SETTINGS
@given(
    names=st.lists(st.text(min_size=1, max_size=90), min_size=1, max_size=6, unique=True),
    schemas=st.lists(
        st.one_of(
            json_values,
            st.dictionaries(st.text(max_size=12), json_values, max_size=4).map(
                lambda props: {"type": "object", "properties": props, "required": list(props)[:1]}
            ),
        ),
        min_size=6,
        max_size=6,
    ),
)
def test_any_catalog_names_and_schemas_register_as_valid_tools_or_a_clear_error(tmp_path_factory, names, schemas):
    import contextlib
    import json

    from semantic_kernel import Kernel
    from semantic_kernel.connectors.ai.function_calling_utils import kernel_function_metadata_to_function_call_format

    from sk_toolfilter.agents.sources import add_sources
    from sk_toolfilter.agents.tool_names import MAX_TOOL_NAME

    path = tmp_path_factory.mktemp("cat") / "tools.jsonl"
    records = [{"name": n, "description": "d", "parameters": s} for n, s in zip(names, schemas, strict=False)]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    spec = parse_agent({"name": "a", "tools": [{"type": "catalog", "name": "cat", "path": str(path)}]})
    kernel = Kernel()
    try:
        run(add_sources(kernel, spec, contextlib.AsyncExitStack()))
    except ConfigError:
        return
    for function in kernel.plugins["cat"]:
        assert len(function.fully_qualified_name) <= MAX_TOOL_NAME
        wire = json.dumps(kernel_function_metadata_to_function_call_format(function.metadata))
        assert "$ref" not in wire
