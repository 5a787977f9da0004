"""The real offline default model (all-MiniLM-L6-v2 int8 ONNX), no network."""

import numpy as np
import pytest

from sk_toolfilter import (
    LocalEmbeddingGenerator,
    ToolFilterConfig,
    create_tool_filter,
)


@pytest.fixture(scope="module")
def model():
    return LocalEmbeddingGenerator()


async def test_local_model_returns_unit_vectors_of_384_dimensions(model):
    vectors = await model.generate_embeddings(["send an email", "", "天气"])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


async def test_padding_does_not_change_a_vector(model):
    alone = model.embed_sync(["short text"])[0]
    batched = model.embed_sync(["short text", "a much longer text that forces padding of the short one " * 5])[0]
    assert float(alone @ batched) > 0.9999


async def test_similar_meanings_are_closer_than_unrelated_ones(model):
    q, email, weather = model.embed_sync(
        ["write a message to my boss", "send email: Send an email", "weather forecast"]
    )
    assert q @ email > q @ weather + 0.1


async def test_default_manager_uses_the_local_model_and_finds_tools_by_meaning(demo_kernel):
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig())
    assert isinstance(manager.index.embedding_service, LocalEmbeddingGenerator)
    names = await manager.filter_tools("what's the time in Tokyo right now?")
    assert "Time-current_time" in names[:2]
    assert sorted(await manager.filter_tools("hi there")) == ["ToolSearch-describe_tool", "ToolSearch-search_tools"]
