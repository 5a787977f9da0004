"""What similar past requests say of each tool: the scores a request reads from the remembered rows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sk_toolfilter.retrieval.memory.rule import LearningRule


@dataclass(frozen=True)
class PastEvidence:
    """Why a tool has a usage score: `requests` similar past conversations called it, the best at `best`
    (``kind="vector"``: the tool's usage vector, from `requests` conversations, is at cosine `best`)."""

    score: float
    requests: int
    best: float
    kind: str = "neighbours"
    own: bool = False
    """The request's own conversation called it (its own earlier requests steer it)."""

    def is_plain(self, rule: LearningRule) -> bool:
        """Whether this is plain evidence (``rule.plain_trust``): near-copies of the request called the tool
        in ``min_conversations`` conversations, with a usage score of at least ``enter``."""
        return (
            rule.plain_trust > 0
            and self.kind == "neighbours"
            and self.requests >= rule.min_conversations
            and self.best >= rule.plain_similarity
            and self.score >= rule.enter
        )

    def describe(self) -> str:
        if self.kind == "vector":
            plural = "conversation" if self.requests == 1 else "conversations"
            return f"the requests that called it in {self.requests} past {plural} resemble this one ({self.best:.2f})"
        plural = "request" if self.requests == 1 else "requests"
        return f"{self.requests} past {plural} like this one (best {self.best:.2f}) called it"


class PastEvidenceScores(dict[str, PastEvidence]):
    """Usage scores by tool, and what was near but did not count: `near` similar past requests (rows at
    or above the gate) in `conversations` conversations, and the tools they called too few conversations
    (under ``min_conversations``) to count."""

    near: int = 0
    conversations: int = 0
    too_few: tuple[str, ...] = ()


def similarities(query: tuple[np.ndarray, np.float32], codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Cosine of every row of `codes` to the quantized `query` (int8 dot products, exact on every CPU)."""
    import simsimd

    q, scale = query
    dots = np.asarray(simsimd.cdist(q, codes, metric="dot"), dtype=np.float32)[0]
    dots *= scales
    dots *= scale
    return dots


def past_evidence_scores(
    sims: np.ndarray,
    tools: Sequence[tuple[str, ...]],
    conversations: Sequence[str],
    rule: LearningRule,
    *,
    decay: Callable[[np.ndarray], np.ndarray] | None = None,
    skip: str | None = None,
    own: str | None = None,
) -> PastEvidenceScores:
    """Each tool's usage score from the rows' cosines `sims` to a request: the ``neighbours`` nearest
    conversations at or above the gate (one conversation weighs what its nearest row does, however many
    of its turns are near), a tool scored only when ``min_conversations`` of them called it, or the
    request's `own` conversation did. `skip`: a conversation left out (trust's leave-one-out)."""
    near = np.flatnonzero(sims >= rule.gate)
    if not len(near):
        return PastEvidenceScores()
    pool = rule.neighbours * 4  # rows of one conversation may crowd the nearest: read a few more
    if len(near) > pool:
        near = near[np.argpartition(-sims[near], pool - 1)[:pool]]
    near = near[np.argsort(-sims[near], kind="stable")]
    weights = (sims[near] - rule.gate) / (1.0 - rule.gate) + 1e-6
    if decay is not None:
        weights = weights * decay(near)
    weight_of: dict[str, float] = {}
    support: dict[str, dict[str, tuple[float, float]]] = {}
    for i, w, sim in zip(near.tolist(), weights.tolist(), sims[near].tolist(), strict=True):
        conversation = conversations[i]
        if conversation == skip:
            continue
        if conversation not in weight_of:
            if len(weight_of) >= rule.neighbours:
                continue
            weight_of[conversation] = w
        elif w > weight_of[conversation]:
            weight_of[conversation] = w
        for name in tools[i]:
            per = support.setdefault(name, {})
            best = per.get(conversation)
            if best is None or w > best[0]:
                per[conversation] = (w, sim)
    if not weight_of:
        return PastEvidenceScores()
    total = sum(weight_of.values()) + rule.prior
    scores = PastEvidenceScores(
        (
            name,
            PastEvidence(
                sum(w for w, _ in per.values()) / total,
                len(per),
                max(s for _, s in per.values()),
                own=own is not None and own in per,
            ),
        )
        for name, per in support.items()
        if len(per) >= rule.min_conversations or (own is not None and own in per)
    )
    scores.near, scores.conversations = len(near), len(weight_of)
    scores.too_few = tuple(name for name in support if name not in scores)
    return scores
