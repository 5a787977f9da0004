"""The first stage's shortlist reordered by what similar past requests called (the order only: the
first stage's scores are given back position by position)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sk_toolfilter.retrieval.memory.evidence import PastEvidence
from sk_toolfilter.retrieval.memory.rule import LearningRule


@dataclass
class Reordered:
    """The shortlist after learning: names best first, the tools that moved up with their evidence, and
    (when nothing moved although similar past requests were found) why not."""

    names: list[str]
    moved: dict[str, PastEvidence] = field(default_factory=dict)
    note: str | None = None
    entered: dict[str, str] = field(default_factory=dict)
    """Tools that entered from below the shortlist but overtook nothing: where they landed, and why."""


def reorder_by_past_calls(
    names: Sequence[str],
    scores: Sequence[float],
    evidence: dict[str, PastEvidence],
    strength: float,
    rule: LearningRule,
    permitted: Callable[[str], bool] | None = None,
    closeness: dict[str, PastEvidence] | None = None,
    vector_strength: float = 0.0,
    plain_strength: float = 0.0,
) -> Reordered:
    """`names` (best first) reordered within the rule's ``depth`` by envelope score + strength × usage
    (+ vector_strength × the closeness of the request to the tool's usage vector); a tool whose evidence
    is plain (:meth:`PastEvidence.is_plain`) uses `plain_strength` when that is the greater.

    A tool from below the depth (or without first-stage evidence: score 0) enters when its usage is at
    least the rule's ``enter`` and `permitted` allows it (the request's allowed, visible tools).
    """
    closeness = closeness or {}
    head = list(names[: rule.depth])
    envelope, lowest = [], math.inf
    for score in scores[: len(head)]:
        lowest = min(lowest, float(score))
        envelope.append(max(0.0, lowest))
    place = {n: p for p, n in enumerate(names)}
    entering = [
        n
        for n, e in evidence.items()
        if place.get(n, rule.depth) >= rule.depth and e.score >= rule.enter and (permitted is None or permitted(n))
    ]
    if not entering and not any(n in evidence or n in closeness for n in head):
        return Reordered(list(names))
    for name in sorted(entering, key=lambda n: (place.get(n, len(names)), n)):
        head.append(name)
        p = place.get(name)
        envelope.append(min(envelope[-1] if envelope else 1.0, max(0.0, float(scores[p]))) if p is not None else 0.0)

    def key(p: int) -> tuple[float, int]:
        past = evidence.get(head[p])
        usage = past.score * max(strength, plain_strength if past.is_plain(rule) else 0.0) if past else 0.0
        near = closeness[head[p]].score if head[p] in closeness else 0.0
        return -(envelope[p] + usage + vector_strength * near), p

    keyed = sorted(range(len(head)), key=key)
    moved = {head[p]: evidence.get(head[p]) or closeness[head[p]] for new, p in enumerate(keyed) if new < p}
    landed = {head[p]: new for new, p in enumerate(keyed)}
    position = {name: p for p, name in enumerate(head)}
    quiet = {}
    for name in entering:  # in the list, but overtaking nothing: said, not dropped without a word
        if name in moved:
            continue
        rank, line = landed[name], f"{name} entered at place {landed[name] + 1}"
        if rank:
            above = keyed[rank - 1]
            line += f", below {head[above]} ({-key(above)[0]:.2f} against {-key(position[name])[0]:.2f})"
        quiet[name] = f"{line}: {evidence[name].describe()}"
    entered = set(head)
    return Reordered(
        [head[p] for p in keyed] + [n for n in names[rule.depth :] if n not in entered], moved, entered=quiet
    )
