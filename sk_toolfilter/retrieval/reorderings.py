"""What may reorder the first stage's ranking, in the order they run: a second stage (the cross-encoder
or the learned ranker, ``rerank``), then learning from use (``learning``).

Each reordering reads the :class:`~sk_toolfilter.retrieval.first_stage.FirstStage` and the order so
far, and returns a new order. None adds evidence: a reordered ranking keeps the first stage's scores
position by position (``Ordered.positional``), so the cut decides how many tools are sent as it would
have without the reordering.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

import numpy as np

from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.retrieval.candidate_features import FirstStagePass, candidate_features, load_learned_ranker
from sk_toolfilter.retrieval.first_stage import FirstStage, interleave
from sk_toolfilter.retrieval.memory import LearningMemory, ScopedMemory
from sk_toolfilter.retrieval.rerank import SecondStage, rerank_lists

ReorderingStep = Literal["cross-encoder", "learned ranker", "learning from use"]
"""The reorderings by name, as :attr:`~sk_toolfilter.retrieval.search.Ranking.steps` keys them."""


@dataclass(frozen=True, slots=True)
class StepNote:
    """What one reordering did to one ranking: whether it changed the order, and in ``explain``'s words
    what it did or why the order stands."""

    reordered: bool
    text: str


@dataclass(slots=True)
class Ordered:
    """A ranking's order (catalog positions) and what the reorderings said of it."""

    order: list[int]
    positional: list[float] = field(default_factory=list)
    """The first stage's scores of the unnamed tools, position by position, once a reordering moved
    tools (empty: the scores follow the tools). What the cut reads."""
    second: SecondStage | None = None
    """The cross-encoder's outcome (its per-tool scores are shown beside the methods')."""
    steps: dict[ReorderingStep, StepNote] = field(default_factory=dict)
    """What each reordering that ran said, in the order they ran."""
    learned: dict[str, str] = field(default_factory=dict)
    """Tools learning from use moved up, and why."""

    def noted(self, step: ReorderingStep, note: StepNote | None, **changes: Any) -> Ordered:
        """This order with `changes` (``order``, ``positional``, ...) and `step`'s note, when it has one."""
        return replace(self, **changes, steps=self.steps if note is None else {**self.steps, step: note})


class Reordering(Protocol):
    """One step after the first stage."""

    async def __call__(self, first: FirstStage, ordered: Ordered, depth: int | None) -> Ordered:
        """The new order of `ordered` (at most `depth` tools)."""
        ...


def reorderings(
    first: FirstStage, config: ToolFilterConfig, memory: LearningMemory | ScopedMemory | None
) -> tuple[list[Reordering], int]:
    """The reorderings that apply to `first` (none for small talk, and none that reads vectors for a
    request ranked without them) and how many tools they need ranked (0: no more than sent)."""
    if first.no_tool_reason is not None:
        return [], 0
    steps: list[Reordering] = []
    kind = config.rerank.type
    if kind == "cross-encoder":
        steps.append(CrossEncoderStep())
    learned_stage = kind == "learned" and first.vectors is not None
    if learned_stage:
        steps.append(LearnedRankerStep())
    learning = memory is not None and len(memory) > 0 and first.vectors is not None
    if learning:
        assert memory is not None
        steps.append(LearningStep(memory))
    if not (learning or learned_stage):
        return steps, 0
    # The shortlist is read whenever one of them is on (a deeper ranking costs little, and a
    # reordering must see every tool it may move).
    return steps, max(memory.rule.depth if learning and memory is not None else 0, config.rerank.shortlist)


class CrossEncoderStep:
    """``rerank: cross-encoder``: the shortlist reordered by the reranker, each text's list in turn."""

    async def __call__(self, first: FirstStage, ordered: Ordered, depth: int | None) -> Ordered:
        rerank = first.config.rerank
        lists = first.lists(None if depth is None else max(depth, rerank.shortlist))
        order = interleave(lists)
        if len(order) <= 1:
            return ordered.noted("cross-encoder", None, order=order[:depth])
        second = await rerank_lists(first.index, first.query, lists, order[: rerank.shortlist], rerank)
        positional: list[float] = []
        if second.lists is not None:  # the scores the cut would have seen, named tools (always first) aside
            named = set(first.named)
            positional = [float(first.final[i]) for i in order[:depth] if i not in named]
            reordered = interleave(second.lists)
            kept = set(reordered)
            order = reordered + [i for i in order if i not in kept]  # beyond the shortlist: first-stage order
        note = StepNote(second.lists is not None, second.note)
        return ordered.noted("cross-encoder", note, order=order[:depth], positional=positional, second=second)


class LearnedRankerStep:
    """``rerank: learned``: the shortlist reordered by the learned ranker over the first stage's own evidence."""

    async def __call__(self, first: FirstStage, ordered: Ordered, depth: int | None) -> Ordered:
        if len(ordered.order) <= 1:
            return ordered
        config = first.config
        ranker = load_learned_ranker(config.rerank.model)
        named = set(first.named)
        unnamed = [i for i in ordered.order if i not in named]
        head = unnamed[: min(config.rerank.shortlist, ranker.shortlist)]
        whole, final = first.whole.raw, first.final
        view = FirstStagePass(
            first.query, head, final, [s.final for s in first.scored[1:]], whole.get("semantic"), whole.get("bm25")
        )
        rows = candidate_features(view, first.index.vectors_of(head), first.index.tools, len(first.index))
        ranked = [head[i] for i in np.argsort(-ranker.scores(rows), kind="stable")]
        positional = [float(final[i]) for i in unnamed]
        note = StepNote(True, learned_note(len(head), min(config.rerank.shortlist, ranker.shortlist)))
        return ordered.noted(
            "learned ranker", note, order=first.named + ranked + unnamed[len(head) :], positional=positional
        )


def learned_note(ranked: int, shortlist: int) -> str:
    """What the learned ranker did, in ``explain``'s words: its shortlist, and how many tools filled it."""
    if ranked >= shortlist:
        return f"the learned ranker ordered the first stage's top {shortlist}"
    return f"the learned ranker ordered the first stage's top {shortlist} (only {ranked} matched the request)"


@dataclass(slots=True)
class LearningStep:
    """Learning from use: what similar past requests called moves up (:mod:`sk_toolfilter.retrieval.memory`)."""

    memory: LearningMemory | ScopedMemory

    async def __call__(self, first: FirstStage, ordered: Ordered, depth: int | None) -> Ordered:
        if first.vectors is None or not ordered.order:
            return ordered
        index, mask = first.index, first.mask
        named = set(first.named)
        unnamed = [i for i in ordered.order if i not in named]
        scores = ordered.positional or [float(first.final[i]) for i in unnamed]
        names = [index.tools[i].full_name for i in unnamed]

        def permitted(name: str) -> bool:
            return name in index and (mask is None or bool(mask[index.position(name)]))

        reordered = self.memory.reorder(names, scores, first.vectors[0], permitted)
        # A tool that entered but overtook nothing is said (where it landed, below whom, by how much).
        text = "; ".join([*([reordered.note] if reordered.note else []), *reordered.entered.values()])
        if not reordered.moved:
            return ordered.noted("learning from use", StepNote(False, text) if text else None, learned={})
        learned_order = [index.position(n) for n in reordered.names]
        scores = scores + [0.0] * (len(learned_order) - len(scores))  # a tool that entered: the list grew
        moved = {n: e.describe() for n, e in reordered.moved.items()}
        note = StepNote(True, text or f"moved up {', '.join(moved)}")
        return ordered.noted(
            "learning from use", note, order=first.named + learned_order, positional=scores, learned=moved
        )
