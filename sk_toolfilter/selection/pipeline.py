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

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from sk_toolfilter.basics.breaker import Breaker
from sk_toolfilter.basics.display import shorten
from sk_toolfilter.basics.redaction import library_logger, redact_text, warn_once
from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.retrieval.cutoff import ToolDecision, apply_cutoff
from sk_toolfilter.retrieval.search import Ranking, ScoredTool
from sk_toolfilter.selection.catalog_upkeep import Catalog
from sk_toolfilter.selection.turns import Turn

logger = library_logger(__name__)


@dataclass(frozen=True)
class SelectionRequest:
    """What one selection is asked: the query, the caller's own allow-list, extra pins and, in an
    agent loop, the current and previous user turns (and the completed turns learning reads)."""

    query: str
    allowed: set[str] | None = None
    extra_pins: Sequence[tuple[str, str]] = ()
    turn: Turn | None = None
    previous_turn: Turn | None = None
    completed: Sequence[Turn] = ()
    """The conversation's completed turns (what learning from use learns from)."""
    explained: bool = True
    """Decide for every tool ranked as deep as ``explain`` shows (``max(4 x top_k, 20)``); False: a request
    ranked whole only as deep as sending needs (``top_k``, or a second stage's shortlist), as
    ``filter_tools`` and ``offer`` do (the same tools are sent)."""
    scope: str | None = ""
    """Learning from use: the stored scope whose rows this request reads and teaches (``""``: shared;
    None: a scoped agent's request that named no scope, which reads and teaches nothing)."""
    conversation: str | None = None
    """Learning from use: the fingerprint of the conversation its turns belong to (None: each its own)."""


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
    fallback: str | None = None
    """Why a pick that was tried did not stand, in a few words (``timeout``, ``call failed``,
    ``unreadable answer``, ``tool call``, ``none picked``, ``stage failed``, ``paused``); None when the
    stage picked, or had nothing to pick (then it was not tried)."""

    @property
    def attempted(self) -> bool:
        """Whether the stage tried to pick (it picked, or it fell back)."""
        return self.picked is not None or self.fallback is not None

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


SERVICE_FAILURES = frozenset({"timeout", "call failed", "stage failed"})
"""Fallbacks that count against the second stage's circuit breaker (a service that answered, even
badly, is up)."""


async def run_second_stage(
    stage: SecondStage, request: SelectionRequest, ranking: Ranking, budget: int, breaker: Breaker | None = None
) -> StageOutcome:
    """The one way a second stage is called (selections, ``eval``): it never fails a request. Whatever
    the stage raises, or an outcome that breaks the :class:`SecondStage` contract, becomes the first
    stage's cut with the reason; ``cost["seconds"]`` is the stage's whole time inside the request.
    With a `breaker` (``rerank.failure_threshold``, ``rerank.cooldown_seconds``), a stage whose calls
    failed that many times in a row is not called until the cooldown ends."""
    left = breaker.open_for() if breaker is not None else None
    if left is not None:
        assert breaker is not None
        note = (
            f"the second stage failed {breaker.consecutive_failures} times in a row and is paused for {left:.0f} s "
            "more (rerank.cooldown_seconds): the first stage's cut stands"
        )
        return StageOutcome(None, note, {"seconds": 0.0}, fallback="paused")
    started = time.perf_counter()
    try:
        outcome = _checked(await stage(request, ranking, budget), budget)
    except Exception as exc:  # the contract says a stage never raises; this guard makes it so
        why = f"{type(exc).__name__}: {shorten(redact_text(str(exc)), 200)}" if str(exc) else type(exc).__name__
        outcome = StageOutcome(
            None, f"the second stage failed ({why}): the first stage's cut stands", fallback="stage failed"
        )
    outcome = dataclasses.replace(outcome, cost={**outcome.cost, "seconds": time.perf_counter() - started})
    if breaker is not None and outcome.attempted:
        if outcome.fallback in SERVICE_FAILURES:
            if breaker.failed():
                logger.warning("sk-toolfilter: the second stage is failing (%s); the first stage answers", outcome.note)
        elif breaker.succeeded():
            logger.info("sk-toolfilter: the second stage answers again")
    return outcome


def _checked(outcome: object, budget: int) -> StageOutcome:
    """`outcome` if it keeps the :class:`SecondStage` contract (names are strings, at most `budget`;
    costs are finite and not negative: others are left out), else TypeError."""
    if not isinstance(outcome, StageOutcome):
        raise TypeError(f"a second stage returned {type(outcome).__name__}, not a StageOutcome")
    picked: object = outcome.picked  # (a stage of the application's may break its annotations)
    if picked is not None and (not isinstance(picked, list) or not all(isinstance(n, str) for n in picked)):
        raise TypeError("a second stage picked something other than a list of tool names")
    given: object = outcome.cost
    costs: dict[object, object] = dict(given) if isinstance(given, dict) else {}
    cost = {
        str(k): float(v)
        for k, v in costs.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
    }
    names = None if picked is None else [str(n) for n in picked][:budget]
    return dataclasses.replace(outcome, picked=names, cost=cost, note=str(outcome.note))


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
