"""Learning from use keeps its promises: forget forgets, one conversation never steers another user's
tools, a full memory stays bounded and cheap, the files it reads are bounded, nothing printed leaks a key."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from sk_toolfilter import ConfigError, ToolFilterConfig, create_tool_filter
from sk_toolfilter.cli import main
from sk_toolfilter.retrieval.memory import MAX_CLOCK_SKEW_SECONDS, LearningMemory, LearningRule
from sk_toolfilter.selection.learning import learning_context
from sk_toolfilter.store.learning_file import LearningFile, forget_file
from tests.test_agent_loop import completed_turns

ROOT = Path(__file__).resolve().parents[1]
INJECTED = "Messaging-send_direct_message"
ASK = "summarize the text in the file minutes.txt for me"


def unit(rng: np.random.Generator, dims: int = 16) -> np.ndarray:
    v = rng.standard_normal(dims).astype(np.float32)
    return v / np.linalg.norm(v)


def near(v: np.ndarray, rng: np.random.Generator, noise: float = 0.1) -> np.ndarray:
    return v + noise * unit(rng, v.shape[0])


# -- forget means forgotten: the file, with another process running ---------------------------------------

REPLICA = """
import sys, numpy as np
from sk_toolfilter.retrieval.memory import LearningMemory
from sk_toolfilter.store.learning_file import LearningFile
file = LearningFile(sys.argv[1], "shop", "m", every_seconds=0)
memory = LearningMemory()
file.load_into(memory)
rng = np.random.default_rng(0)
for line in sys.stdin:
    word = line.strip()
    if word == "check":
        file.check(memory)  # what a request's tick does: notice a wipe with nothing to write
    else:
        memory.learn(rng.standard_normal(16), ["Shop-" + word], key=word)
        file.flush(memory)
    print(len(memory), flush=True)
"""


class Replica:
    """A second process of the agent, learning into the same file when told (an event per line)."""

    def __init__(self, path: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-c", REPLICA, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def say(self, word: str) -> int:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(word + "\n")
        self.process.stdin.flush()
        return int(self.process.stdout.readline())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def file_tools(path: Path) -> list[tuple[str, ...]]:
    memory = LearningMemory()
    LearningFile(path, "shop", "m").load_into(memory)
    return [row.tools for row in memory.rows()]


def test_forget_on_a_file_holds_while_other_processes_of_the_agent_keep_learning(tmp_path):
    path = tmp_path / "learned.npz"
    writer, idle = Replica(path), Replica(path)
    try:
        for word in ("refund", "invoice", "ship"):
            writer.say(word)
        assert idle.say("check") == 3  # the idle process read them too (its file check)
        assert forget_file(path, "shop") == 3
        assert file_tools(path) == []  # read back after the command returned, not the count it printed
        assert writer.say("track") == 1  # its next write drops what it knew before the wipe
        assert file_tools(path) == [("Shop-track",)]
        assert idle.say("check") == 1  # the idle one dropped it without writing anything
    finally:
        writer.close()
        idle.close()
    assert file_tools(path) == [("Shop-track",)]


def test_forget_of_a_file_no_process_has_written_yet_is_still_a_generation(tmp_path):
    path = tmp_path / "learned.npz"
    memory, running = LearningMemory(), LearningFile(path, "shop", "m", every_seconds=0)
    running.load_into(memory)
    memory.learn(np.ones(16), ["Shop-refund"], key="before")
    assert forget_file(path, "shop") == 0  # nothing was written: still a wipe every process sees
    running.flush(memory)
    assert file_tools(path) == []


# -- forget on the shared table, through the CLI -------------------------------------------------------------


@pytest.mark.postgres
def test_forget_on_the_shared_store_deletes_and_the_command_syncs_nothing_back(postgres, tmp_path, capsys):
    import asyncio

    import psycopg

    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import load_agent_file

    spec = yaml.safe_load((ROOT / "agent.yaml").read_text().replace("root: sandbox", f"root: {tmp_path / 'sandbox'}"))
    prefix = f"t{os.getpid()}{int(time.time() * 1000) % 100000}"
    spec["tool_filtering"]["index"] = {"store": "postgres", "connection_string": postgres.dsn, "table_prefix": prefix}
    spec["tool_filtering"]["learning"] = {"enabled": True, "sync_seconds": 3600}
    (tmp_path / "instructions").mkdir()
    (tmp_path / "instructions" / "assistant.md").write_text("Be helpful.")
    agent = tmp_path / "agent.yaml"
    agent.write_text(yaml.safe_dump(spec))

    async def count() -> int:
        async with await psycopg.AsyncConnection.connect(postgres.dsn) as connection:
            return (await (await connection.execute(f"SELECT count(*) FROM {prefix}_learned")).fetchone())[0]

    async def replica_learns(*requests: str) -> None:
        async with await open_toolset(load_agent_file(agent)) as tools:
            manager = tools.manager
            for request in requests:
                history = completed_turns((request, ["Messaging-post_to_channel"]))
                history.add_user_message("thanks")
                await manager.select_for_history(history)
            await manager.learning.settled()

    asyncio.run(replica_learns("tell ops the backup ran", "tell ops the restore ran", "tell ops the deploy ran"))
    assert asyncio.run(count()) == 3
    assert main(["forget", str(agent)]) == 0
    assert "3 learned requests" in capsys.readouterr().out
    assert asyncio.run(count()) == 0  # read after the command returned: nothing came back
    asyncio.run(replica_learns("tell ops the audit ran"))  # a replica that starts after: only its own
    assert asyncio.run(count()) == 1


# -- scope: one conversation never steers another user's tools -------------------------------------------------


async def test_one_conversation_with_an_injected_call_moves_nothing_for_other_users(demo_kernel):
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig())
    victims = (ASK, "summarize the text in the file agenda.txt for me")
    for victim in victims:
        assert INJECTED not in await manager.filter_tools(victim)
    # One conversation: 40 genuine turns (trust rises), and the injected call on requests like the victims'.
    genuine = [(f"what time is it now in time zone number {i}", ["Time-current_time"]) for i in range(40)]
    injected = [
        (f"summarize the text in the file notes{i}.txt for me", [INJECTED, "Files-read_file"]) for i in range(3)
    ]
    history = completed_turns(*genuine, *injected)
    history.add_user_message("thanks")
    await manager.select_for_history(history)
    await manager.learning.settled()
    assert len(manager.learning.memory) == 43
    # The attack is real: a rule that trusted one conversation would move the injected tool.
    exposed = LearningMemory(rule=LearningRule(min_conversations=1))
    exposed.restore(manager.learning.memory.rows())
    vector = (await manager.index.embed_queries([ASK]))[0]
    assert INJECTED in exposed.evidence(vector)
    for victim in victims:
        assert INJECTED not in await manager.filter_tools(victim)
        assert not (await manager.select(victim)).ranking.learned


async def test_a_scoped_agent_reads_only_its_own_scope_and_an_unscoped_request_learns_nothing(demo_kernel, caplog):
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig(learning={"scope": "tenant_id"}))
    past = ["let the ops crew know the nightly backup finished on " + d for d in ("Monday", "Tuesday", "Wednesday")]
    with learning_context(scope="acme"):
        for request in past:  # three conversations of tenant acme
            history = completed_turns((request, ["Messaging-post_to_channel"]))
            history.add_user_message("thanks")
            await manager.select_for_history(history)
    with caplog.at_level(logging.WARNING):
        history = completed_turns(("post the release notes to #general", ["Messaging-post_to_channel"]))
        history.add_user_message("thanks")
        await manager.select_for_history(history)  # no scope named: neither learns nor reads
    await manager.learning.settled()
    assert len(manager.learning.memory) == 3 and len(manager.learning.memory.scopes()) == 1
    assert sum("named no 'tenant_id'" in r.getMessage() for r in caplog.records) == 1
    new = "let the ops crew know the nightly backup finished on Friday"
    with learning_context(scope="acme"):
        own = (await manager.select(new)).ranking.learned
    with learning_context(scope="globex"):
        other = (await manager.select(new)).ranking.learned
    assert "Messaging-post_to_channel" in own
    assert not other  # another tenant's traffic steers nothing here


def test_the_nearest_turns_of_one_conversation_weigh_what_one_does():
    rng = np.random.default_rng(7)
    v = unit(rng)
    memory = LearningMemory(rule=LearningRule(min_conversations=2))
    for i in range(30):  # one conversation, many near turns
        memory.learn(near(v, rng, 0.05), ["spam"], key=f"spam{i}", conversation="attacker")
    assert memory.evidence(v) == {}  # one conversation is never enough
    for i in range(2):
        memory.learn(near(v, rng, 0.05), ["real"], key=f"real{i}", conversation=f"user{i}")
    usage = memory.evidence(v)
    assert usage["real"].requests == 2 and "spam" not in usage
    memory.learn(near(v, rng, 0.05), ["spam"], key="spam-second", conversation="accomplice")
    usage = memory.evidence(v)
    assert usage["spam"].requests == 2 and usage["spam"].score <= usage["real"].score * 1.5  # 31 turns, 2 votes


# -- a full memory: bounded, and eviction takes the oldest without resetting trust ---------------------------


def test_a_full_memory_evicts_the_oldest_row_one_at_a_time_and_keeps_its_trust():
    rng = np.random.default_rng(8)
    memory = LearningMemory(max_requests=200)
    centres = [unit(rng, 32) for _ in range(10)]
    start = time.time() - 10_000
    for i in range(200):
        memory.learn(near(centres[i % 10], rng), [f"tool{i % 10}"], key=f"k{i}", at=start + i)
    trust = memory.settle()
    assert trust > 0.5
    for i in range(200, 205):
        memory.learn(near(centres[i % 10], rng), [f"tool{i % 10}"], key=f"k{i}", at=start + i)
        kept = set(memory.keys())
        assert len(memory) == 200 and f"k{i - 200}" not in kept and f"k{i - 199}" in kept
    assert memory.trust_now() == trust  # five new rows of 200: the estimate stands (it is never reset)


def test_rows_dated_in_the_future_are_dated_now_and_age_out_like_the_rest():
    now = [1e9]
    memory = LearningMemory(max_requests=100, max_age_days=30, clock=lambda: now[0])
    rng = np.random.default_rng(9)
    for i in range(98):
        memory.learn(unit(rng), ["ahead"], key=f"future{i}", at=now[0] + 365 * 86_400)
    memory.learn(unit(rng), ["ahead"], key="far", at=1e308)
    assert memory.clamped == 99 and max(row.at for row in memory.rows()) <= now[0] + MAX_CLOCK_SKEW_SECONDS
    for day in range(60):  # two months of genuine traffic, a request a day
        now[0] += 86_400
        memory.learn(unit(rng), ["genuine"], key=f"day{day}")
    assert {tool for row in memory.rows() for tool in row.tools} == {"genuine"}


def test_a_file_and_a_table_row_from_the_future_warn_once_and_are_dated_now(tmp_path, caplog):
    path = tmp_path / "learned.npz"
    writer, memory = LearningFile(path, "shop", "m"), LearningMemory()
    memory.learn(np.ones(16), ["Shop-refund"], key="a")
    writer.flush(memory)
    with zipfile.ZipFile(path) as archive:  # a replica whose clock runs a year ahead wrote these times
        members = {name: archive.read(name) for name in archive.namelist()}
    import io

    future = io.BytesIO()
    np.save(future, np.array([time.time() + 365 * 86_400]))
    members["times.npy"] = future.getvalue()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    restored = LearningMemory()
    with caplog.at_level(logging.WARNING):
        assert LearningFile(path, "shop", "m").load_into(restored) == 1
    assert restored.rows()[0].at <= time.time() + MAX_CLOCK_SKEW_SECONDS
    assert sum("dated in the future" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("name_chars", [8, 200, 500])
def test_the_memory_never_holds_more_bytes_than_it_may_whatever_the_names(name_chars):
    limit = int(0.1 * 2**20)
    memory = LearningMemory(max_bytes=limit)
    rng = np.random.default_rng(10)
    for i in range(2_000):
        names = [f"Plugin-{'x' * name_chars}{i}-{j}" for j in range(3)]
        memory.learn(unit(rng, 384), names, key=f"k{i}")
        assert memory.nbytes <= limit
    restored = LearningMemory(max_bytes=limit // 2)
    restored.restore(memory.rows())
    assert len(restored) > 0 and restored.nbytes <= limit // 2
    kept = restored.rows()[-1]
    assert not restored.learn(unit(rng, 384), ["x" * (limit // 2)], key=kept.key)  # larger than the memory
    assert restored.knows(kept.key, kept.tools)  # the row it would have replaced stays


# -- files the library reads ---------------------------------------------------------------------------------


def test_a_learning_file_that_is_a_fifo_or_a_link_to_a_device_is_refused_with_one_warning(tmp_path, caplog):
    fifo = tmp_path / "learned.npz"
    os.mkfifo(fifo)
    link = tmp_path / "zero.npz"
    link.symlink_to("/dev/zero")
    with caplog.at_level(logging.WARNING):
        for path in (fifo, link):
            assert LearningFile(path, "shop", "m").load_into(LearningMemory()) == 0  # returns: no hang
    messages = [r.getMessage() for r in caplog.records]
    assert any("is a FIFO" in m for m in messages) and any("symbolic link" in m for m in messages)  # never followed


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_ranker_that_is_not_a_regular_file_is_a_config_error_naming_it(tmp_path, kind):
    from sk_toolfilter.retrieval.candidate_features import load_learned_ranker

    path = tmp_path / f"ranker-{kind}.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match=f"{path}.*must be a regular file"):
        load_learned_ranker(str(path))


def test_a_small_compressed_file_of_millions_of_rows_is_refused_from_its_headers(tmp_path, caplog):
    path = tmp_path / "learned.npz"
    rows = 4_000_000
    header = json.dumps({"format": 2, "catalog": "shop", "model": "m", "generation": 0})
    np.savez_compressed(
        path,
        header=np.array(header),
        keys=np.zeros(rows, dtype="U32"),
        vectors=np.zeros((rows, 16), dtype=np.float32),
        times=np.zeros(rows),
        tools=np.zeros(rows, dtype="U8"),
        conversations=np.zeros(rows, dtype="U32"),
        scopes=np.zeros(rows, dtype="U32"),
    )
    assert path.stat().st_size < 8 * 2**20
    memory = LearningMemory(max_bytes=2**20)
    tracemalloc.start()
    with caplog.at_level(logging.WARNING):
        assert LearningFile(path, "shop", "m").load_into(memory) == 0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 16 * 2**20  # nothing of the 4 million rows was decompressed
    assert any("4,000,000 rows, over the bound" in r.getMessage() for r in caplog.records)


def test_a_file_over_the_newest_rows_the_memory_holds_is_read_in_memory_proportional_to_them(tmp_path):
    path = tmp_path / "learned.npz"
    rng = np.random.default_rng(11)
    big = LearningMemory(max_requests=9_000)
    for i in range(9_000):
        big.learn(unit(rng, 384), ["Shop-refund"], key=f"k{i}", at=time.time() - 9_000 + i)
    LearningFile(path, "shop", "m").flush(big)
    small = LearningMemory(max_requests=100)
    tracemalloc.start()
    assert LearningFile(path, "shop", "m").load_into(small) == 100
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 9_000 * 384 * 4 / 4  # never the whole file's vectors at once
    assert {row.key for row in small.rows()} == {f"k{i}" for i in range(8_900, 9_000)}


# -- nothing printed leaks a key -----------------------------------------------------------------------------

LITERAL_KEY = "ollama-7f3a9c2e41"


def failing_kernel():
    raise RuntimeError(f"401 Unauthorized: Incorrect API key provided: {LITERAL_KEY}")


@pytest.mark.parametrize("verbose", [False, True])
def test_a_literal_key_from_the_agent_file_is_never_printed_by_the_cli_even_in_a_traceback(tmp_path, capsys, verbose):
    spec = yaml.safe_load((ROOT / "agent.yaml").read_text())
    spec["model"] = {**spec.get("model", {}), "api_key": LITERAL_KEY}
    spec["tool_filtering"]["learning"] = {"file": "learned.npz"}
    spec["instructions"] = "Be helpful."
    agent = tmp_path / "agent.yaml"
    agent.write_text(yaml.safe_dump(spec))
    calls = tmp_path / "calls.jsonl"
    calls.write_text('{"query": "hi", "tools": ["Time-now"]}\n')
    argv = ["learn", str(agent), "--calls", str(calls), "--kernel", "tests.test_learning_promises:failing_kernel"]
    assert main(["-v", *argv] if verbose else argv) == 1
    captured = capsys.readouterr()
    assert "401 Unauthorized" in captured.err and LITERAL_KEY not in captured.err + captured.out
    assert ("Traceback" in captured.err) == verbose


@pytest.mark.parametrize("named", [False, True])
async def test_histories_that_open_alike_are_one_conversation_unless_the_app_names_them(demo_kernel, named):
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig())
    for thread in ("t1", "t2"):
        history = completed_turns(("hello", []), (f"let the ops crew know the backup finished ({thread})", [INJECTED]))
        history.add_user_message("thanks")
        with learning_context(conversation=thread if named else None):
            await manager.select_for_history(history)
    await manager.learning.settled()
    rows = manager.learning.memory.rows()
    assert len(rows) == 2 and len({row.conversation for row in rows}) == (2 if named else 1)
