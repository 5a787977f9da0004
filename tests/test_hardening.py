"""Production hardening: embedding cache, live re-indexing, concurrency, faults."""

import asyncio
import logging
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from semantic_kernel.functions import kernel_function

from sk_toolfilter import ToolFilterConfig, create_tool_filter
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.faults import EmbeddingCircuit
from sk_toolfilter.retrieval.search import rank_tools
from tests.conftest import HashEmbedder, build_demo_kernel

CONFIG = {"search_method": "hybrid", "discovery": {"enabled": False}}


class InvoicePlugin:
    @kernel_function(description="Create an invoice for a customer.")
    def create_invoice(self, customer: str) -> str:
        return customer

    @kernel_function(description="Refund a paid invoice.")
    def refund_invoice(self, invoice_id: str) -> str:
        return invoice_id


async def start(kernel, embedder, **extra):
    return await create_tool_filter(
        kernel, ToolFilterConfig.from_mapping({**CONFIG, **extra}), embedding_service=embedder
    )


# --- embedding cache ----------------------------------------------------------------------------
async def test_a_restart_with_an_unchanged_catalog_makes_no_embedding_call(tmp_path, hash_embedder):
    await start(build_demo_kernel(str(tmp_path / "s")), hash_embedder)
    first = hash_embedder.calls
    assert first > 0
    await start(build_demo_kernel(str(tmp_path / "s")), hash_embedder)
    assert hash_embedder.calls == first


async def test_a_changed_tool_re_embeds_only_itself(tmp_path, hash_embedder):
    await start(build_demo_kernel(str(tmp_path / "s")), hash_embedder)
    before = hash_embedder.texts_embedded
    kernel = build_demo_kernel(str(tmp_path / "s"))
    kernel.plugins["Math"].functions["add"].metadata.description = "Add two numbers together (sum)."
    await start(kernel, hash_embedder)
    assert hash_embedder.texts_embedded == before + 1


@pytest.mark.parametrize("damage", ["garbage", "foreign_version", "truncated"])
async def test_a_corrupt_or_foreign_cache_is_reported_once_and_rebuilt(tmp_path, hash_embedder, caplog, damage):
    cache = EmbeddingCache(tmp_path / "c")
    cache.put("m", ["a", "b"], np.ones((2, 4)))
    path = next((tmp_path / "c").glob("*.npz"))
    if damage == "garbage":
        path.write_bytes(b"not a cache")
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:50])
    else:
        np.savez(path, version=np.array(99), keys=np.array(["x"]), vectors=np.ones((1, 4)))
    fresh = EmbeddingCache(tmp_path / "c")
    assert fresh.get("m", ["a", "b"]) == [None, None]
    assert fresh.get("m", ["a"]) == [None]  # read once, reported once
    assert caplog.text.count("is unreadable") == 1
    fresh.put("m", ["c"], np.ones((1, 4)))
    assert EmbeddingCache(tmp_path / "c").get("m", ["c"])[0] is not None


def test_two_processes_sharing_a_cache_keep_both_writes(tmp_path):
    script = textwrap.dedent(
        """
        import sys, numpy as np
        from sk_toolfilter.retrieval.cache import EmbeddingCache
        cache = EmbeddingCache(sys.argv[1])
        for i in range(30):
            cache.put("m", [f"{sys.argv[2]}-{i}"], np.full((1, 8), i, dtype=np.float32))
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "shared"), tag]) for tag in ("left", "right")
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    cache = EmbeddingCache(tmp_path / "shared")
    texts = [f"{tag}-{i}" for tag in ("left", "right") for i in range(30)]
    assert all(v is not None for v in cache.get("m", texts))
    assert not list((tmp_path / "shared").glob("*.tmp"))


# --- live re-indexing ---------------------------------------------------------------------------
async def test_plugins_added_or_removed_are_reflected_in_the_next_selection(tmp_path, hash_embedder):
    kernel = build_demo_kernel(str(tmp_path / "s"))
    manager = await start(kernel, hash_embedder)
    await manager.filter_tools("warm up")  # the first request also embeds the small-talk descriptions, once,
    await manager.index.small_talk_ready()  # and the exemplars in the background (no shipped vectors)
    before = hash_embedder.texts_embedded
    kernel.add_plugin(InvoicePlugin(), "Billing")
    assert (await manager.filter_tools("refund the invoice"))[0] == "Billing-refund_invoice"
    assert hash_embedder.texts_embedded == before + 2 + 1  # the 2 new tools (nothing else) and the query
    del kernel.plugins["Messaging"]
    names = await manager.filter_tools("send an email to bob")
    assert not any(n.startswith("Messaging-") for n in names)
    assert all(n.split("-", 1)[0] in kernel.plugins for n in names)


async def test_a_selection_running_during_a_rebuild_never_names_a_removed_function(tmp_path, hash_embedder):
    kernel = build_demo_kernel(str(tmp_path / "s"))
    manager = await start(kernel, hash_embedder)
    assert manager._upkeep.refreshing.acquire()  # a rebuild is in progress elsewhere: this selection uses the old index
    try:
        del kernel.plugins["Messaging"]
        assert not any(n.startswith("Messaging-") for n in await manager.filter_tools("send an email to bob"))
        assert (await manager.filter_tools("read the file"))[0] == "Files-read_file"
    finally:
        manager._upkeep.refreshing.release()
    await manager.filter_tools("x")
    assert "Messaging-send_email" not in manager.index


# --- concurrency ------------------------------------------------------------------------------
QUERIES = ["send an email", "add two numbers", "what time is it", "read a file", "make a slug", "remember this"]


async def test_a_thousand_concurrent_selections_equal_the_sequential_ones(demo_kernel, hash_embedder):
    manager = await start(demo_kernel, hash_embedder)
    await manager.vectors_ready()  # the small-talk exemplars too (embedded in the background for this model)
    sequential = {q: await manager.filter_tools(q) for q in QUERIES}
    queries = [QUERIES[i % len(QUERIES)] for i in range(1000)]
    results = await asyncio.gather(*(manager.filter_tools(q) for q in queries))
    assert all(result == sequential[q] for q, result in zip(queries, results, strict=True))


async def test_selections_from_several_threads_and_exact_usage_counts(demo_kernel, hash_embedder):
    manager = await start(demo_kernel, hash_embedder)
    await manager.vectors_ready()
    expected = {q: await manager.filter_tools(q) for q in QUERIES}

    def worker(offset):
        async def run():
            out = []
            for i in range(50):
                q = QUERIES[(i + offset) % len(QUERIES)]
                out.append((q, await manager.filter_tools(q)))
                manager.usage.record("Math-add")
            return out

        return asyncio.run(run())

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = [r for chunk in pool.map(worker, range(4)) for r in chunk]
    assert all(names == expected[q] for q, names in results)
    assert manager.usage.count("Math-add") == 200


# --- faults -------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["raise", "nan", "wrong_dims", "wrong_count", "ratelimit", "slow"])
async def test_each_fault_falls_back_to_bm25_and_recovers(demo_kernel, hash_embedder, mode, caplog):
    manager = await start(demo_kernel, hash_embedder, embedding={"timeout_seconds": 0.2})
    config = manager.config
    hash_embedder.set_mode(mode)
    with caplog.at_level(logging.INFO):
        for _ in range(2):
            ranking = await rank_tools(manager.index, "send an email to bob", config)
            assert ranking.method == "bm25" and ranking.fallback_reason
            assert ranking.tools[0].full_name == "Messaging-send_email"
        assert caplog.text.count("embedding service failing") == 1  # once per incident, not per request
        hash_embedder.set_mode("ok")
        recovered = await rank_tools(manager.index, "send an email to bob", config)
        assert recovered.method == "hybrid"
        assert "embedding service recovered" in caplog.text


async def test_an_open_circuit_skips_the_dead_service_until_the_cooldown_ends(demo_kernel, hash_embedder):
    now = [0.0]
    manager = await start(demo_kernel, hash_embedder)
    manager.index.circuit = EmbeddingCircuit(
        timeout_seconds=1, failure_threshold=3, cooldown_seconds=30, clock=lambda: now[0]
    )
    hash_embedder.set_mode("raise")
    calls = hash_embedder.calls
    for _ in range(10):
        assert (await rank_tools(manager.index, "add numbers", manager.config)).method == "bm25"
    assert hash_embedder.calls == calls + 3  # then the circuit opened
    hash_embedder.set_mode("ok")
    assert (await rank_tools(manager.index, "add numbers", manager.config)).method == "bm25"  # still open
    now[0] = 31.0
    assert (await rank_tools(manager.index, "add numbers", manager.config)).method == "hybrid"


async def test_concurrent_query_embeddings_are_batched_into_fewer_calls(demo_kernel, hash_embedder, tmp_path):
    manager = await start(demo_kernel, hash_embedder)
    twin = await start(build_demo_kernel(str(tmp_path / "twin")), HashEmbedder())  # `manager` reuses no vector
    alone = {q: (await twin.index.embed_queries([q]))[0] for q in QUERIES}
    calls = hash_embedder.calls
    queries = [QUERIES[i % len(QUERIES)] for i in range(60)]
    vectors = await asyncio.gather(*(manager.index.embed_queries([q]) for q in queries))
    assert hash_embedder.calls - calls < 10  # 60 requests, a handful of service calls
    assert all(np.allclose(v[0], alone[q]) for q, v in zip(queries, vectors, strict=True))


async def test_the_requests_of_an_agent_loop_reuse_the_vector_of_their_turns_request(demo_kernel, hash_embedder):
    manager = await start(demo_kernel, hash_embedder)
    first = await manager.index.embed_queries(["add 2 and 3", "then save a note"])
    calls, texts = hash_embedder.calls, hash_embedder.texts_embedded
    again = await manager.index.embed_queries(["then save a note", "add 2 and 3", "a new question"])
    assert hash_embedder.calls == calls + 1 and hash_embedder.texts_embedded == texts + 1  # only the new text
    assert np.allclose(again[0], first[1]) and np.allclose(again[1], first[0])


# --- text that cannot be encoded ----------------------------------------------------------------
class SurrogatePlugin:
    @kernel_function(description="Archive old \ud800 invoices into cold storage.")
    def archive_invoices(self, older_than_days: int) -> str:
        return str(older_than_days)


async def test_a_lone_surrogate_in_a_tool_text_never_breaks_indexing_or_selection(tmp_path, monkeypatch):
    """At start (default configuration: local model, disk cache) and for a plugin added at run time."""
    monkeypatch.setenv("SK_TOOLFILTER_CACHE", str(tmp_path / "cache"))
    kernel = build_demo_kernel(str(tmp_path / "sandbox"))
    kernel.add_plugin(SurrogatePlugin(), "Archive")
    manager = await create_tool_filter(kernel, ToolFilterConfig())
    assert "Archive-archive_invoices" in await manager.filter_tools("archive old invoices")

    kernel.add_plugin(SurrogatePlugin(), "Archive2")  # added while serving
    for _ in range(2):  # every later selection keeps working
        assert "Archive2-archive_invoices" in await manager.filter_tools("archive old invoices into cold storage")
    described = manager.index.tools[manager.index.position("Archive2-archive_invoices")].description
    assert "\ufffd" in described
    described.encode("utf-8")  # what every later stage reads is valid UTF-8


# --- public calls check their input -------------------------------------------------------------
@pytest.mark.parametrize("limit", [0, -1, -50, 2.5, "5", True])
async def test_rank_tools_refuses_a_limit_that_is_not_a_positive_whole_number(tmp_path, hash_embedder, limit):
    manager = await start(build_demo_kernel(str(tmp_path)), hash_embedder)
    with pytest.raises(ValueError, match="limit must be a positive whole number"):
        await rank_tools(manager.index, "send an email", manager.config, limit=limit)


async def test_rank_tools_refuses_an_allowed_mask_of_the_wrong_length_or_kind(tmp_path, hash_embedder):
    manager = await start(build_demo_kernel(str(tmp_path)), hash_embedder)
    n = len(manager.index)
    bad_masks = [np.ones(n + 1, dtype=bool), np.ones(n - 1, dtype=bool), np.zeros(n, dtype=np.int64)]
    bad_masks.append(np.array([True, False] * n)[: n + 3])
    for mask in bad_masks:  # an all-True mask of the wrong length must not allow every tool (fail open)
        with pytest.raises(ValueError, match=f"one entry per catalog tool \\(shape \\({n},\\)\\)"):
            await rank_tools(manager.index, "send an email", manager.config, allowed=mask)
    with pytest.raises(ValueError, match="not one string"):
        await rank_tools(manager.index, "send an email", manager.config, allowed="Messaging-send_email")
    only = np.zeros(n, dtype=bool)
    only[manager.index.position("Math-add")] = True
    ranking = await rank_tools(manager.index, "send an email and add 2 and 3", manager.config, allowed=only)
    assert [t.full_name for t in ranking.tools] in ([], ["Math-add"])


async def test_a_batch_the_service_rejects_keeps_what_was_built_and_a_retry_sends_only_the_rest(tmp_path):
    from sk_toolfilter.basics.errors import EmbeddingServiceError
    from sk_toolfilter.retrieval.index import embed_catalog
    from tests.conftest import HashEmbedder

    class RejectsOneText(HashEmbedder):
        async def generate_embeddings(self, texts, settings=None, **kwargs):
            if self._mode == "reject" and any("poison" in t for t in texts):
                raise ValueError("input rejected")
            return await super().generate_embeddings(texts, settings, **kwargs)

    texts = [f"tool number {i} does thing {i}" for i in range(40)]
    texts[33] = "poison text the service rejects"
    service, cache = RejectsOneText(), EmbeddingCache(tmp_path / "cache")
    service.set_mode("reject")
    with pytest.raises(EmbeddingServiceError):
        await embed_catalog(service, texts, cache=cache, batch_size=8)
    assert service.texts_embedded == 32  # the batches before the rejected one were built ...
    service.set_mode("ok")
    vectors, embedded = await embed_catalog(service, texts, cache=cache, batch_size=8)
    assert embedded == 8 and service.texts_embedded == 40  # ... kept, and never sent again
    assert vectors.shape == (40, service.dims)
