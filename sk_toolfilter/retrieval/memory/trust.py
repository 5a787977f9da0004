"""Trust, learned from the deployment's own traffic: each scope's rows predicted from its other
conversations (leave one out), and each tool's usage vector with its precision. Computed off the
request path from a snapshot of the rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sk_toolfilter.retrieval.memory.evidence import past_evidence_scores
from sk_toolfilter.retrieval.memory.rule import LearningRule

TRUST_SAMPLE = 256  # remembered requests predicted from the others to estimate trust
TRUST_PRIOR_MASS = 2.0  # usage mass that counts as missed before any evidence: trust starts at 0


@dataclass(frozen=True)
class RowsSnapshot:
    """What the trust estimate and the usage vectors read, copied under the lock (they are computed off the
    request path)."""

    codes: np.ndarray
    scales: np.ndarray
    scopes: np.ndarray
    tools: list[tuple[str, ...]]
    conversations: list[str]


@dataclass(frozen=True)
class ToolVectors:
    """One scope's usage vectors: a unit row per tool called in ``min_conversations`` conversations."""

    matrix: np.ndarray
    position: dict[str, int]
    conversations: np.ndarray
    precision: np.ndarray
    """Per tool: of the sampled past requests at or above the floor to its vector, the share that called it."""


def tool_vectors(snapshot: RowsSnapshot, live: np.ndarray, rule: LearningRule) -> dict[int, ToolVectors]:
    """Each scope's usage vectors: per tool, the mean direction over the conversations that called it of
    each conversation's mean request direction (a conversation is one vote, however many its turns);
    only tools of ``min_conversations`` conversations or more."""
    rows: list[int] = []
    groups: dict[tuple[int, str, str], int] = {}
    inverse: list[int] = []
    for i in live.tolist():
        for name in snapshot.tools[i]:
            rows.append(i)
            inverse.append(groups.setdefault((int(snapshot.scopes[i]), name, snapshot.conversations[i]), len(groups)))
    if not rows:
        return {}
    vectors = snapshot.codes[rows].astype(np.float32) * snapshot.scales[rows][:, None]
    per_conversation = _group_mean_directions(vectors, np.asarray(inverse), len(groups))
    tools: dict[tuple[int, str], int] = {}
    tool_of = np.asarray([tools.setdefault((scope, name), len(tools)) for scope, name, _ in groups])
    per_tool = _group_mean_directions(per_conversation, tool_of, len(tools))
    counts = np.bincount(tool_of, minlength=len(tools))
    found: dict[int, tuple[list[str], list[int]]] = {}
    for (scope, name), t in tools.items():
        if counts[t] >= rule.min_conversations:
            names, positions = found.setdefault(scope, ([], []))
            names.append(name)
            positions.append(t)
    tables = {}
    for scope, (names, positions) in found.items():
        matrix = per_tool[positions]
        tables[scope] = ToolVectors(
            matrix,
            {n: p for p, n in enumerate(names)},
            counts[positions],
            _precision(snapshot, live[snapshot.scopes[live] == scope], matrix, names, rule.vector_floor),
        )
    return tables


def _precision(
    snapshot: RowsSnapshot, rows: np.ndarray, matrix: np.ndarray, names: list[str], floor: float
) -> np.ndarray:
    """Per tool vector: of (a sample of) the scope's past requests at or above `floor` to it, the share
    that called the tool (one pseudo-miss: a vector that fired once is not yet precise)."""
    if len(rows) > TRUST_SAMPLE * 8:
        rows = np.random.default_rng(len(rows)).choice(rows, size=TRUST_SAMPLE * 8, replace=False)
    vectors = snapshot.codes[rows].astype(np.float32) * snapshot.scales[rows][:, None]
    fired = (vectors @ matrix.T) >= floor
    position = {n: p for p, n in enumerate(names)}
    called = np.zeros_like(fired)
    for r, i in enumerate(rows.tolist()):
        for name in snapshot.tools[i]:
            if name in position:
                called[r, position[name]] = True
    hits = (fired & called).sum(axis=0)
    return hits / (fired.sum(axis=0) + 1.0)


def _group_mean_directions(vectors: np.ndarray, group: np.ndarray, groups: int) -> np.ndarray:
    """The unit mean of the rows of each group (a group's rows summed with one sort and reduceat)."""
    order = np.argsort(group, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(group[order]) != 0])
    sums = np.zeros((groups, vectors.shape[1]), dtype=np.float32)
    sums[group[order][starts]] = np.add.reduceat(vectors[order], starts, axis=0)
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    return sums / np.maximum(norms, 1e-12)


def estimate_trust(snapshot: RowsSnapshot, live: np.ndarray, rule: LearningRule) -> tuple[float, dict[int, float]]:
    """Trust over every scope, and each scope's own (its rows predicted from its own other conversations:
    one tenant's traffic never moves another's trust). One scope: a sample of ``TRUST_SAMPLE`` rows;
    several: each scope its share of that sample, at least 16 rows (all it has when fewer)."""
    scope_of = snapshot.scopes[live]
    scopes = np.unique(scope_of).tolist()
    per_scope, hits, masses = {}, 0.0, 0.0
    for sid in scopes:
        rows = live[scope_of == sid]
        if len(scopes) == 1:
            rng, size = np.random.default_rng(len(live)), min(TRUST_SAMPLE, len(rows))
        else:
            share = -(-TRUST_SAMPLE * len(rows) // len(live))
            rng, size = np.random.default_rng((len(rows), int(sid))), min(len(rows), max(16, share))
        if len(rows) < 2:
            per_scope[int(sid)] = 0.0
            continue
        hit, mass = _predicted(snapshot, rows[rng.choice(len(rows), size=size, replace=False)], rule)
        per_scope[int(sid)] = hit / (mass + TRUST_PRIOR_MASS)
        hits, masses = hits + hit, masses + mass
    return hits / (masses + TRUST_PRIOR_MASS), per_scope


def _predicted(snapshot: RowsSnapshot, sample: np.ndarray, rule: LearningRule) -> tuple[float, float]:
    """(usage mass on tools each sampled row called, all usage mass), each row predicted from the other
    conversations of its scope."""
    import simsimd

    codes, scales = snapshot.codes, snapshot.scales
    sims = np.asarray(simsimd.cdist(codes[sample], codes, metric="dot"), dtype=np.float32)
    sims *= scales[sample][:, None] * scales[None, :]
    hit, mass = 0.0, 0.0
    for j, row_sims in zip(sample.tolist(), sims, strict=True):
        row_sims[snapshot.scopes != snapshot.scopes[j]] = -np.inf  # predicted from its own scope only
        scores = past_evidence_scores(
            row_sims, snapshot.tools, snapshot.conversations, rule, skip=snapshot.conversations[j]
        )
        called = set(snapshot.tools[j])
        hit += sum(e.score for n, e in scores.items() if n in called)
        mass += sum(e.score for e in scores.values())
    return hit, mass


def scaled_trust(trust: float, floor: float) -> float:
    if trust <= floor:
        return 0.0
    return (trust - floor) / (1.0 - floor) if floor < 1.0 else 0.0
