"""Instant start: an agent whose tools are not embedded yet answers at once with BM25, embeds them in
the background, and switches to hybrid when every vector is there — never a request waiting on the
build, never half an index. Event-driven: the catalog's embedding calls wait on an event the test sets."""

import asyncio
from typing import Any

import numpy as np
from pydantic import PrivateAttr

from sk_toolfilter import ToolFilterConfig, ToolFilterManager
from sk_toolfilter.retrieval.metadata import ToolMetadata
from tests.conftest import HashEmbedder

TOOLS = 5000


class GatedEmbedder(HashEmbedder):
    """Query-sized calls answer at once; catalog-sized calls wait until `gate` is set."""

    _events: dict[str, asyncio.Event] = PrivateAttr(default_factory=dict)

    def event(self, name: str) -> asyncio.Event:
        return self._events.setdefault(name, asyncio.Event())

    @property
    def gate(self) -> asyncio.Event:
        return self.event("gate")

    async def generate_embeddings(self, texts: list[str], settings: Any = None, **kwargs: Any) -> np.ndarray:
        if len(texts) > 16:
            self.event("catalog call started").set()
            await self.gate.wait()
        return await super().generate_embeddings(texts, settings, **kwargs)


class Catalog:
    """A tool source over a plain list (a big MCP fleet, say)."""

    def __init__(self, tools: list[ToolMetadata]) -> None:
        self.tools = tools

    def fingerprint(self, previous: Any) -> tuple[Any, ...]:
        return (len(self.tools), self.tools[-1].full_name)

    def crawl(self) -> list[ToolMetadata]:
        return list(self.tools)

    def names(self) -> list[str]:
        return [t.full_name for t in self.tools]

    def exists(self, full_name: str) -> bool:
        return any(t.full_name == full_name for t in self.tools)


def catalog() -> list[ToolMetadata]:
    topics = ["invoice", "weather", "email", "calendar", "ticket", "shipment", "payroll", "inventory"]
    return [
        ToolMetadata(f"P{i % 50}", f"tool{i}", f"P{i % 50}-tool{i}", f"Handle {topics[i % 8]} task number {i}.")
        for i in range(TOOLS - 1)
    ] + [ToolMetadata("Billing", "refund_invoice", "Billing-refund_invoice", "Refund a paid invoice to the customer.")]


async def test_a_cold_big_agent_answers_with_bm25_at_once_then_with_hybrid_when_the_vectors_are_ready(tmp_path):
    embedder = GatedEmbedder()
    config = ToolFilterConfig(embedding={"cache_dir": str(tmp_path / "cache"), "background_above": 100})
    manager = await ToolFilterManager.from_source(Catalog(catalog()), config, embedding_service=embedder)
    # The manager exists although no catalog embedding call has finished: the gate is still closed.
    assert not embedder.gate.is_set()
    first = await manager.select("refund the invoice")
    assert first.ranking.method == "bm25" and "embedded in the background" in (first.ranking.fallback_reason or "")
    assert first.names[0] == "Billing-refund_invoice"
    await embedder.event("catalog call started").wait()  # the build runs, held at the gate
    during = await manager.select("send the weather report by email")  # answered while the build waits
    assert during.ranking.method == "bm25" and during.names

    embedder.gate.set()
    await manager.vectors_ready()
    after = await manager.select("refund the invoice")
    assert after.ranking.method == "hybrid" and after.ranking.fallback_reason is None
    assert after.names[0] == "Billing-refund_invoice"
    assert manager.index.missing_vectors == 0 and len(manager.index) == TOOLS


async def test_a_request_during_the_switch_sees_one_whole_index(tmp_path):
    embedder = GatedEmbedder()
    config = ToolFilterConfig(embedding={"cache_dir": str(tmp_path / "cache"), "background_above": 100})
    manager = await ToolFilterManager.from_source(Catalog(catalog()), config, embedding_service=embedder)
    embedder.gate.set()
    selections = []
    while not manager._upkeep.background.done():  # requests keep coming while the build runs and swaps
        selections.append(await manager.select("refund the invoice"))
        await asyncio.sleep(0)  # a selection that never suspends would starve the build
    selections.append(await manager.select("refund the invoice"))
    for selection in selections:
        index_method = selection.ranking.method
        scores = [d.method_scores or {} for d in selection.decisions if d.kept and d.method_scores]
        # BM25 through and through before the switch, both methods after it: never a mix.
        assert all(set(s) == ({"bm25"} if index_method == "bm25" else {"bm25", "semantic"}) for s in scores)
    assert selections[-1].ranking.method == "hybrid"


async def test_a_small_or_cached_catalog_still_waits_for_its_vectors(tmp_path):
    embedder = HashEmbedder()
    config = ToolFilterConfig(embedding={"cache_dir": str(tmp_path / "cache"), "background_above": 10_000})
    manager = await ToolFilterManager.from_source(Catalog(catalog()[:200]), config, embedding_service=embedder)
    assert (await manager.select("refund the invoice")).ranking.method == "hybrid"


async def test_a_background_build_that_fails_says_so_in_every_ranking_until_it_recovers(tmp_path, caplog):
    class FailingCatalogCalls(GatedEmbedder):
        async def generate_embeddings(self, texts, settings=None, **kwargs):
            if len(texts) > 16:
                raise RuntimeError("rejected")
            return await super().generate_embeddings(texts, settings, **kwargs)

    config = ToolFilterConfig(embedding={"background_above": 100, "cooldown_seconds": 3600})
    manager = await ToolFilterManager.from_source(Catalog(catalog()), config, embedding_service=FailingCatalogCalls())
    await manager.vectors_ready()
    ranking = (await manager.select("refund the invoice")).ranking
    assert ranking.method == "bm25"
    assert (ranking.fallback_reason or "").startswith("building the tool vectors failed")  # not "no service"
    assert "embedding.cooldown_seconds=3600" in ranking.fallback_reason
