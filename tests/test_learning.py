"""Learning from use: a request like one the agent has served gets the tools that served it."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from semantic_kernel.contents import ChatHistory

from sk_toolfilter import ToolFilterConfig, create_tool_filter
from sk_toolfilter.cli import main
from sk_toolfilter.retrieval.memory import LearningMemory, LearningRule
from sk_toolfilter.retrieval.search import Ranking, rank_tools
from sk_toolfilter.selection.learning import request_key
from sk_toolfilter.store.learning_file import LearningFile
from tests.test_agent_loop import completed_turns

ROOT = Path(__file__).resolve().parents[1]
PAST = [f"let the ops crew know the nightly backup finished on {day}" for day in ("Monday", "Tuesday", "Wednesday")]
NEW = "let the ops crew know the nightly backup finished on Friday"
TARGET = "Messaging-post_to_channel"
ONE_CONVERSATION = LearningRule(min_conversations=1)  # what the memory tests of other things read with


def unit(rng: np.random.Generator, dims: int = 16) -> np.ndarray:
    v = rng.standard_normal(dims).astype(np.float32)
    return v / np.linalg.norm(v)


def near(v: np.ndarray, rng: np.random.Generator, noise: float = 0.1) -> np.ndarray:
    return v + noise * unit(rng, v.shape[0])


@pytest.fixture
def learning_agent(tmp_path) -> Path:
    """The bundled agent with learning on, kept in a file beside it."""
    text = (ROOT / "agent.yaml").read_text().replace("root: sandbox", f"root: {tmp_path / 'sandbox'}")
    spec = yaml.safe_load(text)
    spec["tool_filtering"]["learning"] = {"enabled": True, "file": "state/learned.npz"}
    spec["tool_filtering"]["exclude"] = ["Messaging-send_email"]
    (tmp_path / "instructions").mkdir()
    (tmp_path / "instructions" / "assistant.md").write_text("Be helpful.")
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def calls_file(path: Path, rows: list[tuple[str, list[str]]]) -> Path:
    path.write_text("".join(json.dumps({"query": q, "tools": t}) + "\n" for q, t in rows), encoding="utf-8")
    return path


# -- the memory ---------------------------------------------------------------------------------------


def test_a_request_repeated_a_thousand_times_weighs_what_it_weighs_once():
    rng = np.random.default_rng(0)
    memory, v = LearningMemory(rule=ONE_CONVERSATION), unit(rng)
    for _ in range(1000):
        memory.learn(near(v, rng, 0.01), ["spam-tool"], key="same request")
    memory.learn(near(v, rng, 0.05), ["real-tool"], key="another request")
    assert len(memory) == 2
    usage = memory.evidence(v)
    assert usage["spam-tool"].requests == 1 and usage["real-tool"].requests == 1


def test_the_memory_keeps_within_its_row_and_byte_bounds_and_forgets_the_oldest_first():
    rng = np.random.default_rng(1)
    memory = LearningMemory(max_requests=50)
    for i in range(200):
        memory.learn(unit(rng), [f"t{i}"], key=f"k{i}", at=time.time() - 200 + i)
    assert len(memory) == 50
    assert {key for key, *_ in memory.rows()} == {f"k{i}" for i in range(150, 200)}
    small = LearningMemory(max_bytes=20_000)
    for i in range(200):
        small.learn(unit(rng, 384), ["t"], key=f"k{i}")
    assert 0 < len(small) < 200 and small.nbytes <= 20_000


def test_rows_past_their_age_leave_and_older_rows_weigh_less():
    now = [1e9]
    rng = np.random.default_rng(2)
    memory = LearningMemory(max_age_days=10, half_life_days=1, clock=lambda: now[0], rule=ONE_CONVERSATION)
    v = unit(rng)
    memory.learn(near(v, rng), ["old-tool"], key="old", at=now[0] - 3 * 86_400)
    memory.learn(near(v, rng), ["new-tool"], key="new")
    usage = memory.evidence(v)
    assert usage["new-tool"].score > usage["old-tool"].score
    now[0] += 8 * 86_400  # the old row is 11 days old now
    memory.learn(near(v, rng), ["newest-tool"], key="newest")
    assert "old" not in {key for key, *_ in memory.rows()}


@pytest.mark.parametrize("vector", [np.full(16, np.nan), np.zeros(16), np.ones(8), np.ones((2, 2, 4))])
def test_a_vector_that_is_not_finite_empty_or_of_another_size_is_not_learned(vector):
    memory = LearningMemory()
    assert memory.learn(np.ones(16), ["t"], key="first")
    assert not memory.learn(vector, ["t"], key="bad")
    assert len(memory) == 1


def test_trust_is_earned_where_similar_requests_call_the_same_tools_and_not_where_they_do_not():
    rng = np.random.default_rng(3)
    consistent, scattered = LearningMemory(), LearningMemory()
    for topic in range(10):
        centre = unit(rng, 64)
        for i in range(6):
            consistent.learn(near(centre, rng), [f"tool{topic}"], key=f"{topic}/{i}")
            scattered.learn(near(centre, rng), [f"tool{rng.integers(1000)}"], key=f"{topic}/{i}")
    assert consistent.trust > 0.6 > 0.1 > scattered.trust
    names = [f"tool{i}" for i in range(20)]
    probe = scattered.rows()[0][1]
    assert scattered.reorder(names, [1.0 - i / 40 for i in range(20)], probe).names[:20] == names  # stays quiet


def test_learning_reorders_the_ranking_and_the_scores_stay_the_first_stages_position_by_position():
    rng = np.random.default_rng(4)
    memory = LearningMemory(rule=LearningRule(gate=0.8, weight=2.0))
    v = unit(rng)
    for i in range(5):
        memory.learn(near(v, rng), ["c"], key=f"k{i}")
    names, scores = ["a", "b", "c", "d"], [1.0, 0.8, 0.6, 0.2]
    memory.settle()  # trust is estimated off the request path: wait for it
    reordered = memory.reorder(names, scores, v)
    assert reordered.names[0] == "c" and sorted(reordered.names) == names
    assert "5 past requests like this one" in reordered.moved["c"].describe()
    denied = memory.reorder(["a", "b"], [1.0, 0.8], v, permitted=lambda n: n != "c")
    assert denied.names == ["a", "b"]  # a tool this request may not use never enters


# -- the file ---------------------------------------------------------------------------------------------


def test_what_was_learned_survives_a_restart_through_its_file_without_any_text(tmp_path):
    rng = np.random.default_rng(5)
    path = tmp_path / "learned.npz"
    memory = LearningMemory()
    first = LearningFile(path, "shop", "model-a")
    for i in range(3):
        memory.learn(unit(rng), ["Shop-refund"], key=request_key("shop", f"refund order {i}"))
    first.flush(memory)
    assert b"refund order" not in path.read_bytes()
    restored = LearningMemory()
    assert LearningFile(path, "shop", "model-a").load_into(restored) == 3
    assert [r[0] for r in restored.rows()] == [r[0] for r in memory.rows()]


def test_a_hostile_learning_file_is_ignored_or_bounded_with_one_warning_each(tmp_path, caplog):
    path = tmp_path / "learned.npz"
    n = 5_000
    vectors = np.ones((n, 4), dtype=np.float32)
    vectors[-1] = np.nan
    tools = [["ok"]] * (n - 2) + [["x" * 100_000], ["ok"]]
    header = json.dumps({"format": 1, "catalog": "shop", "model": "m"})
    keys = np.array([f"{i}" for i in range(n)])
    times = np.full(n, time.time())
    np.savez(path, header=np.array(header), keys=keys, vectors=vectors, times=times, tools=np.array(json.dumps(tools)))
    memory = LearningMemory(max_requests=1000, max_bytes=200_000)
    with caplog.at_level(logging.WARNING):
        taken = LearningFile(path, "shop", "m").load_into(memory)
        other = LearningMemory()
        LearningFile(path, "another catalog", "m").load_into(other)
    assert 0 < taken == len(memory) <= 1000 and memory.nbytes <= 200_000
    assert len(other) == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("2 malformed rows ignored" in w for w in warnings)
    assert any("not this agent's catalog 'another catalog'" in w for w in warnings)
    path.write_bytes(b"not a zip file")
    with caplog.at_level(logging.WARNING):
        assert LearningFile(path, "shop", "m").load_into(LearningMemory()) == 0
    assert "cannot be read" in caplog.records[-1].getMessage()


# -- on a real kernel -------------------------------------------------------------------------------------


async def sent_and_ranked(agent: Path) -> tuple[list[str], Ranking]:
    """What the agent's filter sends for NEW (a fresh process: the file is read at start), and its ranking."""
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import load_agent_file

    async with await open_toolset(load_agent_file(agent)) as tools:
        manager = tools.manager
        ranking = await rank_tools(manager.index, NEW, manager.config, limit=5, memory=manager.learning.usable())
        return await manager.filter_tools(NEW), ranking


def test_three_learned_requests_send_their_tool_to_a_fourth_like_them_and_forget_restores_cold(
    learning_agent, tmp_path, capsys
):
    cold, _ = asyncio.run(sent_and_ranked(learning_agent))
    assert TARGET not in cold

    calls = calls_file(
        tmp_path / "calls.jsonl",
        [(q, ["post_to_channel", "Messaging-send_email", "Admin-drop_everything"]) for q in PAST]
        + [("who is on call tonight?", ["Messaging-post_message_in_channel"])],
    )
    assert main(["learn", str(learning_agent), "--calls", str(calls)]) == 0
    printed = capsys.readouterr().out
    assert "learned 3 requests from 4 lines" in printed
    assert "Messaging-send_email (3)" in printed and "Admin-drop_everything (3)" in printed  # excluded, unknown
    assert (
        "Messaging-post_message_in_channel (1) - not in the catalog, did you mean Messaging-post_to_channel?" in printed
    )

    learned, ranking = asyncio.run(sent_and_ranked(learning_agent))
    assert TARGET in learned and len(learned) == len(cold)  # learning changes the order, not how many are sent
    assert "Messaging-send_email" not in learned
    assert "3 past requests like this one" in ranking.learned[TARGET]

    assert main(["forget", str(learning_agent)]) == 0
    assert asyncio.run(sent_and_ranked(learning_agent))[0] == cold


async def test_a_conversation_teaches_only_the_tools_it_was_allowed_and_never_an_excluded_one(demo_kernel):
    config = ToolFilterConfig(learning={"enabled": True}, exclude=["Messaging-send_email"])
    manager = await create_tool_filter(demo_kernel, config)
    for past in PAST:  # three conversations, one turn each
        history = completed_turns((past, [TARGET, "Messaging-send_email", "ToolSearch-search_tools"]))
        history.add_user_message("thanks")
        await manager.select_for_history(history)
    await manager.learning.settled()
    fresh = ChatHistory()
    fresh.add_user_message(NEW)
    assert TARGET in (await manager.select_for_history(fresh)).names
    remembered = {tool for row in manager.learning.memory.rows() for tool in row.tools}
    assert remembered == {TARGET}  # never the excluded tool, never the discovery tool, never text
    narrow = completed_turns((PAST[0] + " again", [TARGET]))
    narrow.add_user_message(NEW)
    await manager.select_for_history(narrow, allowed={"Time-today"})  # the caller did not allow it here
    await manager.learning.settled()
    assert len(manager.learning.memory) == 3


async def test_learning_off_stores_and_reads_nothing(demo_kernel, tmp_path):
    path = tmp_path / "learned.npz"
    history = completed_turns(*[(q, [TARGET]) for q in PAST])
    history.add_user_message(NEW)
    on = await create_tool_filter(demo_kernel, ToolFilterConfig(learning={"file": str(path)}))
    await on.select_for_history(history)
    await on.aclose()
    assert len(on.learning.memory) == 3
    written = path.read_bytes()
    off = await create_tool_filter(demo_kernel, ToolFilterConfig(learning={"enabled": False, "file": str(path)}))
    assert len(off.learning.memory) == 0  # the file is not read
    await off.select_for_history(history)
    await off.aclose()
    assert len(off.learning.memory) == 0 and path.read_bytes() == written  # nor learned, nor written


def test_eval_learn_measures_each_method_cold_and_learned(tmp_path, capsys):
    tools = ROOT / "examples" / "data" / "bfcl" / "tools.jsonl"
    rows = [json.loads(line) for line in (ROOT / "examples" / "data" / "bfcl" / "dev.jsonl").read_text().splitlines()]
    learn = calls_file(tmp_path / "calls.jsonl", [(r["query"], r["gold"]) for r in rows[:40]])
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"query": r["query"], "gold": r["gold"]}) + "\n" for r in rows[40:60]))
    argv = ["eval", "--tools", str(tools), "--queries", str(queries), "--learn", str(learn), "--methods", "hybrid"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "learned 40 requests from 40 lines" in out
    methods = json.loads((tmp_path / "out" / "eval.json").read_text())["methods"]
    assert list(methods) == ["hybrid", "hybrid, learned from use"]


def test_learn_without_a_learning_file_is_a_usage_error_naming_the_setting(tmp_path, capsys):
    agent = tmp_path / "agent.yaml"
    agent.write_text((ROOT / "agent.yaml").read_text())
    calls = calls_file(tmp_path / "calls.jsonl", [("hi", ["Time-today"])])
    assert main(["learn", str(agent), "--calls", str(calls)]) == 2
    assert "tool_filtering.learning.file" in capsys.readouterr().err


def test_a_bad_calls_line_names_its_file_and_line(learning_agent, tmp_path, capsys):
    calls = tmp_path / "calls.jsonl"
    calls.write_text('{"query": "post it", "tools": ["post_to_channel"]}\n{"query": "x", "tools": "Time-today"}\n')
    assert main(["learn", str(learning_agent), "--calls", str(calls)]) == 2
    assert f"{calls}:2: expected 'tools'" in capsys.readouterr().err


def test_a_long_calls_file_is_read_line_by_line_with_progress_into_the_bounded_memory(learning_agent, tmp_path, capsys):
    rows = [(f"{PAST[i % 3]} #{i % 50}", ["post_to_channel"]) for i in range(20_000)]
    calls = calls_file(tmp_path / "calls.jsonl", rows)
    assert main(["learn", str(learning_agent), "--calls", str(calls)]) == 0
    captured = capsys.readouterr()
    assert "learning requests: 20000 done" in captured.err  # the rate and time left on the way
    assert "learned 20000 requests from 20000 lines" in captured.out
    assert "50 requests remembered" in captured.out  # one row per distinct request


async def test_the_semantic_kernel_wrapper_learns_each_finished_turn_of_an_auto_invoked_loop(demo_kernel):
    from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
    from semantic_kernel.connectors.ai.open_ai import OpenAIChatPromptExecutionSettings
    from semantic_kernel.contents import ChatHistory

    from sk_toolfilter import wrap_chat_service
    from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service, text_reply, tool_call_reply

    call = (TARGET, {"channel": "#ops", "message": "the nightly backup finished"})
    transport = RecordingTransport([tool_call_reply(call), text_reply("Posted."), text_reply("Posted again.")])
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig())
    service = wrap_chat_service(offline_chat_service(transport), manager)
    settings = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    history = ChatHistory()
    history.add_user_message(PAST[0])
    [answer] = await service.get_chat_message_contents(history, settings, kernel=demo_kernel)  # SK runs the tool
    history.add_message(answer)
    history.add_user_message(NEW)
    await service.get_chat_message_contents(history, settings, kernel=demo_kernel)
    await manager.learning.settled()
    assert [row.tools for row in manager.learning.memory.rows()] == [(TARGET,)]


def test_the_docs_replay_row_for_the_bundled_bfcl_catalog_is_what_the_replay_prints():
    """The learning docs' bfcl row, replayed exactly as benchmarks/learning_replay_benchmark.py does (the
    shipped int8 models give every x86 CPU the same vectors, so the figures are the same anywhere)."""
    import re

    from sk_toolfilter.retrieval.memory import DEFAULT_RULE
    from training.replay import collect_catalog, replay

    page = (ROOT / "docs" / "concepts" / "learning-from-use.md").read_text(encoding="utf-8")
    row = re.search(r"^\| bfcl \(1,088[^|]*\) \| (.+?) \| (.+?) \| (.+?) \| (.+?) \|$", page, re.MULTILINE)
    assert row, "the docs' bfcl replay row changed: update this test with it"
    evidence = asyncio.run(collect_catalog("bfcl", "bfcl", ROOT / "examples" / "data" / "bfcl"))
    cells = []
    for fraction, regime in ((0.5, "all"), (0.5, "sent"), (0.1, "all")):
        outcomes = [replay(evidence, DEFAULT_RULE, fraction, seed, regime) for seed in range(3)]
        cold = f"{np.mean([o.cold_recall for o in outcomes]):.3f} / {np.mean([o.cold_complete for o in outcomes]):.3f}"
        cells.append(f"{np.mean([o.recall for o in outcomes]):.3f} / {np.mean([o.complete for o in outcomes]):.3f}")
    assert row.groups() == (cold, *cells)


async def test_the_learning_file_is_written_off_the_event_loop_as_turns_finish(demo_kernel, tmp_path):
    path = tmp_path / "learned.npz"
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig(learning={"file": str(path), "sync_seconds": 0}))
    history = completed_turns((PAST[0], [TARGET]))
    history.add_user_message(NEW)
    await manager.select_for_history(history)
    await manager.learning.settled()
    file = manager.learning.file
    assert file is not None and file._writing is not None  # a write was started in the executor
    await file._writing  # the event it sets, not a wall-clock wait
    restored = LearningMemory()
    assert LearningFile(path, "default", file.model).load_into(restored) == 1
