import pytest

from sk_toolfilter import ConfigError, ToolFilterConfig


def test_defaults_match_the_documented_block():
    config = ToolFilterConfig()
    assert config.enabled is True
    assert config.top_k == 5
    assert config.similarity_threshold == 0.5
    assert config.always_include == []
    assert config.always_include_top_n_used == 0
    assert config.search_method == "hybrid"
    assert config.rrf_k == 60
    assert config.embedding.resolved_provider == "local"


def test_numeric_strings_are_accepted():
    config = ToolFilterConfig.from_mapping({"top_k": "7", "similarity_threshold": "0.25"})
    assert config.top_k == 7 and config.similarity_threshold == 0.25


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ({"top_k": 0}, "tool_filtering.top_k: Input should be greater than 0 (got 0)"),
        ({"top_k": -3}, "tool_filtering.top_k"),
        ({"top_k": "many"}, "tool_filtering.top_k: Input should be a valid integer"),
        (
            {"similarity_threshold": 1.5},
            "tool_filtering.similarity_threshold: Input should be less than or equal to 1",
        ),
        ({"similarity_threshold": -0.1}, "tool_filtering.similarity_threshold"),
        (
            {"search_method": "fuzzy"},
            "tool_filtering.search_method: Input should be 'semantic', 'bm25' or 'hybrid'",
        ),
        ({"top_kk": 3}, "tool_filtering.top_kk: unknown key"),
        ({"embedding": {"provider": "cohere"}}, "tool_filtering.embedding.provider"),
        ({"always_include_top_n_used": -1}, "tool_filtering.always_include_top_n_used"),
    ],
)
def test_errors_name_the_key_and_the_bad_value(block, expected):
    with pytest.raises(ConfigError) as info:
        ToolFilterConfig.from_mapping(block)
    assert expected in str(info.value)


def test_secrets_are_not_echoed_in_errors():
    with pytest.raises(ConfigError) as info:
        ToolFilterConfig.from_mapping({"embedding": {"api_key": ["sk-secret-123"]}})
    assert "sk-secret-123" not in str(info.value)
    assert "tool_filtering.embedding.api_key" in str(info.value)


def test_a_block_that_is_not_a_mapping_is_rejected():
    with pytest.raises(ConfigError, match="expected a mapping, got list"):
        ToolFilterConfig.from_mapping([1, 2])


def test_an_api_key_selects_openai_embeddings_by_default():
    config = ToolFilterConfig.from_mapping({"embedding": {"api_key": "sk-x"}})
    assert config.embedding.resolved_provider == "openai"
    assert "sk-x" not in repr(config)


def test_one_always_include_name_may_be_given_as_a_string():
    assert ToolFilterConfig.from_mapping({"always_include": "Math-add"}).always_include == ["Math-add"]
