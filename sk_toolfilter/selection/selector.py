"""Runs the pipeline's stages (:mod:`sk_toolfilter.selection.pipeline`) for one manager: the policy
a selection needs (configuration, visibility, usage, co-usage, the second stage) and nothing else."""

from __future__ import annotations

from sk_toolfilter.basics.breaker import Breaker
from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.retrieval.cutoff import ToolDecision
from sk_toolfilter.retrieval.search import MAX_QUERY_PARTS, Ranking, rank_many
from sk_toolfilter.retrieval.text import split_request_clauses
from sk_toolfilter.selection.agent_loop import LoopInputs, plan_agent_loop
from sk_toolfilter.selection.call_counts import CallCounter
from sk_toolfilter.selection.learning import Learning
from sk_toolfilter.selection.pipeline import (
    SecondStage,
    Selection,
    SelectionRequest,
    Snapshot,
    StageOutcome,
    add_pins,
    cap_total,
    cut,
    cut_to_pick,
    run_second_stage,
    send_everything,
)
from sk_toolfilter.selection.turns import Turn
from sk_toolfilter.selection.visibility import ToolPolicy

# Only a request's first characters are read for a list of actions (a pasted document is not one).
MAX_LISTED_REQUEST_CHARS = 2000


class Selector:
    """One manager's selection policy, run stage by stage over a snapshot (see :meth:`run`)."""

    def __init__(self, config: ToolFilterConfig, policy: ToolPolicy, calls: CallCounter, learning: Learning) -> None:
        self.config, self.policy, self.calls = config, policy, calls
        self.second_stage: SecondStage | None = None
        """The stage between ranking and cut (``rerank: {type: llm}``), or None."""
        rerank = config.rerank
        self.stage_breaker = Breaker(rerank.failure_threshold, rerank.cooldown_seconds)
        """Pauses a second stage whose calls keep failing (``rerank.failure_threshold``, ``cooldown_seconds``)."""
        self._turn_configs: dict[tuple[bool, tuple[tuple[str, float], ...]], ToolFilterConfig] = {}
        self.learning = learning
        """Learning from use (``learning``): what similar past requests called reorders the first stage."""

    def budget(self, turn: Turn | None) -> int:
        """Selected tools per request: ``top_k``, or within an agent loop's turn ``max(top_k, max_tools)``."""
        loop = self.config.agent_loop
        return max(self.config.top_k, loop.max_tools) if turn is not None and loop.enabled else self.config.top_k

    def _turn_config(self, model_weights: dict[str, float] | None, *, first_request: bool) -> ToolFilterConfig:
        """The configuration a turn's requests rank with (:meth:`ToolFilterConfig.for_turn`; a conversation's
        first request: :meth:`ToolFilterConfig.for_first_request`), made once per blend."""
        key = (first_request, tuple(sorted((model_weights or {}).items())))
        if key not in self._turn_configs:
            make = self.config.for_first_request if first_request else self.config.for_turn
            self._turn_configs[key] = make(model_weights)
        return self._turn_configs[key]

    async def run(self, request: SelectionRequest, snapshot: Snapshot) -> Selection:
        """The stages of :mod:`sk_toolfilter.selection.pipeline`, in order, over one catalog snapshot."""
        config, turn = self.config, request.turn if self.config.agent_loop.enabled else None
        if turn is not None:
            first_request = not request.completed and not turn.calls
            config = self._turn_config(snapshot.catalog.index.loop_fusion_weights, first_request=first_request)
        needs = self._needs(turn.request) if turn is not None else []
        ranking, *need_rankings = await self._first_stage(request, snapshot, config, needs)
        budget = self.budget(turn)
        outcome = await self._pick(request, ranking, snapshot, budget)
        if outcome is not None and outcome.picked is not None:
            decisions = cut_to_pick(ranking, outcome, self._shortlist(), config.top_k, snapshot)
        else:
            decisions = cut(ranking, config, snapshot)
        everything_fits = snapshot.count <= budget  # counted on the mask: no per-tool list on this path
        if everything_fits:
            decisions = send_everything(snapshot, decisions, budget)
            names = [d.full_name for d in decisions]
        elif turn is not None:
            best = [(r.tools[0].full_name, need) for need, r in zip(needs, need_rankings, strict=True) if r.tools]
            names, decisions = self._plan_agent_loop(request, turn, snapshot, decisions, best)
        else:
            names = [d.full_name for d in decisions if d.kept]
        pins = self._pins(request, config, snapshot, with_discovery=config.enabled and not everything_fits)
        names, decisions, pinned = add_pins(snapshot, names, decisions, pins)
        names, decisions = cap_total(names, decisions, pinned, config.max_tools_total)
        return Selection(names, ranking, decisions, outcome)

    async def _first_stage(
        self, request: SelectionRequest, snapshot: Snapshot, config: ToolFilterConfig, needs: list[str]
    ) -> list[Ranking]:
        """The request and an agent loop's listed actions ranked in one batch (one embedding call); tools
        without evidence are never sent, so the rankings do not list them. Ranked as deep as ``explain``
        shows; with ``request.explained`` False, a text ranked whole only as deep as the cut can keep:
        the tools past that would be built, scored and cut on every request for nobody to read."""

        async def ranked(sending: int | None) -> list[Ranking]:
            return await rank_many(
                snapshot.catalog.index,
                [request.query, *needs],
                config,
                limit=max(config.top_k * 4, 20, self._shortlist()),
                allowed=None if snapshot.every_tool else snapshot.candidates,
                memory=self.learning.usable(request.scope, request.conversation),
                whole_text_limit=sending,
            )

        sending = None if request.explained else max(config.top_k, self._shortlist())
        rankings = await ranked(sending)
        first = rankings[0].tools
        if sending is not None and len(first) == sending and not all(snapshot.exists(t.full_name) for t in first):
            rankings = await ranked(None)  # a ranked tool left its source in place: the cut reads further
        return rankings

    def _shortlist(self) -> int:
        """How many first-stage tools a second stage reads (0 without one)."""
        return self.config.rerank.shortlist if self.second_stage is not None else 0

    async def _pick(
        self, request: SelectionRequest, ranking: Ranking, snapshot: Snapshot, budget: int
    ) -> StageOutcome | None:
        """The second stage's outcome (it picks at most ``top_k``), or None without one or with nothing
        to choose from (small talk, nothing ranked, or every candidate fits the budget anyway)."""
        if self.second_stage is None or ranking.no_tool_reason is not None or snapshot.count <= budget:
            return None
        if not any(t.evidence and not t.name_match for t in ranking.tools):
            return None
        return await run_second_stage(self.second_stage, request, ranking, self.config.top_k, self.stage_breaker)

    def _pins(
        self, request: SelectionRequest, config: ToolFilterConfig, snapshot: Snapshot, *, with_discovery: bool
    ) -> list[tuple[str, str]]:
        """Every pin in order: the configuration's own, overrides and sources, the request's extra pins,
        the most used tools, then (when not everything is sent) the discovery tools."""
        pins = [(n, "pinned: always_include") for n in config.always_include]
        pins += self.policy.pinned()
        pins += request.extra_pins
        top_n = config.always_include_top_n_used
        most_used = self.calls.most_used(top_n, snapshot.catalog.visible)
        pins += [(n, f"pinned: among the {top_n} most used tools") for n in most_used]
        if with_discovery:
            # When every candidate is sent there is nothing left to discover: a small agent sends
            # exactly what plain Semantic Kernel sends, never more.
            pins += [(n, "pinned: discovery tool") for n in snapshot.catalog.discovery_names]
        return pins

    def _needs(self, request: str) -> list[str]:
        """The actions a request lists (``agent_loop.split_request``); [] when it asks for one thing."""
        if not self.config.agent_loop.split_request:
            return []
        needs = split_request_clauses(request[:MAX_LISTED_REQUEST_CHARS])[:MAX_QUERY_PARTS]
        return needs if len(needs) > 1 else []

    def _plan_agent_loop(
        self,
        request: SelectionRequest,
        turn: Turn,
        snapshot: Snapshot,
        decisions: list[ToolDecision],
        best: list[tuple[str, str]],
    ) -> tuple[list[str], list[ToolDecision]]:
        """The agent-loop stage: the turn's tools, co-usage and the best tool of each listed action
        (`best`: ``(tool, action)`` pairs), within one budget."""
        ranked = [d.full_name for d in decisions if d.kept]
        loop = LoopInputs(
            turn,
            request.previous_turn,
            ranked,
            decisions,
            best,
            self.budget(turn),
            snapshot.catalog.index.providers,
            self.policy.is_destructive,
        )
        past = self.learning.usable(request.scope, request.conversation)
        return plan_agent_loop(self.config.agent_loop, loop, past, snapshot.usable)
