"""Learning files and locks another local user can touch, text a user controls on the request path, and
a lock held elsewhere: none of them breaks a request, blocks the event loop or writes through a link."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from sk_toolfilter import ToolFilterConfig, create_tool_filter
from sk_toolfilter.basics.files import exclusive_lock
from sk_toolfilter.retrieval.memory import LearningMemory
from sk_toolfilter.selection.learning import learning_context
from sk_toolfilter.store.learning_file import LearningFile
from tests.conftest import HashEmbedder, build_demo_kernel
from tests.test_agent_loop import completed_turns

AS_ROOT = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to own a file as another user"
)


def learned_memory(rows: int = 3, memory: LearningMemory | None = None) -> LearningMemory:
    memory = memory if memory is not None else LearningMemory()
    rng = np.random.default_rng(0)
    for i in range(rows):
        memory.learn(rng.standard_normal(8), ["Shop-order"], key=f"k{i}", conversation=f"c{i}")
    return memory


@pytest.mark.parametrize("where", ["conversation", "scope", "request"])
async def test_a_lone_surrogate_in_any_text_a_user_controls_is_answered_and_learned(demo_kernel, where):
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig(learning={"scope": "tenant_id"}))
    odd = "tenant \ud800 one"
    request = f"what time is it in Tokyo {odd}" if where == "request" else "what time is it in Tokyo"
    history = completed_turns((request, ["Time-current_time"]))
    history.add_user_message("and in Paris?")
    context = {"conversation": odd} if where == "conversation" else {}
    with learning_context(scope=odd if where == "scope" else "acme", **context):
        selection = await manager.select_for_history(history)
        await manager.learning.settled()
    assert "Time-current_time" in selection.names
    assert len(manager.learning.memory) == 1


def test_a_symlinked_learning_file_is_refused_and_never_written_through(tmp_path, caplog):
    target = tmp_path / "elsewhere.npz"
    target.write_bytes(b"someone else's bytes")
    link = tmp_path / "learned.npz"
    link.symlink_to(target)
    file = LearningFile(link, "shop", "m", every_seconds=0)
    memory = LearningMemory()
    file.load_into(memory)
    learned_memory(memory=memory)
    assert file.blocked is not None and "symbolic link" in file.blocked
    assert file.flush(memory) is False
    assert link.is_symlink() and target.read_bytes() == b"someone else's bytes"
    assert any("symbolic link" in r.getMessage() for r in caplog.records)


def test_a_lock_file_planted_as_a_link_is_refused(tmp_path):
    victim = tmp_path / "root-only" / "created-through-the-link"
    victim.parent.mkdir()
    lock = tmp_path / "learned.npz.lock"
    lock.symlink_to(victim)
    file = LearningFile(tmp_path / "learned.npz", "shop", "m", every_seconds=0)
    memory = learned_memory()
    assert file.flush(memory) is False
    assert not victim.exists()  # nothing was created through the link
    assert file.write_error is not None and "symbolic link" in file.write_error


@AS_ROOT
def test_a_learning_file_or_lock_owned_by_another_user_is_refused(tmp_path):
    path = tmp_path / "learned.npz"
    LearningFile(path, "shop", "m", every_seconds=0).flush(learned_memory())
    os.chown(path, 65534, 65534)  # swapped in by another local user
    file = LearningFile(path, "shop", "m", every_seconds=0)
    memory = LearningMemory()
    file.load_into(memory)
    assert len(memory) == 0 and file.blocked is not None and "another user" in file.blocked
    lock = tmp_path / "other.npz.lock"
    lock.touch()
    os.chown(lock, 65534, 65534)
    with pytest.raises(PermissionError), exclusive_lock(lock):
        pass


def test_a_new_learning_file_and_its_lock_are_private_and_killed_writers_leave_no_temporaries(tmp_path):
    path = tmp_path / "learned.npz"
    for number in range(3):  # what a writer killed inside write_atomically leaves behind
        (tmp_path / f"learned.npz.dead{number}.tmp").write_bytes(b"x" * 1000)
    assert LearningFile(path, "shop", "m", every_seconds=0).flush(learned_memory()) is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["learned.npz", "learned.npz.lock"]
    assert (path.stat().st_mode & 0o777) == 0o600 and (tmp_path / "learned.npz.lock").stat().st_mode & 0o077 == 0


HOLDER = """
import fcntl, sys
with open(sys.argv[1], "a+b") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    print("held", flush=True)
    sys.stdin.readline()  # until the test lets go
"""


async def test_aclose_never_blocks_the_event_loop_while_another_process_holds_the_lock(demo_kernel, tmp_path, caplog):
    path = tmp_path / "learned.npz"
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig(learning={"file": str(path)}))
    file = manager.learning.file
    assert file is not None
    file.lock_timeout = 0.5
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path) + ".lock"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with learning_context(conversation="c1"):
            assert await manager.record("what time is it in Tokyo", ["Time-current_time"]) == 1
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.ensure_future(tick())
        before = ticks
        await manager.aclose()  # the write waits for the lock off the loop, then gives up with a warning
        ticker.cancel()
        assert ticks > before  # the loop ran other work while the write waited
        assert not path.exists()
        assert any("held elsewhere" in r.getMessage() for r in caplog.records)
        assert len(manager.learning.memory) == 1  # kept in memory for the next write
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=60)


def test_a_restart_reads_back_every_row_the_bounded_memory_held(tmp_path):
    def bounded() -> LearningMemory:
        return LearningMemory(max_requests=100_000, max_bytes=2**20)

    memory = bounded()
    rng = np.random.default_rng(1)
    for i in range(4000):  # more than the megabyte holds: the oldest leave
        memory.learn(rng.standard_normal(384), ["Shop-order"], key=f"k{i}", conversation=f"c{i}")
    wide = [f"Plugin-{'x' * 500}_{i}" for i in range(12)]  # one row of twelve long names sets the widest row
    memory.learn(rng.standard_normal(384), wide, key="wide", conversation="w")
    held = {row.key for row in memory.rows()}
    path = tmp_path / "learned.npz"
    assert LearningFile(path, "shop", "m", every_seconds=0).flush(memory)
    restarted = bounded()
    LearningFile(path, "shop", "m").load_into(restarted)
    assert {row.key for row in restarted.rows()} == held


class LearningTextsFail(HashEmbedder):
    """A service that fails every call holding a past turn's request (marked 'archived'): what a slow or
    failing call for learning does to the requests it would share a batch or a circuit with."""

    async def generate_embeddings(self, texts: list[str], settings: Any = None, **kwargs: Any) -> np.ndarray:
        if any("archived" in text for text in texts):
            raise RuntimeError("the learning text failed")
        return await super().generate_embeddings(texts, settings, **kwargs)


async def test_learning_never_costs_a_request_its_embedding_or_its_circuit(tmp_path):
    config = ToolFilterConfig(search_method="hybrid", embedding={"cache": False})
    manager = await create_tool_filter(build_demo_kernel(str(tmp_path)), config, embedding_service=LearningTextsFail())
    await manager.index.small_talk_ready()

    async def request(number: int):
        history = completed_turns((f"archived request {number}: what time is it in Oslo", ["Time-current_time"]))
        history.add_user_message(f"and what time is it in city number {number}?")
        with learning_context(conversation=f"c{number}"):
            return await manager.select_for_history(history)

    for _ in range(3):  # concurrent requests, each with a past turn to learn, three waves
        selections = await asyncio.gather(*(request(number) for number in range(40)))
        assert all(selection.ranking.fallback_reason is None for selection in selections)
    await manager.learning.settled()
    assert len(manager.learning.memory) == 0  # learning skipped what it could not embed, quietly


@pytest.mark.parametrize(
    "odd",
    ["\x00\x1b[31m\u2028tenant\x7f", "x" * 200_000, "\ud83d" * 1000, ""],
    ids=["control characters", "200,000 characters", "surrogates", "empty"],
)
async def test_any_text_a_user_controls_in_every_place_still_gets_its_request_answered(demo_kernel, odd):
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig(learning={"scope": "tenant_id"}))
    history = completed_turns((f"what time is it in Tokyo {odd}", ["Time-current_time"]))
    history.add_user_message(f"and in Paris? {odd}")
    with learning_context(scope=odd or None, conversation=odd or None):
        selection = await manager.select_for_history(history)
        await manager.learning.settled()
    assert selection.names  # answered (an empty scope value: answered, neither learning nor reading)
