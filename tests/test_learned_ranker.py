"""The learned second stage (``rerank: learned``): a linear ranker over the first stage's own evidence.

``fixtures/nestful_glaive_tools.jsonl`` is NESTFUL's Glaive-part catalog (IBM/NESTFUL at 053cbde,
Apache-2.0) as ``training.multi_tool_sets`` converts it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sk_toolfilter import ToolFilterConfig
from sk_toolfilter.agents.agent import open_toolset
from sk_toolfilter.agents.agent_file import parse_agent
from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.retrieval.candidate_features import FEATURES, FirstStagePass, candidate_features
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.search import rank_tools

FIXTURES = Path(__file__).parent / "fixtures"
REQUEST = (
    "Analyze the sentiment of the text 'I love this meal, this is the best thing I have ever tasted.' and then "
    "calculate a 20% tip on a bill that's price is 100 with a 10% discount."
)
NEEDED = {
    "nestful_glaive-analyze_sentiment",
    "nestful_glaive-calculate_discounted_price",
    "nestful_glaive-calculate_tip",
}


def glaive_agent(rerank: object) -> object:
    source = {"type": "catalog", "name": "glaive", "path": str(FIXTURES / "nestful_glaive_tools.jsonl")}
    return parse_agent({"name": "t", "tools": [source], "tool_filtering": {"rerank": rerank}}, source="t")


async def ranked_and_sent(rerank: object) -> tuple[list[str], list[float], list[str]]:
    async with await open_toolset(glaive_agent(rerank)) as tools:
        manager = tools.manager
        ranking = await rank_tools(manager.index, REQUEST, manager.config, limit=30)
        sent = await manager.filter_tools(REQUEST)
    return [t.full_name for t in ranking.tools], [t.score for t in ranking.tools], sent


async def test_a_three_intent_request_gets_its_three_tools_where_the_first_stage_had_two_in_its_top_5():
    first, first_scores, first_sent = await ranked_and_sent("none")
    both, both_scores, both_sent = await ranked_and_sent("learned")
    assert len(NEEDED & set(first[:5])) == 2
    assert set(both[:5]) >= NEEDED
    # It only reorders the shortlist: the same tools, the first stage's scores position by position,
    # and as many tools sent as the first stage's cut decided.
    assert set(both) == set(first) and both_scores == first_scores
    assert len(both_sent) == len(first_sent)


@pytest.mark.parametrize(
    "content, expected",
    [
        (None, "is neither the shipped learned ranker"),
        ("{not json", "is not a learned ranker"),
        (
            '{"kind": "linear", "features": ["fused"], "weights": [1], "mean": [0], "scale": [1], "shortlist": 30}',
            "not a linear ranker over this version's features",
        ),
    ],
)
async def test_a_missing_or_corrupt_ranker_file_is_a_clear_error_at_start(tmp_path, content, expected):
    path = tmp_path / "ranker.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=expected):
        async with await open_toolset(glaive_agent({"type": "learned", "model": str(path)})):
            pass


def test_features_mark_each_intents_best_and_a_near_duplicate_of_a_better_tool():
    tools = [ToolMetadata("P", f"t{i}", f"P-t{i}", description="x" * (10 * i)) for i in range(4)]
    fused = np.array([0.9, 0.8, 0.7, 0.1], dtype=np.float32)
    parts = [np.array([0.9, 0.2, 0.1, 0.0]), np.array([0.1, 0.3, 0.8, 0.0])]  # t0 leads one part, t2 the other
    view = FirstStagePass("t0 and t2 please", [0, 1, 2, 3], fused, parts, fused, None)
    vectors = np.eye(4, dtype=np.float32)
    vectors[1] = vectors[0]  # t1 says what t0 says
    rows = candidate_features(view, vectors, tools, catalog_size=4)
    column = {name: rows[:, i] for i, name in enumerate(FEATURES)}
    assert rows.shape == (4, len(FEATURES))
    assert column["best_of_a_part"].tolist() == [1.0, 0.0, 1.0, 0.0]
    assert column["part_margin"][0] == pytest.approx(0.7) and column["part_margin"][1] < 0
    assert column["redundancy"].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert column["name_overlap"][0] == 1.0 and column["name_overlap"][1] == 0.0


def test_the_ranker_trains_only_on_the_sources_training_names(tmp_path):
    from training.learned_ranker import folds

    features = np.zeros((2, 3, len(FEATURES)))
    labels = np.array([[True, False, False], [False, True, False]])
    for name, family in (("callnavi_bank", "callnavi"), ("toolbench_g1", "toolbench")):
        np.savez(
            tmp_path / f"{name}.npz",
            family=family,
            features=features,
            valid=np.ones((2, 3), bool),
            labels=labels,
            needed=np.array([1, 1]),
        )
    with pytest.raises(ValueError, match=r"\['toolbench'\] are not sources training/sources.py names"):
        folds(tmp_path, None)


def test_the_shipped_ranker_file_is_the_one_its_card_describes():
    from sk_toolfilter.retrieval.local_models import MODELS_DIR

    folder = MODELS_DIR / "learned-ranker-v1"
    data = json.loads((folder / "ranker.json").read_text())
    assert data["features"] == list(FEATURES) and data["shortlist"] == 30
    card = (folder / "MODEL_CARD.md").read_text()
    for repository in (
        "Etamin/CallNavi",
        "IBM/NESTFUL",
        "Yifan-Song793/RestGPT",
        "ACEBench/ACEBench",
        "microsoft/ToolTalk",
        "AlibabaResearch/DAMO-ConvAI",
    ):
        assert repository in card
    assert ToolFilterConfig(rerank="learned").rerank.shortlist == 30
