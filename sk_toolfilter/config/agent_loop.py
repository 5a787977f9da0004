"""``tool_filtering.agent_loop``: the tools of a turn inside an agent loop."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    field_validator,
)

from sk_toolfilter.basics.redaction import library_logger, warn_once
from sk_toolfilter.config.base import RankingMethod, StrictConfig, checked_weights

logger = library_logger(__name__)


class AgentLoopConfig(StrictConfig):
    """Selection inside an agent loop: the requests the model makes while answering one user turn.

    The user's request of the current turn stays the query (tool calls are context, not the
    query); tools called earlier in the turn stay on offer; tools that past requests called together
    with the best-ranked ones (co-usage, a signal of learning from use) are added, and so is
    the best tool of each action a request lists ("lock the doors, press the brake and start the
    engine"). All of
    them share one budget per request: ``max(top_k, max_tools)`` selected tools, not counting
    ``always_include`` and the discovery tools.
    """

    enabled: bool = Field(default=True, description="Apply the agent-loop policy below inside a turn.")
    keep_turn_tools: bool = Field(default=True, description="Tools called earlier in the turn stay on offer.")
    previous_turn_tools: bool = Field(
        default=True, description="Tools of the previous turn fill what the budget leaves (follow-ups: 'the same')."
    )
    split_request: bool = Field(
        default=True,
        description="A request listing several actions (commas, 'and', 'then'): each action's best tool is kept.",
    )
    co_usage: bool = Field(
        default=True,
        description="Add tools that past requests called together with the best-ranked ones: a signal of learning "
        "from use's memory (learning.enabled, its scope, file, table, bounds and forget), so a companion enters for "
        "another conversation only on the evidence of learning.min_conversations conversations (a conversation's "
        "own earlier requests steer it), and a destructive tool never on other conversations' alone.",
    )
    co_usage_min_share: float = Field(
        default=0.3,
        gt=0.0,
        le=1.0,
        description="A companion was called in at least this share of the conversations that called its anchor.",
    )
    co_usage_min_turns: int = Field(
        default=1, ge=1, description="... and in at least this many of them (the conversation rule holds either way)."
    )
    co_usage_anchors: int = Field(default=3, ge=0, le=20, description="Best-ranked tools whose companions count.")
    lookup_tools: bool = Field(
        default=True,
        description="Add the lookup tools that give a best-ranked tool's required parameters (read from the "
        "schemas: get_zipcode_based_on_city for estimate_distance(cityA: zipcode)) while no past turn used it.",
    )
    co_usage_file: str | None = Field(
        default=None,
        description="No longer used (a warning when set): co-usage is kept with learning from use (learning.file, "
        "the shared table).",
    )
    co_usage_sync_seconds: float = Field(
        default=30.0,
        ge=0.0,
        le=3600.0,
        description="No longer used: co-usage syncs with learning (learning.sync_seconds).",
    )
    max_tools: int = Field(default=6, ge=1, le=128, description="Selected tools per request (with top_k: the larger).")
    method_weights: dict[RankingMethod, float] | None = Field(
        default=None,
        description="Hybrid blend for the requests inside a turn. Unset: the top-level method_weights when they "
        "are set, else the blend chosen for the embedding model inside turns (its model.json loop_hybrid_weights: "
        "semantic 0.9 / bm25 0.1 for the shipped minilm-l6-tools-v1), else the single-request blend.",
    )

    first_request_weights: Literal["plain", "turn"] | dict[RankingMethod, float] = Field(
        default="plain",
        description="Hybrid blend for a conversation's first request (its one user request, no tool called yet): "
        "plain ranks it as filter_tools ranks a bare request (the top-level blend: chosen leave-one-catalog-family-"
        "out, see benchmarks/first_request_benchmark.py), turn as the requests inside a turn (method_weights above), "
        "or a blend of its own.",
    )

    @field_validator("method_weights", "first_request_weights")
    @classmethod
    def _weights_non_negative(cls, value: str | dict[RankingMethod, float] | None) -> object:
        return value if value is None or isinstance(value, str) else checked_weights(value)

    @field_validator("co_usage_file")
    @classmethod
    def _co_usage_file_unused(cls, value: str | None) -> str | None:
        if value:  # (validated again for each copy of a configuration: said once)
            warn_once(
                logger,
                "sk-toolfilter: agent_loop.co_usage_file is no longer read or written: co-usage is a signal of "
                "learning from use, kept where it is (learning.file, the shared table) under its scope and rules",
            )
        return value
