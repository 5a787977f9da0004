import numpy as np
import pytest
from semantic_kernel import Kernel
from semantic_kernel.functions import kernel_function

from sk_toolfilter import EmbeddingServiceError, ToolFilterConfig, ToolIndex
from sk_toolfilter.retrieval.search import rank_tools


async def test_index_records_every_function_with_sk_full_names(demo_kernel):
    index = await ToolIndex.build_from_kernel(demo_kernel)
    expected = [f.fully_qualified_name for p in demo_kernel.plugins.values() for f in p.functions.values()]
    assert index.names == expected
    assert len(index) == 46
    tool = index.get("Messaging-send_email")
    assert tool is not None
    assert (tool.plugin, tool.name) == ("Messaging", "send_email")
    assert tool.description.startswith("Send an email")
    params = {p.name: p for p in tool.parameters}
    assert set(params) == {"to", "subject", "body"}
    assert params["to"].required and params["to"].type == "str"
    assert params["to"].description == "Recipient email address"


async def test_index_without_service_has_no_embeddings(demo_kernel):
    index = await ToolIndex.build_from_kernel(demo_kernel, embedding_service=None)
    assert not index.has_embeddings


async def test_index_embeds_every_tool_once_in_batches(demo_kernel, hash_embedder):
    index = await ToolIndex.build_from_kernel(demo_kernel, hash_embedder, batch_size=10)
    assert index.embeddings.shape == (46, 64)
    assert hash_embedder.texts_embedded == 46
    assert hash_embedder.calls == 5


async def test_progress_is_reported_while_embedding(demo_kernel, hash_embedder):
    seen = []
    await ToolIndex.build_from_kernel(
        demo_kernel, hash_embedder, batch_size=20, progress=lambda d, t: seen.append((d, t))
    )
    assert seen == [(20, 46), (40, 46), (46, 46)]


@pytest.mark.parametrize(
    ("mode", "message"),
    [("raise", "failed: RuntimeError"), ("nan", "NaN"), ("wrong_count", "shape"), ("wrong_dims", None)],
)
async def test_failing_embedding_service_is_a_clear_error_at_build_time(demo_kernel, hash_embedder, mode, message):
    hash_embedder.set_mode(mode)
    if mode == "wrong_dims":  # consistent but unusual size is fine at build time
        index = await ToolIndex.build_from_kernel(demo_kernel, hash_embedder)
        assert index.embeddings.shape[1] == 67
        return
    with pytest.raises(EmbeddingServiceError, match=message):
        await ToolIndex.build_from_kernel(demo_kernel, hash_embedder)


async def test_query_embedding_of_another_size_falls_back_to_bm25(demo_kernel, hash_embedder, caplog):
    index = await ToolIndex.build_from_kernel(demo_kernel, hash_embedder)
    hash_embedder.set_mode("wrong_dims")
    ranking = await rank_tools(index, "send an email", ToolFilterConfig(search_method="hybrid"))
    assert ranking.method == "bm25"
    assert "dimensions" in ranking.fallback_reason
    assert ranking.tools[0].full_name == "Messaging-send_email"
    assert "ranking with BM25 until it recovers" in caplog.text


@pytest.mark.parametrize("mode", ["raise", "nan"])
async def test_query_time_embedding_failure_falls_back_to_bm25(demo_kernel, hash_embedder, mode):
    index = await ToolIndex.build_from_kernel(demo_kernel, hash_embedder)
    hash_embedder.set_mode(mode)
    ranking = await rank_tools(index, "add two numbers", ToolFilterConfig(search_method="semantic"))
    assert ranking.method == "bm25" and ranking.fallback_reason
    assert ranking.tools[0].full_name == "Math-add"


async def test_semantic_without_embeddings_uses_bm25_and_says_why(demo_kernel):
    index = await ToolIndex.build_from_kernel(demo_kernel)
    ranking = await rank_tools(index, "add two numbers", ToolFilterConfig(search_method="semantic"))
    assert ranking.method == "bm25"
    assert ranking.fallback_reason == "the index has no embedding service"


@pytest.mark.parametrize("method", ["bm25", "semantic", "hybrid"])
async def test_every_method_ranks_the_obvious_tool_first(demo_kernel, hash_embedder, method):
    index = await ToolIndex.build_from_kernel(demo_kernel, hash_embedder)
    ranking = await rank_tools(index, "send an email to Bob", ToolFilterConfig(search_method=method))
    assert ranking.method == method
    assert ranking.tools[0].full_name == "Messaging-send_email"
    assert ranking.tools[0].score == 1.0
    assert all(0.0 <= t.score <= 1.0 for t in ranking.tools)
    assert [t.score for t in ranking.tools] == sorted((t.score for t in ranking.tools), reverse=True)


@pytest.mark.parametrize("query", ["please run Text-reverse_text", "use Text.reverse_text", "call reverse_text now"])
async def test_a_query_naming_a_tool_ranks_it_first(demo_kernel, query):
    index = await ToolIndex.build_from_kernel(demo_kernel)
    ranking = await rank_tools(index, query, ToolFilterConfig(search_method="bm25"))
    assert ranking.tools[0].full_name == "Text-reverse_text"
    assert ranking.tools[0].name_match


async def test_an_ordinary_word_is_not_taken_for_a_one_word_tool_name(demo_kernel):
    index = await ToolIndex.build_from_kernel(demo_kernel)
    ranking = await rank_tools(index, "what is today", ToolFilterConfig(search_method="bm25"))
    assert not any(t.name_match for t in ranking.tools)


async def test_ranking_is_deterministic(demo_kernel):
    index = await ToolIndex.build_from_kernel(demo_kernel)
    config = ToolFilterConfig(search_method="bm25")
    first = [t.full_name for t in (await rank_tools(index, "file text", config)).tools]
    for _ in range(3):
        assert [t.full_name for t in (await rank_tools(index, "file text", config)).tools] == first


@pytest.mark.parametrize("query", ["", "   \n\t", "?!?", "x" * 100_000, "🙂" * 5000, "a\x00b"])
async def test_odd_queries_never_raise(demo_kernel, hash_embedder, query):
    index = await ToolIndex.build_from_kernel(demo_kernel, hash_embedder)
    ranking = await rank_tools(index, query, ToolFilterConfig())
    assert isinstance(ranking.tools, list)


async def test_huge_query_still_finds_its_tool(demo_kernel, hash_embedder):
    index = await ToolIndex.build_from_kernel(demo_kernel, hash_embedder)
    query = "convert the temperature to fahrenheit " + "lorem ipsum " * 10_000
    ranking = await rank_tools(index, query, ToolFilterConfig(search_method="bm25"))
    assert ranking.tools[0].full_name == "Math-convert_temperature"


async def test_unicode_query_matches_unicode_description():
    class WeatherPlugin:
        @kernel_function(description="天气预报：查询城市的天气")
        def forecast(self, city: str) -> str:
            return city

        @kernel_function(description="Réserver une chambre d'hôtel")
        def book_hotel(self, city: str) -> str:
            return city

    kernel = Kernel()
    kernel.add_plugin(WeatherPlugin(), "Travel")
    index = await ToolIndex.build_from_kernel(kernel)
    config = ToolFilterConfig(search_method="bm25")
    assert (await rank_tools(index, "北京天气怎么样", config)).tools[0].full_name == "Travel-forecast"
    assert (await rank_tools(index, "réserver hotel", config)).tools[0].full_name == "Travel-book_hotel"


async def test_empty_and_single_tool_catalogs():
    empty = await ToolIndex.build_from_kernel(Kernel())
    assert (await rank_tools(empty, "anything", ToolFilterConfig())).tools == []

    class One:
        @kernel_function(description="Ping the server")
        def ping(self) -> str:
            return "pong"

    kernel = Kernel()
    kernel.add_plugin(One(), "Net")
    index = await ToolIndex.build_from_kernel(kernel)
    assert [t.full_name for t in (await rank_tools(index, "ping", ToolFilterConfig())).tools] == ["Net-ping"]
    assert (await rank_tools(index, "unrelated words", ToolFilterConfig())).tools == []


async def test_embeddings_must_match_the_catalog_size(demo_kernel):
    index = await ToolIndex.build_from_kernel(demo_kernel)
    with pytest.raises(EmbeddingServiceError, match="sizes must match"):
        ToolIndex(index.tools, embeddings=np.zeros((3, 8), dtype=np.float32))


def test_int8_vectors_score_close_to_float32_in_a_quarter_of_the_memory():
    import numpy as np

    from sk_toolfilter.retrieval.scoring import CatalogVectors

    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((500, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    exact, int8 = CatalogVectors(vectors, "float32"), CatalogVectors(vectors, "int8")
    for _ in range(20):
        query = rng.standard_normal(384).astype(np.float32)
        query /= np.linalg.norm(query)
        assert np.abs(exact.scores(query) - int8.scores(query)).max() < 0.01
        best = int(np.argmax(exact.scores(query)))
        assert best in np.argsort(-int8.scores(query))[:3]
    assert int8.nbytes * 3.9 < exact.nbytes
    assert np.abs(int8.float32() - vectors).max() < 0.01  # the dequantized view used by re-indexing


def test_a_query_is_quantized_exactly_as_a_catalog_row():
    from sk_toolfilter.retrieval.scoring import quantize_one, quantize_rows

    rng = np.random.default_rng(7)
    rows = rng.standard_normal((200, 384)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows[0] = 0.0  # no peak: scale 1
    codes, scales = quantize_rows(rows)
    for row, expected_codes, expected_scale in zip(rows, codes, scales, strict=True):
        one_codes, one_scale = quantize_one(row)
        assert one_codes.shape == (1, 384) and one_codes.dtype == np.int8
        assert np.array_equal(one_codes[0], expected_codes) and one_scale == expected_scale


@pytest.mark.parametrize("dims", [384, 768, 3072])
def test_int8_scores_are_the_codes_exact_integer_products_times_both_scales(dims):
    # The kernel multiplies shifted (unsigned) codes; taking the shift back out must give the signed
    # codes' integer products exactly, at every size a service may have: the same scores on every CPU.
    from sk_toolfilter.retrieval.scoring import CatalogVectors, quantize_one, quantize_rows

    rng = np.random.default_rng(dims)
    rows = rng.standard_normal((300, dims)).astype(np.float32)
    rows[:3] = np.sign(rows[3])  # equal-magnitude rows: every code at ±127, the largest products
    rows[4] = 0.0
    rows[5] = -rows[3]
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    vectors = CatalogVectors(rows, "int8")
    codes, scales = quantize_rows(rows)
    assert np.array_equal(vectors.rows(np.arange(len(rows))), codes * scales[:, None])
    for query in (rows[0], rows[5], rows[17], -rows[0]):
        query_codes, query_scale = quantize_one(query)
        expected = (codes.astype(np.int64) @ query_codes[0].astype(np.int64)).astype(np.float32)
        expected *= scales
        expected *= query_scale
        assert np.array_equal(vectors.scores(query), expected)


@pytest.mark.parametrize("precision", ["float32", "int8"])
def test_scoring_several_queries_at_once_gives_each_its_own_scores(precision):
    # A request's texts and an agent loop's actions are scored in one read of the catalog: the same
    # floats as scoring each alone.
    from sk_toolfilter.retrieval.scoring import CatalogVectors

    rng = np.random.default_rng(11)
    rows = rng.standard_normal((400, 384)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    vectors = CatalogVectors(rows, precision)
    queries = rows[[5, 17, 5, 300]] + 0.01 * rng.standard_normal((4, 384)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    together = vectors.scores_many(queries)
    assert together.shape == (4, 400) and together.dtype == np.float32
    for query, scores in zip(queries, together, strict=True):
        assert np.array_equal(scores, vectors.scores(query))
    assert np.array_equal(vectors.scores_many(queries[:1])[0], vectors.scores(queries[0]))


@pytest.mark.parametrize("precision", ["float32", "int8"])
async def test_texts_ranked_in_one_batch_rank_as_each_alone(demo_kernel, hash_embedder, precision):
    from sk_toolfilter.retrieval.search import rank_many

    tools = (await ToolIndex.build_from_kernel(demo_kernel)).tools
    index = await ToolIndex.build(tools, hash_embedder, precision=precision)
    config = ToolFilterConfig(search_method="hybrid")
    texts = [
        "reverse this text",
        "Convert 3 miles to km. Then add 5 and 7, and reverse the word hello",
        "what is the weather",
    ]
    together = await rank_many(index, texts, config, limit=5)
    for text, ranking in zip(texts, together, strict=True):
        alone = await rank_tools(index, text, config, limit=5, fill=False)
        assert [(t.full_name, t.score) for t in ranking.tools] == [(t.full_name, t.score) for t in alone.tools]
