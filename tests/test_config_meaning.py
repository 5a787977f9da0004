"""Configuration means what it says: numbers are numbers, paths resolve, typos are reported."""

import math
import os

import pytest
from hypothesis import given, settings, strategies as st

from sk_toolfilter import ConfigError, ToolFilterConfig, create_tool_filter
from sk_toolfilter.agents.agent_file import parse_agent
from sk_toolfilter.config import AgentLoopConfig, BM25Config, DiscoveryConfig, EmbeddingConfig, IndexConfig


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"method_weights": {"semantic": math.nan}}, "method_weights.semantic: Input should be a finite number"),
        ({"method_weights": {"bm25": math.inf}}, "method_weights.bm25: Input should be a finite number"),
        ({"method_weights": {"bm25": -0.5}}, "weights must be >= 0"),
        ({"method_weights": {"bm25": True}}, "method_weights: expected a number, not true/false"),
        ({"top_k": True}, "top_k: expected a number, not true/false"),
        ({"similarity_threshold": False}, "similarity_threshold: expected a number"),
        ({"embedding": {"timeout_seconds": True}}, "embedding.timeout_seconds: expected a number"),
    ],
)
def test_numbers_must_be_finite_numbers(block, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        ToolFilterConfig.from_mapping(block)


def test_cache_dir_expands_home_and_is_relative_to_the_agent_file(tmp_path):
    spec = parse_agent(
        {"name": "a", "tool_filtering": {"embedding": {"cache_dir": "cache/here"}}}, base_dir=tmp_path / "desk"
    )
    assert spec.tool_filtering.embedding.cache_dir == str(tmp_path / "desk" / "cache" / "here")
    home = parse_agent({"name": "a", "tool_filtering": {"embedding": {"cache_dir": "~/x"}}}, base_dir=tmp_path)
    assert home.tool_filtering.embedding.cache_dir == os.path.expanduser("~/x")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
async def test_an_unwritable_cache_dir_is_a_warning_and_the_run_goes_on(tmp_path, demo_kernel, hash_embedder, caplog):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    config = ToolFilterConfig(embedding={"cache_dir": str(locked / "cache")})
    manager = await create_tool_filter(demo_kernel, config, embedding_service=hash_embedder)
    assert (await manager.select("send an email")).names
    assert "continuing without it" in caplog.text


async def test_a_cache_dir_that_is_a_file_is_a_warning_and_the_run_goes_on(
    tmp_path, demo_kernel, hash_embedder, caplog
):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    config = ToolFilterConfig(embedding={"cache_dir": str(blocker / "cache")})
    manager = await create_tool_filter(demo_kernel, config, embedding_service=hash_embedder)
    assert "Messaging-send_email" in (await manager.select("send an email to bob")).names
    assert caplog.text.count("continuing without it") == 1


_MODELS = [ToolFilterConfig, EmbeddingConfig, BM25Config, DiscoveryConfig, AgentLoopConfig, IndexConfig]
_ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


@settings(max_examples=400, deadline=None)
@given(model=st.sampled_from(_MODELS), data=st.data())
def test_any_value_of_any_key_is_accepted_or_a_config_error_naming_the_key(model, data):
    key = data.draw(st.sampled_from(sorted(model.model_fields)))
    value = data.draw(_ANY)
    try:
        config = model.model_validate({key: value})
    except Exception as exc:
        wrapped = ToolFilterConfig.from_mapping  # the public path turns it into one message
        if model is ToolFilterConfig:
            with pytest.raises(ConfigError) as info:
                wrapped({key: value})
            assert key in str(info.value)
        else:
            assert type(exc).__name__ == "ValidationError"
        return
    for name, field in model.model_fields.items():
        number = getattr(config, name)
        if isinstance(number, float):
            assert math.isfinite(number), name
        if field.annotation in (int, float):
            assert not isinstance(number, bool), name
