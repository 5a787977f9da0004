"""The agent-loop plan: which tools a request inside a turn gets, within one budget per request."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sk_toolfilter.config import AgentLoopConfig
from sk_toolfilter.retrieval.cutoff import ToolDecision
from sk_toolfilter.retrieval.memory import ScopedMemory
from sk_toolfilter.retrieval.prerequisites import Provider, providers_of
from sk_toolfilter.selection.turns import Turn

Usable = Callable[[str, bool], bool]
"""``usable(name, searchable_only)``: the tool may be offered (visible, or searchable; allowed; exists)."""

CompanionSource = ScopedMemory
"""Co-usage: what learning from use remembers of the request's scope, read as the request's conversation may."""


@dataclass(frozen=True)
class LoopInputs:
    """One request of an agent loop: its turn, the previous turn, the ranking and what it decided."""

    turn: Turn
    previous: Turn | None
    ranked: list[str]
    decisions: list[ToolDecision]
    needs: Sequence[tuple[str, str]]
    """(best tool, need) for each action the request lists."""
    budget: int
    providers: Mapping[str, tuple[Provider, ...]] = field(default_factory=dict)
    """Lookup tools that give a tool's required parameter (:mod:`sk_toolfilter.retrieval.prerequisites`)."""
    destructive: Callable[[str], bool] = lambda _: False
    """Whether a tool is destructive (it never enters on other conversations' past requests alone)."""


def plan_agent_loop(
    loop: AgentLoopConfig, inputs: LoopInputs, past: CompanionSource | None, usable: Usable
) -> tuple[list[str], list[ToolDecision]]:
    """Within the budget: the turn's tools (latest first), the best ranked, their companions from past
    turns, the lookups that give their parameters (for a best-ranked tool no past turn used), the best
    tool of each need the request lists, the rest of the ranking, then the previous turn's tools.
    Returns the names chosen and every decision with its reason."""
    turn, previous, ranked, decisions = inputs.turn, inputs.previous, inputs.ranked, inputs.decisions
    reasons: dict[str, str] = {}
    turn_tools = [n for n in reversed(turn.calls) if usable(n, False)] if loop.keep_turn_tools else []
    for name in turn_tools:
        reasons[name] = "kept: called earlier in this turn"
    anchors = ranked[: loop.co_usage_anchors]
    companions = []
    learned = past if loop.co_usage else None
    if learned is not None:
        found = learned.companions([*anchors, *turn_tools], min_share=loop.co_usage_min_share)
        for companion in found:
            if companion.together < loop.co_usage_min_turns or companion.name in reasons:
                continue
            # A destructive tool never enters another conversation's list on past requests alone.
            if usable(companion.name, True) and (companion.own or not inputs.destructive(companion.name)):
                companions.append(companion.name)
                of = f"{companion.together} of {companion.anchor_conversations}"
                reasons[companion.name] = (
                    f"kept: used with {companion.anchor} in {of} earlier requests of this conversation"
                    if companion.own
                    else f"kept: used with {companion.anchor} in {of} past conversations"
                )
    lookups = []
    if loop.lookup_tools:
        # What past turns show replaces what the schemas suggest: a tool some turn used has its companions.
        unlearned = [a for a in anchors if learned is None or not learned.knows_companions_of(a)]
        for consumer, provider in providers_of(unlearned, inputs.providers):
            if usable(provider.name, True) and provider.name not in reasons:
                lookups.append(provider.name)
                reasons[provider.name] = f"kept: gives {provider.parameter!r} of {consumer}"
    need_tools = []
    for name, need in inputs.needs:
        if usable(name, True) and name not in reasons:
            need_tools.append(name)
            reasons[name] = f"kept: best match for {quoted(need)}, one part of the request"
    earlier = []
    if loop.previous_turn_tools and previous is not None:
        for name in reversed(previous.calls):
            if usable(name, False) and name not in reasons and name not in ranked:
                earlier.append(name)
                reasons[name] = "kept: called in the previous turn (room left in the budget)"
    budget = inputs.budget
    planned = list(dict.fromkeys([*turn_tools, *anchors, *companions, *lookups, *need_tools, *ranked, *earlier]))
    chosen = planned[:budget]
    return chosen, _decisions(chosen, decisions, reasons, turn_tools, budget)


def _decisions(
    chosen: list[str], decisions: list[ToolDecision], reasons: Mapping[str, str], turn_tools: list[str], budget: int
) -> list[ToolDecision]:
    """Every decision after the plan: the chosen tools with their reason (a ranked tool keeps the
    cut's), then the rest; a tool the cut kept but the plan left out is cut as beyond the budget."""
    kept = set(chosen)
    by_name = {d.full_name: d for d in decisions}
    updated = []
    for name in chosen:
        if name in by_name and by_name[name].kept and name not in turn_tools:
            updated.append(by_name[name])
        else:
            old = by_name.get(name)
            score, method_scores = (old.score, old.method_scores) if old else (None, None)
            updated.append(ToolDecision(name, True, reasons[name], score, method_scores))
    beyond = f"cut: beyond the budget of {budget} tools per request"
    for decision in decisions:
        if decision.full_name in kept:
            continue
        if decision.kept:
            decision = ToolDecision(decision.full_name, False, beyond, decision.score, decision.method_scores)
        updated.append(decision)
    return updated


def quoted(text: str, limit: int = 60) -> str:
    """`text` in quotes, cut to `limit` characters."""
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
