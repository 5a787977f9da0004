"""The shared tool index against a real PostgreSQL with pgvector (started by the tests from the
binaries .ci/install-postgres installs): replicas that read instead of embedding, atomic version
switches, catalog changes reaching running replicas, and outages served from memory."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest
from semantic_kernel import Kernel
from semantic_kernel.functions import kernel_function

from sk_toolfilter import ToolFilterConfig, ToolFilterManager
from sk_toolfilter.basics.errors import ConfigError, IndexStoreError
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.store.postgres import PostgresIndexStore
from sk_toolfilter.store.records import StoredCatalog, content_hash, pack_image, record_key, to_record

REPO = Path(__file__).resolve().parents[1]


def store_config(dsn: str, **extra) -> ToolFilterConfig:
    """A filter configuration on the shared store, in tables of this test's own."""
    index = {"store": "postgres", "connection_string": dsn, "table_prefix": f"t{uuid.uuid4().hex[:12]}"}
    return ToolFilterConfig.from_mapping({"index": {**index, **extra}})


class Travel:
    @kernel_function(description="Book a flight between two airports on a date.")
    def book_flight(self, origin: str, destination: str) -> str:
        return "booked"

    @kernel_function(description="Find hotels in a city for given dates.")
    def find_hotel(self, city: str) -> str:
        return "hotels"

    @kernel_function(description="Rent a car at an airport.")
    def rent_car(self, airport: str) -> str:
        return "car"


def travel_kernel() -> Kernel:
    kernel = Kernel()
    kernel.add_plugin(Travel(), "Travel")
    return kernel


@pytest.mark.postgres
async def test_a_replica_against_a_warm_store_makes_no_embedding_call(postgres, demo_kernel, hash_embedder, tmp_path):
    config = store_config(postgres.dsn)
    first = await ToolFilterManager.from_kernel(demo_kernel, config, embedding_service=hash_embedder)
    tools = len(first.index)
    assert first.index_store.stats.embedded == tools and first.index_store.stats.published == 1
    calls = hash_embedder.calls

    second = await ToolFilterManager.from_kernel(demo_kernel, config, embedding_service=hash_embedder)
    assert hash_embedder.calls == calls  # not one catalog call: every vector came from the store
    assert second.index_store.stats.loaded == tools and second.index_store.stats.embedded == 0
    assert second.index_store.stats.version == first.index_store.stats.version

    memory = await ToolFilterManager.from_kernel(
        demo_kernel, config.model_copy(update={"index": ToolFilterConfig().index}), embedding_service=hash_embedder
    )
    for query in ["send an email to bob", "convert 5 miles to km", "what time is it in Tokyo", "delete old notes"]:
        assert await second.filter_tools(query) == await memory.filter_tools(query)
        assert await first.filter_tools(query) == await memory.filter_tools(query)
    for manager in (first, second):
        await manager.aclose()


@pytest.mark.postgres
def test_two_processes_share_one_store_through_the_agent_file(postgres, tmp_path):
    """`sk-toolfilter index push` embeds the bundled agent's tools once (real local model); a second
    process (the status command, as a replica) reads them all and embeds nothing."""
    agent = tmp_path / "agent.yaml"
    text = (REPO / "agent.yaml").read_text(encoding="utf-8")
    prefix = f"t{uuid.uuid4().hex[:12]}"
    text = text.replace(
        "tool_filtering:\n",
        "tool_filtering:\n  index:\n    store: postgres\n    connection_string: ${TEST_TOOLS_DB}\n"
        f"    table_prefix: {prefix}\n",
        1,
    )
    agent.write_text(text, encoding="utf-8")
    (tmp_path / "instructions").mkdir()
    (tmp_path / "instructions" / "assistant.md").write_text("You help.", encoding="utf-8")
    env = {**os.environ, "TEST_TOOLS_DB": postgres.dsn, "SK_TOOLFILTER_CACHE": str(tmp_path / "no-cache")}
    env["PYTHONPATH"] = str(REPO)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "sk_toolfilter.cli", *args], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        return done

    def cli(*args: str) -> str:
        return run(*args).stdout

    before = run("index", "status", str(agent))  # before any push: it only compares, nothing is embedded
    assert "nothing published yet (46 tools in the agent)" in before.stdout
    assert "embedding tools" not in before.stderr and "embedded in this process only" not in before.stderr
    pushed = cli("index", "push", str(agent))
    assert "catalog 'atlas'" in pushed and "0 read from the store" in pushed and "(published)" in pushed
    status = cli("index", "status", str(agent))
    assert "embedded here" in status and ", 0 embedded here (current)" in status, status
    assert pushed.split("version ")[1][:16] == status.split("version ")[1][:16]

    # A tools_overrides keyword changes what ranking reads: status must say the store is behind.
    changed = text.replace("  tools_overrides:\n", "  tools_overrides:\n    Math-add: {keywords: [sum]}\n", 1)
    assert changed != text
    agent.write_text(changed, encoding="utf-8")
    status = cli("index", "status", str(agent))
    assert "out of date: 1 new or changed, 0 removed" in status, status
    assert "(published)" in cli("index", "push", str(agent))
    assert "(current)" in cli("index", "status", str(agent))


@pytest.mark.postgres
async def test_a_reader_during_a_switch_sees_one_version_whole(postgres, hash_embedder):
    config = store_config(postgres.dsn).index
    writer_store = await PostgresIndexStore.connect(config)
    reader_store = await PostgresIndexStore.connect(config)
    writer = writer_store.catalog("fleet", "hash-64")
    reader = reader_store.catalog("fleet", "hash-64")

    def catalog(tag: str) -> dict:
        tools = [
            ToolMetadata(plugin="P", name=f"tool_{i}", full_name=f"P-tool_{i}", description=f"{tag} tool number {i}")
            for i in range(600)
        ]
        records = [to_record(t, hash_embedder.vector(t.description) + 1e-3, "hash-64") for t in tools]
        keys = [r["id"] for r in records]
        vectors = np.stack([r["embedding"] for r in records])
        image = StoredCatalog(
            [t.full_name for t in tools], [r["content_hash"] for r in records], keys, vectors, tools=tools
        )
        return {"keys": keys, "new_records": records, "dimensions": 64, "image": lambda: pack_image(image)}

    await writer.publish(**catalog("old"))
    seen: list[set[str]] = []
    first_read = asyncio.Event()
    published = asyncio.Event()

    async def read_until_new(whole: bool) -> None:
        while True:
            version = await reader.current()
            stored = await (reader.load(version) if whole else reader.load_records(version))
            seen.append({t.description.split()[0] for t in stored.tools})
            first_read.set()
            if published.is_set() and "new" in seen[-1]:
                return

    readers = [asyncio.create_task(read_until_new(whole)) for whole in (True, False, True, False)]
    await asyncio.wait_for(first_read.wait(), 30)
    await writer.publish(**catalog("new"))
    published.set()
    await asyncio.wait_for(asyncio.gather(*readers), 60)
    assert all(len(tags) == 1 for tags in seen), [tags for tags in seen if len(tags) != 1]
    assert {"old"} in seen and {"new"} in seen
    await writer_store.close()
    await reader_store.close()


@pytest.mark.postgres
async def test_a_pushed_catalog_change_reaches_a_running_replica_before_its_next_selection(postgres, hash_embedder):
    # top_k 1: the three travel tools would otherwise fit the budget and all be sent.
    config = store_config(postgres.dsn).model_copy(update={"top_k": 1})
    replica = await ToolFilterManager.from_kernel(travel_kernel(), config, embedding_service=hash_embedder)
    before, embedded = replica.index_store.stats.version, replica.index_store.stats.embedded
    assert "Travel-rent_car" not in await replica.filter_tools("hire a vehicle")

    # A new release of the agent describes rent_car better and pushes its catalog.
    class BetterTravel(Travel):
        @kernel_function(name="rent_car", description="Hire a vehicle (car rental) at an airport.")
        def rent_car(self, airport: str) -> str:
            return "car"

    release = Kernel()
    release.add_plugin(BetterTravel(), "Travel")
    pusher = await ToolFilterManager.from_kernel(release, config, embedding_service=hash_embedder)
    assert pusher.index_store.stats.embedded == 1  # only the changed tool was embedded
    assert pusher.index_store.stats.version != before

    assert "Travel-rent_car" in await replica.filter_tools("hire a vehicle")  # the very next selection
    assert replica.index_store.stats.version == pusher.index_store.stats.version
    assert replica.index.get("Travel-rent_car").description.startswith("Hire a vehicle")
    assert replica.index_store.stats.reloads == 1 and replica.index_store.stats.embedded == embedded
    await replica.filter_tools("book a flight")
    assert replica.index_store.stats.reloads == 1  # no reload without a new version
    for manager in (replica, pusher):
        await manager.aclose()


@pytest.mark.postgres
async def test_a_replica_with_publish_false_embeds_its_extra_tools_for_itself_only(postgres, hash_embedder, caplog):
    config = store_config(postgres.dsn)
    await (await ToolFilterManager.from_kernel(travel_kernel(), config, embedding_service=hash_embedder)).aclose()
    kernel = travel_kernel()

    class Weather:
        @kernel_function(description="Weather forecast for a city.")
        def forecast(self, city: str) -> str:
            return "sunny"

    kernel.add_plugin(Weather(), "Weather")
    reader_config = config.model_copy(update={"index": config.index.model_copy(update={"publish": False})})
    with caplog.at_level(logging.WARNING, logger="sk_toolfilter"):
        reader = await ToolFilterManager.from_kernel(kernel, reader_config, embedding_service=hash_embedder)
    stats = reader.index_store.stats
    assert (stats.loaded, stats.embedded, stats.published) == (3, 1, 0)
    assert "Weather-forecast" in await reader.filter_tools("weather forecast for Paris")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "1 tool(s) are not in version" in warnings[0] and "Weather-forecast" in warnings[0]
    assert (await reader.index_store.catalog.current()).tools == 3  # the store's catalog is unchanged
    await reader.aclose()


@pytest.mark.postgres
async def test_a_store_that_goes_away_gives_one_warning_and_the_replica_keeps_serving(
    own_postgres, hash_embedder, caplog
):
    config = store_config(own_postgres.dsn, retry_seconds=0, timeout_seconds=2)
    manager = await ToolFilterManager.from_kernel(travel_kernel(), config, embedding_service=hash_embedder)
    expected = await manager.filter_tools("book a flight to Lisbon")
    own_postgres.stop()
    with caplog.at_level(logging.INFO, logger="sk_toolfilter"):
        for _ in range(5):
            assert await manager.filter_tools("book a flight to Lisbon") == expected
        own_postgres.start()
        for _ in range(1200):  # the background check notices within a few selections (waits until it has)
            assert await manager.filter_tools("book a flight to Lisbon") == expected
            if any("answers again" in r.getMessage() for r in caplog.records):
                break
            await asyncio.sleep(0.05)
    ours = [r for r in caplog.records if r.name.startswith("sk_toolfilter")]
    warnings = [r.getMessage() for r in ours if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "serving catalog 'default' version" in warnings[0] and "from memory" in warnings[0]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r not in ours]  # no driver noise
    assert not [r for r in ours if r.levelno >= logging.ERROR]
    assert any("answers again" in r.getMessage() for r in ours)
    await manager.aclose()


async def test_an_unreachable_store_at_start_is_a_clear_error_without_the_password(hash_embedder):
    dsn = "postgresql://tools:Sup3r-s3cret-pw@127.0.0.1:9/tools"
    config = ToolFilterConfig.from_mapping(
        {"index": {"store": "postgres", "connection_string": dsn, "timeout_seconds": 2}}
    )
    with pytest.raises(IndexStoreError) as caught:
        await ToolFilterManager.from_kernel(travel_kernel(), config, embedding_service=hash_embedder)
    message = str(caught.value)
    assert "cannot connect to PostgreSQL at 127.0.0.1:9/tools as tools" in message
    assert "Sup3r-s3cret-pw" not in message and "Sup3r-s3cret-pw" not in repr(caught.value)


def test_database_keys_under_store_memory_are_a_config_error():
    with pytest.raises(ConfigError, match="connection_string applies to a database store"):
        ToolFilterConfig.from_mapping({"index": {"connection_string": "host=db"}})
    with pytest.raises(ConfigError, match=r"index\.store"):
        ToolFilterConfig.from_mapping({"index": {"store": "redis"}})


def test_record_keys_follow_the_content_and_the_model():
    tool = ToolMetadata(plugin="P", name="f", full_name="P-f", description="does f")
    changed = ToolMetadata(plugin="P", name="f", full_name="P-f", description="does f better")
    assert record_key(content_hash(tool), "m", 64) == record_key(content_hash(tool), "m", 64)
    assert record_key(content_hash(tool), "m", 64) != record_key(content_hash(changed), "m", 64)
    assert record_key(content_hash(tool), "m", 64) != record_key(content_hash(tool), "other", 64)


def test_index_push_on_a_memory_store_says_what_to_configure(tmp_path):
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        textwrap.dedent("""\
        name: small
        tools: []
    """)
    )
    done = subprocess.run(
        [sys.executable, "-m", "sk_toolfilter.cli", "index", "push", str(agent)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 2
    assert "index.store is 'memory'" in done.stderr and "Traceback" not in done.stderr
    json.dumps(done.stderr)


def in_memory_catalog():
    """A shared catalog on SK's in-memory collections (no server), and those collections by name."""
    from semantic_kernel.connectors.in_memory import InMemoryCollection

    from sk_toolfilter.store.shared_catalog import SharedCatalog

    collections: dict[str, InMemoryCollection] = {}

    async def open_collection(name, definition):
        if name not in collections:
            collections[name] = InMemoryCollection(record_type=dict, definition=definition, collection_name=name)
        return collections[name]

    return SharedCatalog(open_collection, "c", "hash-64"), collections


async def test_publishing_keeps_the_previous_version_readable_and_collects_the_one_before(hash_embedder):
    """Catalog mechanics on SK's in-memory collection (no server): content-addressed records,
    versions that share unchanged records, and garbage collection two versions back."""
    catalog, collections = in_memory_catalog()

    def release(descriptions: list[str], positions: list[int] | None = None) -> tuple[list[str], list[dict]]:
        positions = positions or list(range(len(descriptions)))
        tools = [
            ToolMetadata(plugin="P", name=f"t{i}", full_name=f"P-t{i}", description=d)
            for i, d in zip(positions, descriptions, strict=True)
        ]
        records = [to_record(t, hash_embedder.vector(t.description) + 1e-3, "hash-64") for t in tools]
        return [r["id"] for r in records], records

    assert await catalog.current() is None
    v1 = await catalog.publish(*release(["alpha", "beta", "gamma"]), dimensions=64)
    v2 = await catalog.publish(*release(["alpha", "beta", "gamma improved"]), dimensions=64)
    assert v2.previous == v1.version
    assert await catalog.publish(*release(["alpha", "beta", "gamma improved"]), dimensions=64) == v2  # no-op
    assert {t.description for t in (await catalog.load(v1)).tools} == {"alpha", "beta", "gamma"}  # still readable

    v3 = await catalog.publish(*release(["alpha", "beta 2", "gamma improved"]), dimensions=64)
    with pytest.raises(IndexStoreError, match="is gone"):
        await catalog.load(v1)  # collected: two versions back
    assert [t.description for t in (await catalog.load(v2)).tools] == ["alpha", "beta", "gamma improved"]
    assert [t.description for t in (await catalog.load(v3)).tools] == ["alpha", "beta 2", "gamma improved"]
    tools = collections["sk_toolfilter_tools_64"]
    stored = await tools.get(
        [r["id"] for r in release(["alpha", "beta", "gamma", "beta 2", "gamma improved"], [0, 1, 2, 1, 2])[1]]
    )
    assert sorted(r["description"] for r in stored) == ["alpha", "beta", "beta 2", "gamma improved"]  # "gamma" went


async def test_a_damaged_image_is_one_warning_and_the_records_are_read(hash_embedder, caplog):
    catalog, _ = in_memory_catalog()
    tools = [ToolMetadata(plugin="P", name=f"t{i}", full_name=f"P-t{i}", description=f"tool {i}") for i in range(5)]
    records = [to_record(t, hash_embedder.vector(t.description) + 1e-3, "hash-64") for t in tools]
    image = StoredCatalog(
        [t.full_name for t in tools],
        [r["content_hash"] for r in records],
        [r["id"] for r in records],
        np.ones((5, 64)),
        tools=tools,
    )
    version = await catalog.publish([r["id"] for r in records], records, 64, image=lambda: pack_image(image)[:-40])
    with caplog.at_level(logging.WARNING, logger="sk_toolfilter"):
        stored = await catalog.load(version)
    assert [t.description for t in stored.tools] == [f"tool {i}" for i in range(5)]
    assert np.allclose(stored.vectors, np.stack([r["embedding"] for r in records]))  # the records' vectors
    assert [r.getMessage() for r in caplog.records if "damaged catalog image" in r.getMessage()]


@pytest.mark.postgres
def test_the_laptop_recipe_starts_a_server_the_shared_index_can_use_and_removes_it():
    """README "On a laptop": python -m tests.pg_server DIR, with the binaries CI installs."""
    import re
    import signal

    from tests.conftest import postgres_install

    root = Path(__file__).resolve().parents[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.pg_server", postgres_install()],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [process.stdout.readline() for _ in range(3)]  # printed once the server accepts connections
        assert re.search(r"127\.0\.0\.1:(\d+)", lines[0]) and "Ctrl-C" in lines[2], [*lines, process.stderr.read()]
        dsn = re.search(r"connection_string: '([^']+)'", lines[1]).group(1)
        config = ToolFilterConfig.from_mapping({"index": {"store": "postgres", "connection_string": dsn}})

        async def connect() -> None:
            store = await PostgresIndexStore.connect(config.index)
            await store.close()

        asyncio.run(connect())  # connects and finds (or creates) the vector extension
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=120)
    assert code == 0, process.stderr.read()


@pytest.mark.postgres
async def test_a_replica_whose_cpu_computes_other_vectors_embeds_the_catalog_itself(postgres, caplog, tmp_path):
    # A local int8 model's vectors differ by CPU: a replica checks a few stored tools against what its
    # own encoder gives before it trusts the store's vectors, and never publishes over another CPU's.
    from sk_toolfilter import LocalEmbeddingGenerator

    config = store_config(postgres.dsn)
    publisher = await ToolFilterManager.from_kernel(
        travel_kernel(), config, embedding_service=LocalEmbeddingGenerator()
    )
    version = publisher.index_store.stats.version
    alike = await ToolFilterManager.from_kernel(travel_kernel(), config, embedding_service=LocalEmbeddingGenerator())
    assert (alike.index_store.stats.loaded, alike.index_store.stats.embedded) == (3, 0)

    other_cpu = LocalEmbeddingGenerator()  # the same model; its vectors turned ~0.97, as other arithmetic gives
    encoder = other_cpu._documents
    embed = encoder.embed

    def turned(texts, **options):
        vectors = embed(texts, **options)
        vectors = vectors * 0.8 + np.roll(vectors, 1, axis=1) * 0.2
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    encoder.embed = turned
    own_disk = config.model_copy(update={"embedding": config.embedding.model_copy(update={"cache_dir": str(tmp_path)})})
    with caplog.at_level(logging.WARNING, logger="sk_toolfilter"):
        replica = await ToolFilterManager.from_kernel(travel_kernel(), own_disk, embedding_service=other_cpu)
    stats = replica.index_store.stats
    assert (stats.loaded, stats.embedded, stats.published) == (0, 3, 0)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "computes differently" in warnings[0] and "never publishes" in warnings[0]
    assert (await replica.index_store.catalog.current()).version == version  # the store is unchanged
    assert "Travel-book_flight" in await replica.filter_tools("book a flight from Paris to Rome")
    for manager in (publisher, alike, replica):
        await manager.aclose()


@pytest.mark.postgres
async def test_replicas_on_one_store_see_each_others_learning_and_forget_wipes_it_for_all(
    postgres, demo_kernel, hash_embedder
):
    from tests.test_agent_loop import completed_turns

    config = store_config(postgres.dsn).updated(learning={"enabled": True, "sync_seconds": 3600})
    first = await ToolFilterManager.from_kernel(demo_kernel, config, embedding_service=hash_embedder)
    second = await ToolFilterManager.from_kernel(demo_kernel, config, embedding_service=hash_embedder)
    names = [n for n in first.index.names if n not in first.discovery_names]
    for manager, tool, secret in ((first, names[0], "dentist on 4 May"), (second, names[5], "parcel 1Z999")):
        history = completed_turns((f"{secret}: first", [tool]), (f"{secret}: again", [tool]))
        history.add_user_message("next")
        await manager.select_for_history(history)  # each replica learns its own two requests
        await manager.learning.settled()
    for manager in (first, second, first):  # write, read what the other wrote (explicit: no timing)
        assert manager.learning.table is not None
        await manager.learning.table.sync(manager.learning.memory)

    for manager in (first, second):
        learned = {tool for row in manager.learning.memory.rows() for tool in row.tools}
        assert len(manager.learning.memory) == 4 and learned == {names[0], names[5]}
    import psycopg

    async with await psycopg.AsyncConnection.connect(postgres.dsn) as connection:
        table = f"{config.index.table_prefix}_learned"
        rows = await (await connection.execute(f"SELECT catalog, fingerprint, tools FROM {table}")).fetchall()
    assert len(rows) == 4 and "dentist" not in repr(rows) and "1Z999" not in repr(rows)

    await first.learning.forget()
    assert len(first.learning.memory) == 0
    # A replica still running learned before the wipe: its next sync drops that instead of writing it
    # back, and what it learns after is shared as before.
    assert second.learning.table is not None
    await second.learning.table.sync(second.learning.memory)
    assert len(second.learning.memory) == 0
    history = completed_turns(("after the wipe", [names[7]]))
    history.add_user_message("next")
    await second.select_for_history(history)
    await second.learning.settled()
    await second.aclose()
    await first.aclose()
    async with await psycopg.AsyncConnection.connect(postgres.dsn) as connection:
        left = await (await connection.execute(f"SELECT tools FROM {table}")).fetchall()
    assert [json.loads(tools) for (tools,) in left] == [[names[7]]]
    restarted = await ToolFilterManager.from_kernel(demo_kernel, config, embedding_service=hash_embedder)
    assert [row.tools for row in restarted.learning.memory.rows()] == [(names[7],)]
    await restarted.aclose()


class CountingEmbeddings:
    """A loopback OpenAI-compatible embeddings server (hashed bags of words) that counts the texts it embeds."""

    def __init__(self) -> None:
        import http.server
        import threading

        from tests.conftest import HashEmbedder, send_json

        embedder, counted = HashEmbedder(), self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                counted.texts += len(texts)
                data = [
                    {"object": "embedding", "index": i, "embedding": embedder.vector(t).tolist()}
                    for i, t in enumerate(texts)
                ]
                usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
                send_json(
                    self, json.dumps({"object": "list", "data": data, "model": body["model"], "usage": usage}).encode()
                )

            def log_message(self, *args):
                pass

        self.texts = 0
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def config(self) -> dict:
        url = f"http://127.0.0.1:{self.server.server_port}/v1"
        return {
            "provider": "openai",
            "model": "text-embedding-3-small",
            "base_url": url,
            "api_key": "offline",
            "cache": False,
        }


@pytest.mark.postgres
async def test_a_replica_embeds_only_its_query_the_small_talk_comes_from_the_store(postgres, demo_kernel):
    """A deployment's own embedding model: the first process embeds the catalog and the small talk
    (descriptions and ~3,100 exemplars) and keeps both in the store; a replica embeds only its request."""
    first_service, replica_service = CountingEmbeddings(), CountingEmbeddings()
    config = store_config(postgres.dsn)
    first = await ToolFilterManager.from_kernel(demo_kernel, config.updated(embedding=first_service.config()))
    await first.vectors_ready()  # the small talk embedded here, and kept in the store
    assert first_service.texts > 3000

    replica = await ToolFilterManager.from_kernel(demo_kernel, config.updated(embedding=replica_service.config()))
    await replica.vectors_ready()
    for query in ("hi there", "convert 5 miles to km"):
        assert await replica.filter_tools(query) == await first.filter_tools(query)
        assert await replica.explain(query) == await first.explain(query)
    assert replica_service.texts <= 2  # its two requests; nothing at start
    for manager in (first, replica):
        await manager.aclose()
    for service in (first_service, replica_service):
        service.server.shutdown()


@pytest.mark.postgres
async def test_forget_is_a_time_on_the_table_for_restarting_replicas_files_and_rows_learned_after(
    postgres, demo_kernel, hash_embedder, tmp_path
):
    """Each replica keeps a learning file on its own machine and shares the table. After a wipe, a replica
    restarting from its machine's unwiped file writes none of it back, and rows learned after the wipe by
    two replicas on the table stay — through a second wipe's bookkeeping too."""
    from tests.test_agent_loop import completed_turns

    base = store_config(postgres.dsn).updated(learning={"enabled": True, "sync_seconds": 3600})

    def machine(number: int) -> ToolFilterConfig:
        return base.updated(learning={**base.learning.model_dump(), "file": str(tmp_path / f"m{number}.npz")})

    async def teach(manager: ToolFilterManager, tool: str, *requests: str) -> None:
        for request in requests:
            history = completed_turns((request, [tool]))
            history.add_user_message("next")
            await manager.select_for_history(history)
        await manager.learning.settled()

    async def table_tools() -> list[list[str]]:
        import psycopg

        async with await psycopg.AsyncConnection.connect(postgres.dsn) as connection:
            rows = await (await connection.execute(f"SELECT tools FROM {base.index.table_prefix}_learned")).fetchall()
        return sorted(json.loads(tools) for (tools,) in rows)

    first = await ToolFilterManager.from_kernel(demo_kernel, machine(1), embedding_service=hash_embedder)
    names = [n for n in first.index.names if n not in first.discovery_names]
    await teach(first, names[0], *(f"old request {i}" for i in range(5)))
    await first.aclose()  # machine 1's file and the table hold the 5 rows
    assert len(await table_tools()) == 5
    wiper = await ToolFilterManager.from_kernel(demo_kernel, machine(2), embedding_service=hash_embedder)
    await wiper.learning.forget()  # machine 2 wipes: the table and its own file, not machine 1's file
    await wiper.aclose()
    assert await table_tools() == []

    restarted = await ToolFilterManager.from_kernel(demo_kernel, machine(1), embedding_service=hash_embedder)
    assert len(restarted.learning.memory) == 0  # its machine's file is older than the wipe: none taken
    other = await ToolFilterManager.from_kernel(demo_kernel, machine(3), embedding_service=hash_embedder)
    await teach(restarted, names[1], "new request a", "new request b")
    await teach(other, names[2], "new request c", "new request d")
    for manager in (restarted, other, restarted):
        assert manager.learning.table is not None
        await manager.learning.table.sync(manager.learning.memory)
    await restarted.aclose()
    await other.aclose()
    assert await table_tools() == [[names[1]]] * 2 + [[names[2]]] * 2  # the 4 rows learned after the wipe
    again = await ToolFilterManager.from_kernel(demo_kernel, machine(1), embedding_service=hash_embedder)
    assert sorted(row.tools for row in again.learning.memory.rows()) == [(names[1],)] * 2 + [(names[2],)] * 2
    await again.aclose()
