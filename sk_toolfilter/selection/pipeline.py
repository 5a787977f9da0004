"""One selection as named stages over one catalog snapshot.

    snapshot ─▶ first stage ─▶ second stage ─▶ cut ─▶ all fit | agent loop ─▶ pins ─▶ cap

* **snapshot** — the catalog as this request sees it: the tools it may rank (searchable, allowed by
  the caller, still in their source: masked once, before ranking).
* **first stage** — :func:`~sk_toolfilter.retrieval.search.rank_tools` (BM25, semantic or hybrid,
  intents, the optional cross-encoder ``rerank``); an agent loop's listed actions in the same batch.
* **second stage** — an optional :class:`SecondStage` (the application's model picking from the
  shortlist): it may choose which shortlisted tools are sent, never add one.
* **cut** — threshold / AutoCut and ``top_k`` (or the second stage's pick).
* **all fit** — when every candidate fits the budget, every candidate is sent.
* **agent loop** — the turn's tools, co-usage, lookups and listed actions within one budget.
* **pins** — ``always_include``, overrides, sources, conversations, the most used, discovery.
* **cap** — ``max_tools_total`` over everything, pins included.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from sk_toolfilter.basics.redaction import library_logger, warn_once
from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.retrieval.cutoff import ToolDecision, apply_cutoff
from sk_toolfilter.retrieval.search import Ranking, ScoredTool
from sk_toolfilter.selection.catalog_upkeep import Catalog
from sk_toolfilter.selection.turns import Turn

logger = library_logger(__name__)


@dataclass(frozen=True)
class SelectionRequest:
    """What one selection is asked: the query, the caller's own allow-list, extra pins and, in an
    agent loop, the current and previous user turns."""

    query: str
    allowed: set[str] | None = None
    extra_pins: Sequence[tuple[str, str]] = ()
    turn: Turn | None = None
    previous_turn: Turn | None = None


@dataclass(frozen=True)
class Snapshot:
    """One catalog as one selection sees it (the catalog is swapped whole, never changed in place)."""

    catalog: Catalog
    allowed: set[str] | None
    gone: frozenset[str]
    """Tools of this catalog no longer in their source (a re-index is on its way)."""
    candidates: np.ndarray
    """Boolean mask over the catalog: searchable, allowed, not gone."""
    count: int
    exists: Callable[[str], bool] = lambda name: True
    """Whether a tool is still in its source, asked only of the few tools a selection ends with (a tool
    removed from a plugin in place is noticed by the source's fingerprint at its next deep check only)."""

    @property
    def every_tool(self) -> bool:
        """Nothing is masked out (the ranking skips its masking passes)."""
        return self.count == len(self.catalog.index)

    def usable(self, name: str, searchable_only: bool = False) -> bool:
        """`name` may be offered: visible (or searchable), allowed by the caller, still in its source."""
        pool = self.catalog.searchable if searchable_only else self.catalog.visible
        allowed = self.allowed is None or name in self.allowed
        return name in pool and allowed and self.exists(name)  # (exists answers False for the gone ones too)


def take_snapshot(
    catalog: Catalog,
    allowed: set[str] | None,
    gone: frozenset[str],
    exists: Callable[[str], bool] = lambda name: True,
) -> Snapshot:
    """The snapshot stage: the candidates masked once, before anything is ranked (the tools known to be
    gone included); `exists` answers for the few tools the selection ends with."""
    candidates, count = catalog.searchable_mask, catalog.searchable_count
    if allowed is not None or gone:
        candidates = candidates.copy()
        if allowed is not None:
            candidates &= catalog.index.mask_of(allowed)
        if gone:
            candidates &= ~catalog.index.mask_of(gone)
        count = int(np.count_nonzero(candidates))
    return Snapshot(catalog, allowed, gone, candidates, count, exists)


@dataclass(frozen=True)
class StageOutcome:
    """What a second stage did: the names it picked (None: the first stage's cut stands), why, and
    what it cost (e.g. ``input_tokens``, ``output_tokens``, ``seconds``)."""

    picked: list[str] | None
    note: str
    cost: dict[str, float] = field(default_factory=dict)

    def describe(self) -> str:
        """One line for ``explain``: what the stage did and what it cost."""
        cost = self.cost
        parts = []
        if "input_tokens" in cost or "output_tokens" in cost:
            parts.append(f"{cost.get('input_tokens', 0):,.0f} tokens in, {cost.get('output_tokens', 0):,.0f} out")
        if "seconds" in cost:
            parts.append(f"{cost['seconds']:.2f} s")
        return f"{self.note} ({'; '.join(parts)})" if parts else self.note


@dataclass(frozen=True)
class Selection:
    """The outcome of one selection: names to send (best first, then pins) and the evidence."""

    names: list[str]
    ranking: Ranking
    decisions: list[ToolDecision]
    second_stage: StageOutcome | None = None
    """What the second stage (``rerank: {type: llm}``) picked and cost; None without one."""


class SecondStage(Protocol):
    """A stage between the first-stage ranking and the cut (e.g. :class:`sk_toolfilter.LLMToolPicker`).

    It reads the request and the ranking and may pick which of the first ``shortlist`` tools are sent
    (at most `budget`). It never raises for a request: a failure is an outcome with ``picked=None``.
    """

    async def __call__(self, request: SelectionRequest, ranking: Ranking, budget: int) -> StageOutcome: ...


def cut(ranking: Ranking, config: ToolFilterConfig, snapshot: Snapshot) -> list[ToolDecision]:
    """The cut stage: threshold (or AutoCut) and ``top_k`` over the ranking (tools no longer in their
    source left out); tools without evidence last."""
    ranked = [t for t in ranking.tools if snapshot.exists(t.full_name)]
    decisions = apply_cutoff(ranked, config, no_tool_reason=ranking.no_tool_reason)
    return decisions + [ToolDecision(name, False, f"cut: {why}") for name, why in ranking.without_evidence]


def cut_to_pick(
    ranking: Ranking, outcome: StageOutcome, shortlist: int, budget: int, snapshot: Snapshot
) -> list[ToolDecision]:
    """The cut stage after a second stage picked: the tools the request names, then the pick (at most
    `budget` in all; tools no longer in their source left out); the rest of the shortlist cut as not
    picked, the tools beyond it as beyond it."""
    assert outcome.picked is not None
    by_name = {t.full_name: t for t in ranking.tools if snapshot.exists(t.full_name)}
    named = [n for n, t in by_name.items() if t.name_match]
    chosen = list(dict.fromkeys([*named, *(n for n in outcome.picked if n in by_name)]))[:budget]
    listed = {t.full_name for t in ranking.tools[:shortlist]}

    def decision(tool: ScoredTool, kept: bool, reason: str) -> ToolDecision:
        return ToolDecision(tool.full_name, kept, reason, tool.score, tool.method_scores)

    picked = f"kept: {outcome.note}"
    decisions = [
        decision(by_name[n], True, "kept: the query names this tool" if by_name[n].name_match else picked)
        for n in chosen
    ]
    for tool in by_name.values():
        if tool.full_name in chosen:
            continue
        if tool.full_name in listed:
            decisions.append(decision(tool, False, f"cut: not picked ({outcome.note})"))
        else:
            decisions.append(decision(tool, False, f"cut: beyond the second stage's shortlist of {shortlist}"))
    return decisions


def send_everything(snapshot: Snapshot, decisions: list[ToolDecision], budget: int) -> list[ToolDecision]:
    """The all-fit stage: every candidate fits the budget, so every candidate is sent (ranked ones
    first): filtering would save nothing and could only hide a tool."""
    index = snapshot.catalog.index
    tools = zip(index.tools, snapshot.candidates, strict=True)
    everything = [t.full_name for t, ok in tools if ok and snapshot.exists(t.full_name)]
    candidates = set(everything)
    kept = [d.full_name for d in decisions if d.kept and d.full_name in candidates]
    ranked = set(kept)
    names = kept + [n for n in everything if n not in ranked]
    by_name = {d.full_name: d for d in decisions}
    reason = f"kept: all {len(everything)} candidate tools fit the budget of {budget}"
    scores = {n: (d.score, d.method_scores) for n, d in by_name.items()}
    return [ToolDecision(n, True, reason, *scores.get(n, (None, None))) for n in names]


def add_pins(
    snapshot: Snapshot, names: list[str], decisions: list[ToolDecision], pins: Sequence[tuple[str, str]]
) -> tuple[list[str], list[ToolDecision], list[str]]:
    """The pins stage: each usable pin not already chosen is added after the chosen tools, with its
    reason. Returns the names, the decisions and the pins added (in pin order)."""
    names, pinned = list(names), []
    replaced: dict[str, ToolDecision] = {}
    for name, reason in pins:
        if name in names or not snapshot.usable(name):
            continue
        names.append(name)
        pinned.append(name)
        replaced[name] = ToolDecision(name, True, reason)
    if replaced:
        decisions = [d for d in decisions if d.full_name not in replaced] + list(replaced.values())
    return names, decisions, pinned


def cap_total(
    names: list[str], decisions: list[ToolDecision], pinned: list[str], cap: int | None
) -> tuple[list[str], list[ToolDecision]]:
    """The cap stage: at most `cap` names, pins included. The lowest-ranked selected tools go first;
    when the pins alone are more than `cap`, the first `cap` pins in pin order stay (the
    configuration's own, then those of tool sources and servers, then conversation pins) and one
    warning per source names it."""
    if cap is None or len(names) <= cap:
        return names, decisions
    kept_pins = pinned[:cap]
    room = cap - len(kept_pins)
    pinned_set = set(pinned)
    ranked = [n for n in names if n not in pinned_set]
    dropped = set(ranked[room:]) | set(pinned[cap:])
    by_name = {d.full_name: d for d in decisions}
    if len(pinned) > cap and pinned[cap] in by_name:  # the source whose pins cross the cap is named
        source = by_name[pinned[cap]].reason.removeprefix("pinned: ")
        warn_once(
            logger,
            f"{source} pins more tools than max_tools_total={cap} holds: the pinned tools beyond it are not sent "
            "(explain lists them; raise max_tools_total or pin fewer)",
        )
    ranked_reason = f"cut: beyond max_tools_total={cap} (pinned tools included)"
    pin_reason = f"cut: beyond max_tools_total={cap} (more tools are pinned than it holds)"

    def cut_one(d: ToolDecision) -> ToolDecision:
        if d.full_name in pinned_set:
            return ToolDecision(d.full_name, False, f"{pin_reason}; {d.reason}", d.score, d.method_scores)
        return ToolDecision(d.full_name, False, ranked_reason, d.score, d.method_scores)

    return [n for n in names if n not in dropped], [cut_one(d) if d.full_name in dropped else d for d in decisions]
