"""The second stage (``rerank: cross-encoder``): it reads the request and each shortlisted tool together
and only reorders the first stage's shortlist; a failing reranker leaves the first stage's answer."""

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from sk_toolfilter import ConfigError, ToolFilterConfig, create_tool_filter
from sk_toolfilter.retrieval.local_models import MODELS_DIR, resolve_local_model, shipped_models
from sk_toolfilter.retrieval.rerank import reorder_by_scores
from sk_toolfilter.retrieval.search import rank_tools
from tests.conftest import build_demo_kernel

QUERIES = [
    "convert 5 km to miles and then email the result to alice",
    "what time is it in Tokyo, and add a note that I called Bob",
    "read the file report.txt, count its words and send the count to the team chat",
    "summarize my notes",
    "count the words in this paragraph and make it upper case",
    "use Messaging-send_email to tell alice the time in Tokyo and add a note about it",  # names a tool
]


RERANKER = Path(__file__).resolve().parent / "fixtures" / "tiny_reranker"
"""A cross-encoder in the format ``rerank.model`` loads, with random weights (its ``build.py``): these tests
check what the second stage may do to a ranking, never what it ranks first."""


def rerank(**options):
    options.setdefault("model", str(RERANKER))
    return ToolFilterConfig(discovery={"enabled": False}, rerank={"type": "cross-encoder", **options})


async def test_the_second_stage_only_reorders_the_first_stages_shortlist(tmp_path):
    kernel = build_demo_kernel(str(tmp_path))
    first = await create_tool_filter(kernel, ToolFilterConfig(discovery={"enabled": False}))
    second = await create_tool_filter(kernel, rerank(shortlist=10))
    for query in QUERIES:
        a = await rank_tools(first.index, query, first.config, limit=20)
        b = await rank_tools(second.index, query, second.config, limit=20)
        note = b.steps["cross-encoder"]
        assert note.reordered and "tiny-reranker" in note.text, query
        names_a, names_b = [t.full_name for t in a.tools], [t.full_name for t in b.tools]
        shortlist = [t.full_name for t in a.tools if t.evidence][:10]
        assert set(names_b[: len(shortlist)]) == set(shortlist), query  # nothing added, nothing lost
        assert names_b[len(shortlist) :] == names_a[len(shortlist) :], query  # beyond it: untouched
        assert [t.score for t in b.tools] == [t.score for t in a.tools], query  # how many are sent: unchanged
        assert all("rerank" in t.method_scores for t in b.tools[: len(shortlist)])
        sent_a, sent_b = await first.filter_tools(query), await second.filter_tools(query)
        assert len(sent_a) == len(sent_b) and set(sent_b) <= set(shortlist) | set(sent_a), query


async def test_a_pin_is_never_moved_or_dropped_by_the_second_stage(tmp_path):
    kernel = build_demo_kernel(str(tmp_path))
    manager = await create_tool_filter(kernel, rerank().updated(always_include=["Time-today"]))
    for query in QUERIES:
        sent = await manager.filter_tools(query)
        assert sent[-1] == "Time-today" or "Time-today" in sent, query


async def test_a_failing_reranker_gives_the_first_stages_answer_and_says_why(tmp_path, caplog):
    damaged = tmp_path / "damaged"
    shutil.copytree(RERANKER, damaged)
    with (damaged / "model.onnx").open("r+b") as f:
        f.seek(1000)
        f.write(b"\x00" * 64)
    kernel = build_demo_kernel(str(tmp_path / "sandbox"))
    first = await create_tool_filter(kernel, ToolFilterConfig(discovery={"enabled": False}))
    broken = await create_tool_filter(kernel, rerank(model=str(damaged)))
    with caplog.at_level(logging.WARNING):
        for query in QUERIES:
            assert await broken.filter_tools(query) == await first.filter_tools(query), query
            ranking = await rank_tools(broken.index, query, broken.config, limit=10)
            note = ranking.steps["cross-encoder"]
            assert not note.reordered and note.text.startswith("second stage failed"), query
            assert "damaged or was replaced" in note.text
    warnings = [r for r in caplog.records if "second stage failed" in r.getMessage()]
    assert len(warnings) == 1  # once per cause, not once per request


async def test_a_reranker_that_is_no_reranker_is_a_config_error_at_start(tmp_path):
    kernel = build_demo_kernel(str(tmp_path))
    with pytest.raises(ConfigError, match=r"rerank\.model: 'no-such-model' is neither a reranker shipped"):
        await create_tool_filter(kernel, rerank(model="no-such-model"))
    with pytest.raises(ConfigError, match="is an embedding model, not a cross-encoder"):
        await create_tool_filter(kernel, rerank(model="minilm-l6-tools-v1"))
    with pytest.raises(ConfigError, match="is a reranker \\(a cross-encoder\\), not an embedding model"):
        resolve_local_model(str(RERANKER))
    assert shipped_models("cross-encoder") == []  # it did not gain leave one catalog out: out of the package
    with pytest.raises(ConfigError, match=r"type cross-encoder needs rerank\.model"):
        await create_tool_filter(kernel, ToolFilterConfig.from_mapping({"rerank": "cross-encoder"}))


def test_each_intent_keeps_its_own_best_candidate_after_reordering():
    whole, send_part, convert_part = [1, 2, 3, 4, 5], [2, 6, 1], [3, 1, 7]
    shortlist = [1, 2, 3, 4, 5, 6, 7]
    # The reranker likes tool 1 best: the whole request's list leads with it, but a part's best comes only
    # from that part's own first two first-stage candidates (tool 1 is one of the convert part's, not of
    # the send part's; tool 7 scores high but is the convert part's third: never its pick).
    scores = np.array([9.0, 1.0, 2.0, 0.5, 0.1, 5.0, 6.0], dtype=np.float32)
    lists = reorder_by_scores([whole, send_part, convert_part], shortlist, scores, per_part=2)
    assert lists == [[1, 3, 2, 4, 5], [6, 2], [1, 3]]
    assert sorted(lists[0]) == sorted(whole)  # a reordering, never a new tool


async def test_a_reranker_folder_naming_another_network_or_a_nan_weight_is_refused(tmp_path):
    import hashlib
    import json

    other = tmp_path / "other"
    shutil.copytree(RERANKER, other)
    shutil.copy(MODELS_DIR / "minilm-l2-tools-v1" / "model.onnx", other / "model.onnx")  # an embedding network
    manifest = json.loads((other / "model.json").read_text())
    manifest["files"]["model"]["sha256"] = hashlib.sha256((other / "model.onnx").read_bytes()).hexdigest()
    (other / "model.json").write_text(json.dumps(manifest))  # the sha256 is right: only the network is wrong
    kernel = build_demo_kernel(str(tmp_path / "sandbox"))
    first = await create_tool_filter(kernel, ToolFilterConfig(discovery={"enabled": False}))
    broken = await create_tool_filter(kernel, rerank(model=str(other)))
    for query in QUERIES[:3]:
        assert await broken.filter_tools(query) == await first.filter_tools(query), query
        ranking = await rank_tools(broken.index, query, broken.config, limit=10)
        note = ranking.steps["cross-encoder"]
        assert not note.reordered and note.text.startswith("second stage failed"), query
        assert "one finite score per pair is needed" in note.text and "model.json" in note.text
    for weight in ("NaN", "Infinity", '"heavy"'):
        text = json.dumps({**manifest, "first_stage_weight": "@"}).replace('"@"', weight)
        (other / "model.json").write_text(text)
        with pytest.raises(ConfigError, match="first_stage_weight"):
            await create_tool_filter(kernel, rerank(model=str(other)))


@pytest.mark.parametrize(
    ("rerank_block", "ran", "eval_name"),
    [
        (f"{{type: cross-encoder, model: {RERANKER}}}", "hybrid + cross-encoder for 3 of 3", "hybrid+cross-encoder@10"),
        ("learned", "hybrid + learned ranker for 3 of 3", "hybrid+learned@30"),
        ("{type: cross-encoder, model: DAMAGED}", "hybrid (cross-encoder failed: the first stage's order) for 3", None),
    ],
    ids=["cross-encoder", "learned ranker", "cross-encoder failing"],
)
async def test_the_report_names_the_second_stage_that_ran(tmp_path, monkeypatch, rerank_block, ran, eval_name):
    """The report reads which reordering ran from the ranking's notes keyed by step, never from their text:
    the learned ranker is never reported as a failed cross-encoder."""
    from pathlib import Path

    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import load_agent_file
    from sk_toolfilter.measure.evaluation import method_name
    from sk_toolfilter.measure.report import build_token_report
    from sk_toolfilter.measure.token_report import methods_used

    root = Path(__file__).resolve().parent.parent
    shutil.copytree(root / "instructions", tmp_path / "instructions")
    if "DAMAGED" in rerank_block:
        damaged = tmp_path / "damaged"
        shutil.copytree(RERANKER, damaged)
        (damaged / "model.onnx").write_bytes(b"not a model")
        rerank_block = rerank_block.replace("DAMAGED", str(damaged))
    text = (
        (root / "agent.yaml")
        .read_text()
        .replace("tool_filtering:\n", f"tool_filtering:\n  rerank: {rerank_block}\n", 1)
    )
    (tmp_path / "agent.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    spec = load_agent_file(tmp_path / "agent.yaml")
    async with await open_toolset(spec) as toolset:
        report = await build_token_report(spec, toolset.kernel, toolset.manager, spec.sample_queries[:3])
    assert methods_used(report).startswith(ran), methods_used(report)
    if eval_name is not None:
        assert method_name("hybrid", spec.tool_filtering) == eval_name
    assert method_name("hybrid", ToolFilterConfig()) == "hybrid"
