"""Which ranked tools are sent: exact-name hits, then the relative threshold (or AutoCut), at most top_k."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.retrieval.search import ScoredTool


@dataclass(slots=True)  # not frozen: ~20 are built per request, and a frozen one costs 4x to build
class ToolDecision:
    """Why one tool was kept or cut for a query (see :meth:`ToolFilterManager.explain`)."""

    full_name: str
    kept: bool
    reason: str
    score: float | None = None
    method_scores: dict[str, float] | None = None


NO_EVIDENCE = (
    "cut: no evidence (no cosine above semantic_floor, no shared word that counts); ranked only after every "
    "tool with evidence"
)


def apply_cutoff(
    ranked: Sequence[ScoredTool], config: ToolFilterConfig, *, no_tool_reason: str | None = None
) -> list[ToolDecision]:
    """Keep or cut each ranked tool: named tools, then ``similarity_threshold`` (or AutoCut), at most ``top_k``.

    With `no_tool_reason` (:attr:`Ranking.no_tool_reason`), only tools the request names are kept.
    """
    decisions: list[ToolDecision] = []
    kept_count = 0
    previous: float | None = None
    cut_by_gap = False
    top_k, autocut, ratio = config.top_k, config.cutoff == "autocut", config.autocut_ratio
    beyond_top_k = f"cut: beyond top_k={top_k}"  # the reasons that name no score, formatted once
    no_tool = f"cut: {no_tool_reason}"
    after_gap = f"cut: after a score gap (below {ratio:.2f} x the previous score)"
    threshold = config.similarity_threshold
    kept_above, cut_below = f" >= threshold {threshold:.2f}", f" < threshold {threshold:.2f}"
    for scored in ranked:
        score = scored.score
        if kept_count >= top_k:
            reason, kept = beyond_top_k, False
        elif scored.name_match:
            reason, kept = "kept: the query names this tool", True
        elif not scored.evidence:
            reason, kept = NO_EVIDENCE, False
        elif no_tool_reason is not None:
            reason, kept = no_tool, False
        elif autocut:
            cut_by_gap = cut_by_gap or (previous is not None and score < ratio * previous)
            kept = not cut_by_gap
            reason = after_gap if cut_by_gap else f"kept: score {score:.2f}, no gap before it"
        elif score >= threshold:
            reason, kept = f"kept: score {score:.2f}{kept_above}", True
        else:
            reason, kept = f"cut: score {score:.2f}{cut_below}", False
        kept_count += kept
        if not scored.name_match:
            previous = score
        decisions.append(ToolDecision(scored.tool.full_name, kept, reason, score, scored.method_scores))
    return decisions
