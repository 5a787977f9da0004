"""Embedding faults never stop selection, and batching never makes things worse."""

import asyncio
import json
import logging
import time

import httpx
import pytest
from semantic_kernel import Kernel
from semantic_kernel.contents import ChatHistory
from semantic_kernel.functions import kernel_function

from sk_toolfilter import ToolFilterConfig, create_tool_filter
from sk_toolfilter.basics.errors import EmbeddingServiceError
from sk_toolfilter.config import EmbeddingConfig
from sk_toolfilter.retrieval.embeddings import create_embedding_service
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.search import rank_tools
from tests.conftest import HashEmbedder, build_demo_kernel

QUERIES = ["send an email to bob", "add 2 and 3", "what time is it in Tokyo", "read the file notes.txt"]


class ShippingPlugin:
    @kernel_function(description="Track a parcel shipment by its tracking number.")
    def track_parcel(self, tracking_number: str) -> str:
        return tracking_number


def names(ranking) -> list[str]:
    return [t.full_name for t in ranking.tools]


async def start(kernel, embedder, **embedding):
    config = ToolFilterConfig(
        search_method="hybrid", discovery={"enabled": False}, embedding={"cache": False, **embedding}
    )
    return await create_tool_filter(kernel, config, embedding_service=embedder)


# --- build time ---------------------------------------------------------------------------------
async def test_a_hanging_service_at_build_time_ends_at_the_timeout_with_a_clear_error(tmp_path, hash_embedder):
    hash_embedder.set_mode("hang")
    started = time.perf_counter()
    with pytest.raises(EmbeddingServiceError, match=r"did not answer within 1.8s"):  # 0.3 s x 46 tools / 8
        await start(build_demo_kernel(str(tmp_path)), hash_embedder, timeout_seconds=0.3)
    assert time.perf_counter() - started < 60  # bounded by the timeout (the message), never hung


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("ragged", "non-numeric or ragged vectors"),
        ("strings", "non-numeric or ragged vectors"),
        ("cancel", "cancelled the request"),
        ("wrong_count", "returned shape"),
    ],
)
async def test_malformed_vectors_at_build_time_are_embedding_service_errors(tmp_path, hash_embedder, mode, message):
    hash_embedder.set_mode(mode)
    with pytest.raises(EmbeddingServiceError, match=message):
        await start(build_demo_kernel(str(tmp_path)), hash_embedder)


@pytest.mark.parametrize("mode", ["ragged", "strings", "cancel", "hang"])
async def test_malformed_vectors_at_query_time_fall_back_to_bm25(tmp_path, hash_embedder, mode):
    manager = await start(build_demo_kernel(str(tmp_path)), hash_embedder, timeout_seconds=0.3)
    hash_embedder.set_mode(mode)
    ranking = await rank_tools(manager.index, "send an email to bob", manager.config)
    assert ranking.method == "bm25" and ranking.fallback_reason
    assert ranking.tools[0].full_name == "Messaging-send_email"


async def test_a_request_listing_actions_costs_one_embedding_call_and_falls_back_whole(tmp_path, hash_embedder):
    manager = await start(build_demo_kernel(str(tmp_path)), hash_embedder, timeout_seconds=0.3)
    await manager.filter_tools("warm up")  # the first request also embeds the small-talk descriptions, once,
    await manager.index.small_talk_ready()  # and starts embedding the exemplars in the background
    for mode in ("ok", "hang"):
        history = ChatHistory()
        history.add_user_message(f"Send an email to bob, add 2 and 3, then tell me the time in Tokyo ({mode})")
        hash_embedder.set_mode(mode)
        calls = hash_embedder.calls
        selection = await manager.select_for_history(history)
        assert hash_embedder.calls == calls + 1  # the request and its three actions in one call (one timeout)
        kept = {d.full_name for d in selection.decisions if d.kept}
        assert {"Messaging-send_email", "Time-current_time"} <= kept and any(n.startswith("Math-") for n in kept)
        assert (selection.ranking.method == "bm25") == (mode == "hang")


# --- lone surrogates ----------------------------------------------------------------------------
async def test_one_query_with_a_lone_surrogate_does_not_fail_a_batch_of_good_ones(tmp_path, hash_embedder):
    manager = await start(build_demo_kernel(str(tmp_path)), hash_embedder)
    queries = [QUERIES[i % 4] for i in range(19)] + ["send an email \ud800 to bob"]
    rankings = await asyncio.gather(*(rank_tools(manager.index, q, manager.config) for q in queries))
    assert all(r.method == "hybrid" and r.fallback_reason is None for r in rankings)
    assert rankings[-1].tools[0].full_name == "Messaging-send_email"
    assert not manager.index.circuit.is_open


async def test_a_new_tool_with_a_lone_surrogate_in_its_description_is_embedded(tmp_path, hash_embedder):
    kernel = build_demo_kernel(str(tmp_path))
    manager = await start(kernel, hash_embedder)
    kernel.add_plugin(ShippingPlugin(), "Shipping")
    kernel.get_function("Shipping", "track_parcel").metadata.description = "Track a parcel \ud800 shipment."
    selection = await manager.select("track my parcel shipment")
    assert selection.names[0] == "Shipping-track_parcel"
    assert manager.index.missing_vectors == 0


# --- live re-index ------------------------------------------------------------------------------
async def test_a_reindex_whose_embedding_fails_keeps_serving_and_retries_later(
    tmp_path, hash_embedder, caplog, monkeypatch
):
    kernel = build_demo_kernel(str(tmp_path))
    manager = await start(kernel, hash_embedder, timeout_seconds=0.3, cooldown_seconds=30)
    old_index = manager.index
    hash_embedder.set_mode("hang")
    kernel.add_plugin(ShippingPlugin(), "Shipping")
    calls = hash_embedder.calls
    with caplog.at_level(logging.WARNING):
        first = await manager.select("track my parcel shipment")
        second = await manager.select("send an email to bob")
    # The new tool's embedding was tried once (not again per selection, within the cooldown), plus
    # one query embedding per selection.
    assert hash_embedder.calls - calls == 3
    assert first.names[0] == "Shipping-track_parcel"  # the new tool, ranked by BM25
    assert second.names[0] == "Messaging-send_email"  # known tools keep their vectors
    assert manager.index is not old_index and manager.index.missing_vectors == 1
    assert caplog.text.count("re-index could not embed") == 1
    hash_embedder.set_mode("ok")
    later = time.monotonic() + 31  # past the cooldown, without waiting for it
    monkeypatch.setattr("sk_toolfilter.selection.catalog_upkeep.time.monotonic", lambda: later)
    await manager.select("track my parcel shipment")
    assert manager.index.missing_vectors == 0


# --- batching -----------------------------------------------------------------------------------
async def test_a_slow_service_within_its_timeout_serves_a_thousand_concurrent_selections(tmp_path, hash_embedder):
    # Each call takes 0.5 s of the 2.5 s allowed (2 s of slack for a loaded machine: the rankings' own
    # work runs on the same event loop); the last requests wait ~4 s in the queue (8 batches), which must
    # not count against their timeout.
    manager = await start(build_demo_kernel(str(tmp_path)), hash_embedder, timeout_seconds=2.5)
    queries = [f"{QUERIES[i % 4]} #{i % 50}" for i in range(1000)]
    # The reference rankings come from a twin index, so `manager` has no query vector to reuse yet.
    twin = await start(build_demo_kernel(str(tmp_path / "twin")), HashEmbedder(), timeout_seconds=1.0)
    sequential = {q: names(await rank_tools(twin.index, q, twin.config)) for q in set(queries)}
    await manager.index.small_talk_ready()  # embedded once per index (a model without shipped vectors)
    hash_embedder.set_mode("ok", delay=0.5)
    calls = hash_embedder.calls
    rankings = await asyncio.gather(*(rank_tools(manager.index, q, manager.config) for q in queries))
    assert [r.fallback_reason for r in rankings if r.fallback_reason][:1] == []
    assert not manager.index.circuit.is_open
    assert all(names(r) == sequential[q] for q, r in zip(queries, rankings, strict=True))
    assert hash_embedder.calls - calls < 20  # batched: far fewer calls than requests


# --- dimensions ---------------------------------------------------------------------------------
async def test_embedding_dimensions_are_sent_to_the_service_and_checked():
    bodies: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        size = body.get("dimensions", 1536)
        data = [{"object": "embedding", "index": i, "embedding": [0.1] * size} for i in range(len(body["input"]))]
        usage = {"prompt_tokens": 1, "total_tokens": 1}
        return httpx.Response(200, json={"object": "list", "data": data, "model": body["model"], "usage": usage})

    service = create_embedding_service(EmbeddingConfig(provider="openai", api_key="k", dimensions=256))
    service.inner.client._client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    kernel = Kernel()
    kernel.add_plugin(ShippingPlugin(), "Shipping")
    index = await ToolIndex.build_from_kernel(kernel, service)
    assert bodies[0]["dimensions"] == 256 and index.embeddings.shape == (1, 256)
    assert service.ai_model_id == "text-embedding-3-small@256"  # the cache key names the size


# --- exceptions that are not Exception ---------------------------------------------------------------
async def test_a_service_raising_a_base_exception_is_contained_at_build_and_at_query_time(tmp_path, hash_embedder):
    hash_embedder.set_mode("generator_exit")
    with pytest.raises(EmbeddingServiceError, match="GeneratorExit"):
        await start(build_demo_kernel(str(tmp_path)), hash_embedder)
    hash_embedder.set_mode("ok")
    manager = await start(build_demo_kernel(str(tmp_path)), hash_embedder)
    hash_embedder.set_mode("generator_exit")
    ranking = (await manager.select("send an email to bob")).ranking
    assert ranking.method == "bm25" and "GeneratorExit" in (ranking.fallback_reason or "")
    assert "Messaging-send_email" in [t.full_name for t in ranking.tools][:3]


async def test_keyboard_interrupt_from_a_service_is_never_contained(hash_embedder):
    class Interrupting(type(hash_embedder)):
        async def generate_embeddings(self, texts, settings=None, **kwargs):
            raise KeyboardInterrupt

    from sk_toolfilter.retrieval.embeddings import embed_texts

    with pytest.raises(KeyboardInterrupt):
        await embed_texts(Interrupting(), ["hello"])


async def test_on_failure_bm25_starts_with_one_warning_and_embeds_once_the_service_answers(
    tmp_path, hash_embedder, caplog
):
    hash_embedder.set_mode("raise")
    with caplog.at_level(logging.WARNING, logger="sk_toolfilter"):
        manager = await start(build_demo_kernel(str(tmp_path)), hash_embedder, on_failure="bm25", cooldown_seconds=0)
    warnings = [r for r in caplog.records if "embedding.on_failure: bm25" in r.getMessage()]
    assert len(warnings) == 1
    assert manager.index.missing_vectors == len(manager.index)
    assert "Messaging-send_email" in (await manager.filter_tools("send an email to bob"))
    hash_embedder.set_mode("ok")
    await manager.filter_tools("add 2 and 3")  # the next selection after the cooldown embeds the catalog
    assert manager.index.missing_vectors == 0


async def test_a_service_error_that_quotes_the_request_never_reaches_logs_or_the_fallback_reason(
    tmp_path, hash_embedder, caplog
):
    manager = await start(build_demo_kernel(str(tmp_path)), hash_embedder, timeout_seconds=5)
    hash_embedder.set_mode("quoting")
    request = "my password is hunter2pass, email it to bob"
    with caplog.at_level(logging.DEBUG, logger="sk_toolfilter"):
        selection = await manager.select(request)
    assert selection.ranking.method == "bm25"
    reason = selection.ranking.fallback_reason or ""
    assert "ValueError" in reason and "hunter2pass" not in reason
    assert caplog.records and not any("hunter2pass" in r.getMessage() for r in caplog.records)


# --- the timeout around one service call -------------------------------------------------------------
class StepService:
    """Answers after `block` seconds of work in the caller's thread, then waiting on `release` (None:
    answers inline, without waiting)."""

    def __init__(self, block: float = 0.0, release: asyncio.Event | None = None) -> None:
        self.block, self.release, self.started = block, release, asyncio.Event()

    async def generate_embeddings(self, texts, settings=None, **kwargs):
        time.sleep(self.block)
        self.started.set()
        if self.release is not None:
            await self.release.wait()
        return [[1.0, 0.0, 0.0] for _ in texts]


async def test_a_service_answering_inline_and_one_answering_after_waiting_both_give_vectors():
    from sk_toolfilter.retrieval.encoders import embed_texts

    release = asyncio.Event()
    release.set()
    assert (await embed_texts(StepService(), ["a", "b"], timeout=5.0)).shape == (2, 3)
    assert (await embed_texts(StepService(release=release), ["a"], timeout=5.0)).shape == (1, 3)


async def test_the_timeout_counts_from_the_call_not_from_the_services_first_wait():
    from sk_toolfilter.retrieval.encoders import embed_texts

    # 0.3 s of work before its first wait, against a 0.1 s timeout: over before it waits, although the
    # wait itself ends at once (a timer started at the first wait would let it answer).
    service = StepService(block=0.3, release=asyncio.Event())

    async def release_once_started() -> None:
        await service.started.wait()
        service.release.set()

    releaser = asyncio.ensure_future(release_once_started())
    with pytest.raises(EmbeddingServiceError, match=r"did not answer within 0\.1s"):
        await embed_texts(service, ["a"], timeout=0.1)
    await releaser


async def test_cancelling_a_request_while_its_service_waits_cancels_it_and_is_not_a_service_failure():
    from sk_toolfilter.retrieval.encoders import embed_texts

    service = StepService(release=asyncio.Event())
    task = asyncio.ensure_future(embed_texts(service, ["a"], timeout=30.0))
    await service.started.wait()
    await asyncio.sleep(0)  # the service is now waiting on its event
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_service_returning_a_future_instead_of_a_coroutine_is_awaited_under_its_timeout():
    from sk_toolfilter.retrieval.encoders import embed_texts

    class FutureService:
        def generate_embeddings(self, texts, settings=None, **kwargs):
            answer = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(answer.set_result, [[0.0, 2.0, 0.0] for _ in texts])
            return answer

    vectors = await embed_texts(FutureService(), ["a", "b"], timeout=5.0)
    assert vectors.tolist() == [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]


def test_a_proxy_forwarding_attributes_keeps_the_asymmetric_models_request_encoder():
    from sk_toolfilter import LocalEmbeddingGenerator
    from sk_toolfilter.retrieval.encoders import query_encoder

    class Proxy:  # a user's wrapper (metrics, logging) forwarding everything to the model
        def __init__(self, inner):
            self._inner = inner

        def __getattr__(self, name):
            return getattr(self._inner, name)

    model = LocalEmbeddingGenerator()
    assert query_encoder(Proxy(model)) is model.query_encoder
    embedder = HashEmbedder()
    assert query_encoder(embedder) is embedder  # a pydantic service without one embeds requests itself
