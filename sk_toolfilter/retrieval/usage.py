"""Learning from use: a request like one the agent has served gets the tools that served it.

Every completed turn is remembered as *(the request's vector, the tools called)* — never its text.
For a new request, a tool's **usage score** is the share of the similar past requests (cosine at
least ``gate``, the ``neighbours`` nearest) that called it, each weighted by how similar it is, with
a pseudo-weight (``prior``) so that one distant neighbour is weak evidence. The first stage's
shortlist (its ``depth`` best) is then reordered by

    its first-stage score (made non-increasing down the list)  +  weight × trust × usage

and the first stage's scores are given back position by position, so learning changes the *order*
only: how many tools the cut sends is what it was cold.

**Trust** is learned from the deployment's own traffic, never fixed by hand: each remembered request
is predicted from the others (leave one out), and trust is the share of the usage mass that fell on
tools it really called (with a prior that starts at zero). A catalog whose similar requests call
the same tools (people asking for the same things) earns trust; one whose requests are sampled API
combinations (similar words, different tools) does not, and there the memory stays quiet. ``floor``
is the trust below which the memory changes nothing. The constants of :data:`DEFAULT_RULE` were
chosen by traffic replay (``benchmarks/learning_replay_benchmark.py``).

Each remembered vector is kept as int8 codes with one scale (:mod:`~sk_toolfilter.retrieval.scoring`:
388 bytes at 384 dimensions; cosines move by ~2e-3), so 20,000 requests cost ~11 MB and one scan
~0.2 ms. Bounded: at most ``max_requests`` rows and ``max_bytes``; one row per request fingerprint (the same
request repeated refreshes its row, it never adds weight); rows older than ``max_age_days`` leave,
and a row's weight halves every ``half_life_days``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from sk_toolfilter.retrieval.scoring import quantize_one

# What one row costs beyond its vector: the fingerprint key, the tool tuple, the bookkeeping.
ROW_OVERHEAD_BYTES = 160
MAX_TOOLS_PER_REQUEST = 12  # a turn of many calls (a bulk delete) says little about any one of them
TRUST_SAMPLE = 256  # remembered requests predicted from the others to estimate trust
TRUST_PRIOR_MASS = 2.0  # usage mass that counts as missed before any evidence: trust starts at 0


@dataclass(frozen=True)
class UsageRule:
    """How usage scores are computed and combined with the first stage (see the module docstring)."""

    gate: float = 0.8
    neighbours: int = 10
    prior: float = 0.3
    weight: float = 4.0
    floor: float = 0.0
    depth: int = 30
    enter: float = 0.5


DEFAULT_RULE = UsageRule()


@dataclass(frozen=True)
class UsageEvidence:
    """Why a tool has a usage score: `requests` similar past requests called it, the best at `best`."""

    score: float
    requests: int
    best: float

    def describe(self) -> str:
        plural = "request" if self.requests == 1 else "requests"
        return f"{self.requests} past {plural} like this one (best {self.best:.2f}) called it"


@dataclass
class Reordered:
    """The shortlist after learning: names best first, and the tools that moved up with their evidence."""

    names: list[str]
    moved: dict[str, UsageEvidence] = field(default_factory=dict)


class UsageMemory:
    """Past requests (unit vectors) and the tools each called, bounded; thread-safe.

    `dims` is fixed by the first vector learned (or given); a vector of another size is refused
    (:meth:`learn` returns False), as is one that is not finite.
    """

    def __init__(
        self,
        *,
        max_requests: int = 20_000,
        max_bytes: int = 64 * 2**20,
        max_age_days: float | None = 180.0,
        half_life_days: float | None = 30.0,
        rule: UsageRule = DEFAULT_RULE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.max_age_days = max_age_days
        self.half_life_days = half_life_days
        self.rule = rule
        self._clock = clock
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self._codes = np.zeros((0, 0), dtype=np.int8)  # int8 codes, one scale per row (retrieval.scoring)
        self._scales = np.zeros(0, dtype=np.float32)
        self._count = 0
        self._tools: list[tuple[str, ...]] = []
        self._keys: list[str] = []
        self._times = np.zeros(0, dtype=np.float64)
        self._row_of: dict[str, int] = {}
        self._trust: float | None = None
        self._added_since_trust = 0
        self.version = 0
        """Grows with every change (the file and table write when it moved)."""

    # -- size ----------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    @property
    def dims(self) -> int:
        return int(self._codes.shape[1])

    @property
    def nbytes(self) -> int:
        """What the remembered rows cost (vectors, names, bookkeeping)."""
        names = sum(len(n) for tools in self._tools[: self._count] for n in tools)
        return self._count * (self.dims + 4 + ROW_OVERHEAD_BYTES) + names

    def capacity(self, dims: int) -> int:
        """The most rows kept at `dims` dimensions: ``max_requests`` and ``max_bytes`` both hold."""
        return max(1, min(self.max_requests, self.max_bytes // (dims + 4 + ROW_OVERHEAD_BYTES + 64)))

    # -- learning ------------------------------------------------------------------------------------

    def learn(self, vector: np.ndarray, tools: Sequence[str], key: str, at: float | None = None) -> bool:
        """Remember that the request `key` (a fingerprint, never text) with `vector` called `tools`.

        The same `key` again replaces its row (its newest tools, its newest time): a request repeated
        a thousand times weighs what it weighs once. Returns False when nothing was learned (no
        tools, a vector of the wrong size or not finite, a time older than ``max_age_days``).
        """
        calls = tuple(dict.fromkeys(t for t in tools if t))[:MAX_TOOLS_PER_REQUEST]
        row = _unit_row(vector)
        if not calls or row is None:
            return False
        when = self._clock() if at is None else float(at)
        if not math.isfinite(when) or self._expired(when):
            return False
        with self._lock:
            if self._count and row.shape[0] != self.dims:
                return False
            self._put(row, calls, key, when)
            self._drop_expired()
            self.version += 1
        return True

    def _put(self, row: np.ndarray, calls: tuple[str, ...], key: str, when: float) -> None:
        codes, scale = quantize_one(row)
        existing = self._row_of.get(key)
        if existing is not None:
            if when >= self._times[existing]:
                self._codes[existing], self._scales[existing] = codes[0], scale
                self._tools[existing], self._times[existing] = calls, when
            return
        if self._count == 0:
            self._codes = np.zeros((0, row.shape[0]), dtype=np.int8)
        limit = self.capacity(row.shape[0])
        if self._count >= limit:  # the oldest leave (ties: the first learned); one, usually, found without a sort
            times, excess = self._times[: self._count], self._count - limit + 1
            self._remove(np.array([np.argmin(times)]) if excess == 1 else np.argsort(times, kind="stable")[:excess])
        if self._count == self._codes.shape[0]:
            grown = max(16, min(limit, 2 * self._count))
            self._codes = _resized(self._codes, grown)
            self._scales = np.resize(self._scales, grown)
            self._times = np.resize(self._times, grown)
        i = self._count
        self._codes[i], self._scales[i], self._times[i] = codes[0], scale, when
        self._tools.append(calls)
        self._keys.append(key)
        self._row_of[key] = i
        self._count += 1
        self._added_since_trust += 1

    def keys(self) -> list[str]:
        """The fingerprints of the remembered requests."""
        with self._lock:
            return list(self._keys)

    def knows(self, key: str, tools: Sequence[str]) -> bool:
        """Whether the request `key` is remembered with these `tools` already (nothing new to learn)."""
        with self._lock:
            row = self._row_of.get(key)
            return row is not None and self._tools[row] == tuple(dict.fromkeys(tools))[:MAX_TOOLS_PER_REQUEST]

    def forget_tools(self, keep: Callable[[str], bool]) -> int:
        """Drop every tool for which `keep` is False from every row (a row left without tools goes);
        returns how many rows changed. Tools removed from the catalog are forgotten this way."""
        with self._lock:
            changed, empty = 0, []
            for i in range(self._count):
                kept = tuple(t for t in self._tools[i] if keep(t))
                if kept != self._tools[i]:
                    changed += 1
                    self._tools[i] = kept
                    if not kept:
                        empty.append(i)
            if empty:
                self._remove(np.asarray(empty))
            if changed:
                self.version += 1
                self._trust = None
            return changed

    def clear(self) -> None:
        """Forget everything (what a new deployment knows)."""
        with self._lock:
            version = self.version
            self._clear()
            self.version = version + 1

    def rows(self) -> list[tuple[str, np.ndarray, tuple[str, ...], float]]:
        """Every row as (key, vector, tools, time), oldest first: what a file or table keeps."""
        with self._lock:
            order = np.argsort(self._times[: self._count], kind="stable")
            return [(self._keys[i], self._vector(i), self._tools[i], float(self._times[i])) for i in order]

    def _vector(self, row: int) -> np.ndarray:
        """A remembered request's vector (dequantized: within ~1e-3 of what was learned)."""
        return self._codes[row].astype(np.float32) * self._scales[row]

    def restore(self, rows: Iterable[tuple[str, np.ndarray, Sequence[str], float]]) -> int:
        """Learn rows saved by :meth:`rows` (a newer row of a known key wins); returns how many were taken."""
        return sum(self.learn(vector, tools, key, at) for key, vector, tools, at in rows)

    def _expired(self, when: float) -> bool:
        return self.max_age_days is not None and self._clock() - when > self.max_age_days * 86_400

    def _drop_expired(self) -> None:
        if self.max_age_days is None or not self._count:
            return
        old = np.flatnonzero(self._clock() - self._times[: self._count] > self.max_age_days * 86_400)
        if len(old):
            self._remove(old)

    def _remove(self, rows: np.ndarray) -> None:
        keeping = np.ones(self._count, dtype=bool)
        keeping[rows] = False
        keep = np.flatnonzero(keeping).tolist()
        self._codes[: len(keep)] = self._codes[keep]
        self._scales[: len(keep)] = self._scales[keep]
        self._times[: len(keep)] = self._times[keep]
        self._tools = [self._tools[i] for i in keep]
        self._keys = [self._keys[i] for i in keep]
        self._row_of = {k: i for i, k in enumerate(self._keys)}
        self._count = len(keep)
        self._trust = None

    # -- using ---------------------------------------------------------------------------------------

    def usage(self, vector: np.ndarray) -> dict[str, UsageEvidence]:
        """Each tool's usage score for a request with `vector` (tools no similar request called: absent)."""
        row = _unit_row(vector)
        with self._lock:
            if row is None or not self._count or row.shape[0] != self.dims:
                return {}
            return self._usage(self._similarities(quantize_one(row)), decay=True)

    def _similarities(self, query: tuple[np.ndarray, np.float32]) -> np.ndarray:
        """Cosine of every remembered request to the quantized `query` (int8 dot products, exact on every CPU)."""
        import simsimd

        codes, scale = query
        dots = np.asarray(simsimd.cdist(codes, self._codes[: self._count], metric="dot"), dtype=np.float32)[0]
        dots *= self._scales[: self._count]
        dots *= scale
        return dots

    def _decay(self, rows: np.ndarray) -> np.ndarray:
        """How much each of `rows` still weighs (halved every ``half_life_days`` of age)."""
        assert self.half_life_days is not None
        age_days = np.maximum(0.0, self._clock() - self._times[rows]) / 86_400
        return np.exp2(-age_days / self.half_life_days)

    def _usage(self, sims: np.ndarray, *, decay: bool = False, skip: int = -1) -> dict[str, UsageEvidence]:
        rule = self.rule
        near = np.flatnonzero(sims >= rule.gate)
        if skip >= 0:
            near = near[near != skip]
        if len(near) > rule.neighbours:
            near = near[np.argpartition(-sims[near], rule.neighbours - 1)[: rule.neighbours]]
        if not len(near):
            return {}
        weights = (sims[near] - rule.gate) / (1.0 - rule.gate) + 1e-6
        if decay and self.half_life_days is not None:
            weights = weights * self._decay(near)
        total = float(weights.sum()) + rule.prior
        support: dict[str, list[float]] = {}
        for i, w in zip(near.tolist(), weights.tolist(), strict=True):
            for name in self._tools[i]:
                entry = support.setdefault(name, [0.0, 0, -1.0])
                entry[0] += w
                entry[1] += 1
                entry[2] = max(entry[2], float(sims[i]))
        return {n: UsageEvidence(s / total, int(c), b) for n, (s, c, b) in support.items()}

    @property
    def trust(self) -> float:
        """How far this memory's predictions held on its own traffic (0: not at all, or no evidence yet)."""
        with self._lock:
            stale = self._added_since_trust >= max(1, self._count // 20)  # re-estimated every 5 % of growth
            if self._trust is None or stale:
                self._trust = self._estimate_trust()
                self._added_since_trust = 0
            return self._trust

    def _estimate_trust(self) -> float:
        """Leave one out over a sample of rows: the share of the usage mass on tools the row called."""
        if self._count < 2:
            return 0.0
        rng = np.random.default_rng(self._count)
        sample = rng.choice(self._count, size=min(TRUST_SAMPLE, self._count), replace=False)
        import simsimd

        codes, scales = self._codes[: self._count], self._scales[: self._count]
        sims = np.asarray(simsimd.cdist(codes[sample], codes, metric="dot"), dtype=np.float32)
        sims *= scales[sample][:, None] * scales[None, :]
        hit, mass = 0.0, TRUST_PRIOR_MASS
        for j, row_sims in zip(sample.tolist(), sims, strict=True):
            scores = self._usage(row_sims, skip=j)
            called = set(self._tools[j])
            hit += sum(e.score for n, e in scores.items() if n in called)
            mass += sum(e.score for e in scores.values())
        return hit / mass

    def reorder(
        self,
        names: Sequence[str],
        scores: Sequence[float],
        vector: np.ndarray | None,
        permitted: Callable[[str], bool] | None = None,
    ) -> Reordered:
        """The first stage's ranking (`names` best first, their `scores`) reordered by what was learned
        (see :func:`reorder_by_usage`)."""
        if vector is None or not self._count:
            return Reordered(list(names))
        strength = self.rule.weight * _scaled_trust(self.trust, self.rule.floor)
        if strength <= 0:
            return Reordered(list(names))
        return reorder_by_usage(names, scores, self.usage(vector), strength, self.rule, permitted)


def reorder_by_usage(
    names: Sequence[str],
    scores: Sequence[float],
    evidence: dict[str, UsageEvidence],
    strength: float,
    rule: UsageRule,
    permitted: Callable[[str], bool] | None = None,
) -> Reordered:
    """`names` (best first) reordered within the rule's ``depth`` by envelope score + strength × usage.

    A tool from below the depth (or without first-stage evidence: score 0) enters when its usage is at
    least the rule's ``enter`` and `permitted` allows it (the request's allowed, visible tools).
    """
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
    if not entering and not any(n in evidence for n in head):
        return Reordered(list(names))
    for name in sorted(entering, key=lambda n: (place.get(n, len(names)), n)):
        head.append(name)
        p = place.get(name)
        envelope.append(min(envelope[-1] if envelope else 1.0, max(0.0, float(scores[p]))) if p is not None else 0.0)

    def key(p: int) -> tuple[float, int]:
        usage = evidence[head[p]].score if head[p] in evidence else 0.0
        return -(envelope[p] + strength * usage), p

    keyed = sorted(range(len(head)), key=key)
    moved = {head[p]: evidence[head[p]] for new, p in enumerate(keyed) if new < p}
    entered = set(head)
    return Reordered([head[p] for p in keyed] + [n for n in names[rule.depth :] if n not in entered], moved)


def _scaled_trust(trust: float, floor: float) -> float:
    if trust <= floor:
        return 0.0
    return (trust - floor) / (1.0 - floor) if floor < 1.0 else 0.0


def _unit_row(vector: np.ndarray) -> np.ndarray | None:
    """`vector` as a float32 unit row, or None when it is empty, not 1-D or not finite."""
    row = np.asarray(vector, dtype=np.float32).reshape(-1) if np.ndim(vector) <= 2 else None
    if row is None or not row.size or not np.isfinite(row).all():
        return None
    norm = float(np.linalg.norm(row))
    return row / norm if norm > 0 else None


def _resized(vectors: np.ndarray, rows: int) -> np.ndarray:
    grown = np.zeros((rows, vectors.shape[1]), dtype=vectors.dtype)
    grown[: min(rows, vectors.shape[0])] = vectors[:rows]
    return grown
