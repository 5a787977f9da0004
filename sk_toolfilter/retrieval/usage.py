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

import heapq
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from sk_toolfilter.retrieval.scoring import quantize_one

# What one row costs beyond its vector and its tool names' bytes: the fingerprint key, the conversation,
# the tool tuple, the bookkeeping.
ROW_OVERHEAD_BYTES = 160
MAX_TOOLS_PER_REQUEST = 12  # a turn of many calls (a bulk delete) says little about any one of them
TRUST_SAMPLE = 256  # remembered requests predicted from the others to estimate trust
TRUST_PRIOR_MASS = 2.0  # usage mass that counts as missed before any evidence: trust starts at 0
MAX_CLOCK_SKEW_SECONDS = 300.0
"""A row dated later than now plus this (a replica whose clock runs ahead, a crafted file) is dated now."""
SHARED_SCOPE = ""
"""The scope of ``learning.scope: shared``: one memory for every request of the catalog."""


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
    vector_weight: float = 1.0
    """Weight of each tool's *usage vector* (the mean direction of the past requests that called it, one
    vote per conversation; Tool2Vec's idea): a shortlisted tool gains weight × max(0, (cosine − floor) /
    (1 − floor)) (× trust with ``vector_trust``)."""
    vector_floor: float = 0.7
    vector_trust: bool = False
    vector_precision: bool = False
    """Weigh each tool's usage-vector term by its precision on the deployment's own traffic: of the past
    requests at or above the floor to its vector, the share that called it (a vector that fires on
    requests that called other tools says little; trust per tool instead of one number)."""
    min_conversations: int = 2
    """A tool moves or enters only on the evidence of this many distinct conversations (one is never
    enough), or on the request's own conversation's (a user's earlier turns steer that conversation only)."""


DEFAULT_RULE = UsageRule()


@dataclass(frozen=True)
class UsageEvidence:
    """Why a tool has a usage score: `requests` similar past conversations called it, the best at `best`
    (``kind="vector"``: the tool's usage vector, from `requests` conversations, is at cosine `best`)."""

    score: float
    requests: int
    best: float
    kind: str = "neighbours"
    own: bool = False
    """The request's own conversation called it (its own earlier requests steer it)."""

    def describe(self) -> str:
        if self.kind == "vector":
            plural = "conversation" if self.requests == 1 else "conversations"
            return f"the requests that called it in {self.requests} past {plural} resemble this one ({self.best:.2f})"
        plural = "request" if self.requests == 1 else "requests"
        return f"{self.requests} past {plural} like this one (best {self.best:.2f}) called it"


class UsageScores(dict[str, UsageEvidence]):
    """Usage scores by tool, and what was near but did not count: `near` similar past requests (rows at
    or above the gate) in `conversations` conversations, and the tools they called too few conversations
    (under ``min_conversations``) to count."""

    near: int = 0
    conversations: int = 0
    too_few: tuple[str, ...] = ()


@dataclass
class Reordered:
    """The shortlist after learning: names best first, the tools that moved up with their evidence, and
    (when nothing moved although similar past requests were found) why not."""

    names: list[str]
    moved: dict[str, UsageEvidence] = field(default_factory=dict)
    note: str | None = None
    entered: dict[str, str] = field(default_factory=dict)
    """Tools that entered from below the shortlist but overtook nothing: where they landed, and why."""


class LearnedRow(NamedTuple):
    """One remembered request as a file or table keeps it (never its text)."""

    key: str
    vector: np.ndarray
    tools: tuple[str, ...]
    at: float
    conversation: str
    """The conversation it came from (a fingerprint): one conversation counts once, whatever its turns."""
    scope: str = SHARED_SCOPE
    """Whose traffic it is (a fingerprint of the scope key; ``""``: shared by every request)."""


@dataclass(frozen=True)
class _Snapshot:
    """What the trust estimate and the usage vectors read, copied under the lock (they are computed off the
    request path)."""

    codes: np.ndarray
    scales: np.ndarray
    scopes: np.ndarray
    tools: list[tuple[str, ...]]
    conversations: list[str]


class UsageMemory:
    """Past requests (unit vectors) and the tools each called, bounded; thread-safe.

    `dims` is fixed by the first vector learned (or given); a vector of another size is refused
    (:meth:`learn` returns False), as is one that is not finite.

    Rows live in slots: a new row takes a free slot or, at capacity, the oldest row's (found with a
    heap), so a full memory learns in O(log n) and never copies its arrays. Trust is re-estimated in a
    background thread when 5 % of the rows are new; a request reads the last estimate.
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
        background_trust: bool = True,
    ) -> None:
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.max_age_days = max_age_days
        self.half_life_days = half_life_days
        self.rule = rule
        self._clock = clock
        self.background_trust = background_trust
        """False: a stale trust is re-estimated in the request that reads it (a replay: the same figures every run)."""
        self._lock = threading.Lock()
        self._trust_lock = threading.Lock()  # one estimate at a time
        self._estimating: threading.Thread | None = None
        self.clamped = 0
        """Rows dated in the future (beyond :data:`MAX_CLOCK_SKEW_SECONDS`) that were dated now instead."""
        self.forgotten_before = 0.0
        """The time of the last wipe this memory knows (``forget``): no row dated at or before it is taken."""
        self._clear()

    def _clear(self) -> None:
        self._empty_slots(0)
        self._count = 0
        self._name_bytes = 0
        self._row_of: dict[str, int] = {}
        self._stamp = 0
        self._scopes: dict[str, int] = {}
        self._trust: float | None = None  # over every scope (what `learned` and `learn` print)
        self._scope_trust: dict[int, float] = {}  # per scope id: what a request of that scope reads
        self._vectors: dict[int, _ToolVectors] = {}  # per scope id: each tool's usage vector (with the trust)
        self._added_since_trust = 0
        self._together = _TogetherCounts()
        self.version = 0
        """Grows with every change (the file and table write when it moved)."""

    def _empty_slots(self, dims: int) -> None:
        self._codes = np.zeros((0, dims), dtype=np.int8)  # int8 codes, one scale per row (retrieval.scoring)
        self._scales = np.zeros(0, dtype=np.float32)
        self._times = np.zeros(0, dtype=np.float64)
        self._stamps = np.zeros(0, dtype=np.int64)
        self._scope_ids = np.zeros(0, dtype=np.int32)  # -1: a free slot
        self._tools: list[tuple[str, ...]] = []
        self._keys: list[str] = []
        self._conversations: list[str] = []
        self._high = 0  # slots in use or freed (rows live in [0, _high))
        self._free: list[int] = []
        self._oldest: list[tuple[float, int, int]] = []  # heap of (time, stamp, slot); stale entries skipped
        self._oldest_in: dict[int, list[tuple[float, int, int]]] = {}  # the same, per scope id (eviction)
        self._scope_rows: Counter[int] = Counter()
        self._scope_names: Counter[int] = Counter()  # name bytes per scope id

    # -- size ----------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    @property
    def dims(self) -> int:
        return int(self._codes.shape[1])

    @property
    def nbytes(self) -> int:
        """What the remembered rows cost (vectors, names, bookkeeping); at most ``max_bytes`` after every learn."""
        return self._count * (self.dims + 4 + ROW_OVERHEAD_BYTES) + self._name_bytes

    def capacity(self, dims: int) -> int:
        """The most rows kept at `dims` dimensions: ``max_requests`` and ``max_bytes`` both hold (names
        cost more: fewer rows are kept)."""
        return max(1, min(self.max_requests, self.max_bytes // (dims + 4 + ROW_OVERHEAD_BYTES)))

    def scopes(self) -> dict[str, int]:
        """How many rows each scope holds (``""``: shared)."""
        with self._lock:
            ids = self._scope_ids[: self._high]
            names = {i: s for s, i in self._scopes.items()}
            found, counts = np.unique(ids[ids >= 0], return_counts=True)
            return {names[int(i)]: int(c) for i, c in zip(found, counts, strict=True)}

    # -- learning ------------------------------------------------------------------------------------

    def learn(
        self,
        vector: np.ndarray,
        tools: Sequence[str],
        key: str,
        at: float | None = None,
        *,
        conversation: str | None = None,
        scope: str = SHARED_SCOPE,
    ) -> bool:
        """Remember that the request `key` (a fingerprint, never text) with `vector` called `tools`, in
        `conversation` (default: its own) and `scope`.

        The same `key` again replaces its row (its newest tools, its newest time): a request repeated
        a thousand times weighs what it weighs once. A time later than now (plus a small skew) is
        dated now. Returns False when nothing was learned (no tools, a vector of the wrong size or not
        finite, a time older than ``max_age_days``, a row larger than ``max_bytes`` alone).
        """
        calls = tuple(dict.fromkeys(t for t in tools if t))[:MAX_TOOLS_PER_REQUEST]
        row = _unit_row(vector)
        if not calls or row is None:
            return False
        now = self._clock()
        when = now if at is None else float(at)
        if not math.isfinite(when) or self._expired(when, now):
            return False
        if when > now + MAX_CLOCK_SKEW_SECONDS:
            when = now
            self.clamped += 1
        if when <= self.forgotten_before:
            return False  # learned before a wipe: never comes back (from a file, a table or a replica)
        with self._lock:
            if self._count and row.shape[0] != self.dims:
                return False
            self._drop_expired(now)
            if not self._put(row, calls, key, when, conversation or key, scope):
                return False
            self.version += 1
        return True

    def _put(
        self, row: np.ndarray, calls: tuple[str, ...], key: str, when: float, conversation: str, scope: str
    ) -> bool:
        names = _name_bytes(calls)
        row_bytes = row.shape[0] + 4 + ROW_OVERHEAD_BYTES + names  # (the caller checked the dimensions)
        if row_bytes > self.max_bytes:
            return False  # a row larger than the whole memory: refused, the row it would replace kept
        existing = self._row_of.get(key)
        if existing is not None:
            if when < self._times[existing]:
                return False  # an older copy of a row already known
            self._free_slot(existing)
        sid = self._scopes.setdefault(scope, len(self._scopes))
        while self._count and (self._count >= self.max_requests or self.nbytes + row_bytes > self.max_bytes):
            over_bytes = self.nbytes + row_bytes > self.max_bytes
            self._free_slot(self._pop_oldest(self._evicted_scope(sid, row_bytes if over_bytes else None)))
        if self._count == 0 and self._codes.shape[1] != row.shape[0]:
            self._empty_slots(row.shape[0])
        slot = self._take_slot()
        codes, scale = quantize_one(row)
        self._codes[slot], self._scales[slot], self._times[slot] = codes[0], scale, when
        self._scope_ids[slot] = sid
        self._stamp += 1
        self._stamps[slot] = self._stamp
        self._tools[slot], self._keys[slot], self._conversations[slot] = calls, key, conversation
        self._together.add(sid, calls, conversation, +1)
        heapq.heappush(self._oldest, (when, self._stamp, slot))
        heapq.heappush(self._oldest_in.setdefault(sid, []), (when, self._stamp, slot))
        if len(self._oldest) > 2 * self._high + 64:  # replaced rows left stale entries: rebuild (amortized O(1))
            self._rebuild_heaps()
        self._row_of[key] = slot
        self._name_bytes += names
        self._scope_rows[sid] += 1
        self._scope_names[sid] += names
        self._count += 1
        self._added_since_trust += existing is None
        return True

    def _take_slot(self) -> int:
        if self._free:
            return self._free.pop()
        if self._high == self._codes.shape[0]:
            grown = max(16, min(self.capacity(self.dims), 2 * self._high))
            grown = max(grown, self._high + 1)
            self._codes = _resized(self._codes, grown)
            self._scales = np.resize(self._scales, grown)
            self._times = np.resize(self._times, grown)
            self._stamps = np.resize(self._stamps, grown)
            self._scope_ids = np.resize(self._scope_ids, grown)
            more = grown - len(self._tools)
            self._tools.extend([()] * more)
            self._keys.extend([""] * more)
            self._conversations.extend([""] * more)
        self._high += 1
        return self._high - 1

    def _evicted_scope(self, incoming: int, row_bytes: int | None) -> int:
        """The scope a full memory evicts from to take a row of scope `incoming`: the one holding the most
        rows (`row_bytes` given: the most bytes), the incoming row counted in its own — so a scope's rows
        go only to its own learning or to a scope that holds fewer; a tenant cannot evict another's rows
        by learning more than it holds (ties: the incoming row's own scope)."""
        per_row = self.dims + 4 + ROW_OVERHEAD_BYTES

        def held(sid: int) -> tuple[int, int]:
            rows = self._scope_rows[sid] + (sid == incoming)
            size = rows * per_row + self._scope_names[sid] + (row_bytes or 0) * (sid == incoming)
            return (size if row_bytes is not None else rows), sid == incoming

        return max((sid for sid, rows in self._scope_rows.items() if rows > 0), key=held)

    def _pop_oldest(self, sid: int) -> int:
        """The slot of the oldest live row of scope `sid` (ties: the first learned)."""
        heap = self._oldest_in[sid]
        while True:
            _, stamp, slot = heapq.heappop(heap)
            if self._scope_ids[slot] == sid and self._stamps[slot] == stamp:
                return slot

    def _rebuild_heaps(self) -> None:
        """The oldest-first heaps from the live rows alone (stale entries of replaced rows dropped)."""
        live = self._live_slots()
        self._oldest = [(float(self._times[s]), int(self._stamps[s]), s) for s in live]
        heapq.heapify(self._oldest)
        self._oldest_in = {}
        for entry in self._oldest:
            self._oldest_in.setdefault(int(self._scope_ids[entry[2]]), []).append(entry)
        for heap in self._oldest_in.values():
            heapq.heapify(heap)

    def _free_slot(self, slot: int) -> None:
        sid = int(self._scope_ids[slot])
        self._together.add(sid, self._tools[slot], self._conversations[slot], -1)
        del self._row_of[self._keys[slot]]
        self._name_bytes -= _name_bytes(self._tools[slot])
        self._scope_rows[sid] -= 1
        self._scope_names[sid] -= _name_bytes(self._tools[slot])
        self._scope_ids[slot], self._scales[slot], self._stamps[slot] = -1, 0.0, -1
        self._tools[slot], self._keys[slot], self._conversations[slot] = (), "", ""
        self._free.append(slot)
        self._count -= 1

    def _live_slots(self) -> list[int]:
        return np.flatnonzero(self._scope_ids[: self._high] >= 0).tolist()

    def keys(self) -> list[str]:
        """The fingerprints of the remembered requests."""
        with self._lock:
            return list(self._row_of)

    def knows(self, key: str, tools: Sequence[str]) -> bool:
        """Whether the request `key` is remembered with these `tools` already (nothing new to learn)."""
        with self._lock:
            row = self._row_of.get(key)
            return row is not None and self._tools[row] == tuple(dict.fromkeys(tools))[:MAX_TOOLS_PER_REQUEST]

    def forget_tools(self, keep: Callable[[str], bool]) -> int:
        """Drop every tool for which `keep` is False from every row (a row left without tools goes);
        returns how many rows changed. Tools removed from the catalog are forgotten this way."""
        with self._lock:
            changed = 0
            for i in self._live_slots():
                kept = tuple(t for t in self._tools[i] if keep(t))
                if kept != self._tools[i]:
                    changed += 1
                    self._name_bytes -= _name_bytes(self._tools[i]) - _name_bytes(kept)
                    sid, conversation = int(self._scope_ids[i]), self._conversations[i]
                    self._scope_names[sid] -= _name_bytes(self._tools[i]) - _name_bytes(kept)
                    self._together.add(sid, self._tools[i], conversation, -1)
                    self._together.add(sid, kept, conversation, +1)
                    self._tools[i] = kept
                    if not kept:
                        self._free_slot(i)
            if changed:
                self.version += 1
                self._trust = None
            return changed

    def forget_before(self, when: float) -> int:
        """Forget every row dated at or before `when` (a wipe made then), and take none such from now on;
        how many went."""
        with self._lock:
            if when <= self.forgotten_before:
                return 0
            self.forgotten_before = when
            gone = [i for i in self._live_slots() if self._times[i] <= when]
            for i in gone:
                self._free_slot(i)
            if gone:
                self.version += 1
            return len(gone)

    def clear(self) -> None:
        """Forget everything (what a new deployment knows)."""
        with self._lock:
            version = self.version
            self._clear()
            self.version = version + 1

    def rows(self) -> list[LearnedRow]:
        """Every row, oldest first: what a file or table keeps."""
        with self._lock:
            live = np.asarray(self._live_slots(), dtype=np.int64)
            order = live[np.argsort(self._times[live], kind="stable")] if len(live) else live
            names = {i: s for s, i in self._scopes.items()}
            return [
                LearnedRow(
                    self._keys[i],
                    self._vector(i),
                    self._tools[i],
                    float(self._times[i]),
                    self._conversations[i],
                    names[int(self._scope_ids[i])],
                )
                for i in order.tolist()
            ]

    def _vector(self, row: int) -> np.ndarray:
        """A remembered request's vector (dequantized: within ~1e-3 of what was learned)."""
        return self._codes[row].astype(np.float32) * self._scales[row]

    def restore(self, rows: Iterable[LearnedRow]) -> int:
        """Learn rows saved by :meth:`rows` (a newer row of a known key wins); returns how many were taken."""
        return sum(
            self.learn(row.vector, row.tools, row.key, row.at, conversation=row.conversation or None, scope=row.scope)
            for row in rows
        )

    def _expired(self, when: float, now: float) -> bool:
        return self.max_age_days is not None and now - when > self.max_age_days * 86_400

    def _drop_expired(self, now: float) -> None:
        """The oldest rows leave while they are past ``max_age_days`` (a heap pop each: no scan)."""
        if self.max_age_days is None:
            return
        while self._count:
            when, stamp, slot = self._oldest[0]
            if self._scope_ids[slot] < 0 or self._stamps[slot] != stamp:
                heapq.heappop(self._oldest)  # stale: the row was replaced or removed
            elif self._expired(when, now):
                heapq.heappop(self._oldest)
                self._free_slot(slot)
            else:
                return

    # -- using ---------------------------------------------------------------------------------------

    def usage(self, vector: np.ndarray, scope: str = SHARED_SCOPE, conversation: str | None = None) -> UsageScores:
        """Each tool's usage score for a request with `vector` in `scope` and `conversation` (tools no
        similar request of enough conversations, nor of its own, called: absent)."""
        row = _unit_row(vector)
        with self._lock:
            sid = self._scopes.get(scope)
            if row is None or not self._count or row.shape[0] != self.dims or sid is None:
                return UsageScores()
            sims = _similarities(quantize_one(row), self._codes[: self._high], self._scales[: self._high])
            if len(self._scopes) > 1:  # (a free slot has scale 0: under any gate, no mask needed for it)
                sims[self._scope_ids[: self._high] != sid] = -np.inf
            decay = None
            if self.half_life_days is not None:
                now, times, half_life = self._clock(), self._times, self.half_life_days

                def decay(rows: np.ndarray) -> np.ndarray:
                    return np.exp2(-np.maximum(0.0, now - times[rows]) / 86_400 / half_life)

            return usage_scores(sims, self._tools, self._conversations, self.rule, decay=decay, own=conversation)

    @property
    def trust(self) -> float:
        """How far this memory's predictions held on its own traffic (0: not at all, or no evidence yet);
        estimated now when stale (see :meth:`trust_now` for the request path's non-blocking read)."""
        if self._stale():
            self._estimate()
        return self._trust or 0.0

    def trust_now(self, scope: str = SHARED_SCOPE) -> float:
        """The last trust estimate of `scope` (each scope's own: one tenant's traffic never moves another's
        trust), without waiting: a stale one starts a re-estimate in the background."""
        if not self.background_trust:
            if self._stale():
                self._estimate()
            return self.trust_of(scope)
        if self._stale():
            with self._trust_lock:
                running = self._estimating is not None and self._estimating.is_alive()
                if not running:
                    self._estimating = threading.Thread(target=self._estimate, name="sk-toolfilter-trust", daemon=True)
                    self._estimating.start()
        return self.trust_of(scope)

    def trust_of(self, scope: str = SHARED_SCOPE) -> float:
        """The last trust estimate of `scope` (0 for a scope with no estimate yet)."""
        with self._lock:
            sid = self._scopes.get(scope)
            return self._scope_trust.get(sid, 0.0) if sid is not None else 0.0

    def settle(self) -> float:
        """Wait for a background estimate, then make trust current (tests, the CLI, start-up)."""
        with self._trust_lock:
            thread = self._estimating
        if thread is not None:
            thread.join()
        return self.trust

    def _stale(self) -> bool:
        with self._lock:
            return self._trust is None or self._added_since_trust >= max(1, self._count // 20)

    def _estimate(self) -> None:
        """Leave one conversation out over a sample of rows: the share of the usage mass that fell on
        tools the row called, predicted from the other conversations of its scope."""
        with self._lock:
            added, count = self._added_since_trust, self._count
            live = np.asarray(self._live_slots(), dtype=np.int64)
            snapshot = _Snapshot(
                self._codes[: self._high].copy(),
                self._scales[: self._high].copy(),
                self._scope_ids[: self._high].copy(),
                list(self._tools[: self._high]),
                list(self._conversations[: self._high]),
            )
        trust, per_scope = _estimate_trust(snapshot, live, self.rule)
        vectors = _tool_vectors(snapshot, live, self.rule) if self.rule.vector_weight > 0 else {}
        with self._lock:
            self._trust, self._scope_trust, self._vectors = trust, per_scope, vectors
            self._added_since_trust = max(0, self._added_since_trust - added) if count else 0

    def reorder(
        self,
        names: Sequence[str],
        scores: Sequence[float],
        vector: np.ndarray | None,
        permitted: Callable[[str], bool] | None = None,
        *,
        scope: str = SHARED_SCOPE,
        conversation: str | None = None,
        destructive: Callable[[str], bool] | None = None,
    ) -> Reordered:
        """The first stage's ranking (`names` best first, their `scores`) reordered by what was learned
        in `scope` (see :func:`reorder_by_usage`) for a request of `conversation`; reads the last trust
        estimate, never waits for one."""
        if vector is None or not self._count:
            return Reordered(list(names))
        rule, trust = self.rule, self.trust_now(scope)
        strength = rule.weight * _scaled_trust(trust, rule.floor)
        vector_strength = rule.vector_weight * (trust if rule.vector_trust else 1.0)
        evidence = self.usage(vector, scope, conversation)
        if destructive is not None:  # moved up or brought in only by its own conversation's requests
            for name in [n for n, e in evidence.items() if not e.own and destructive(n)]:
                del evidence[name]
        if strength <= 0 and vector_strength <= 0:
            return Reordered(list(names), note=self._quiet_note(evidence, trust))
        closeness = self.vector_evidence(vector, scope, names[: rule.depth]) if vector_strength > 0 else {}
        if destructive is not None:  # (a usage vector is every conversation's: never the request's own)
            closeness = {name: near for name, near in closeness.items() if not destructive(name)}
        reordered = reorder_by_usage(
            names,
            scores,
            evidence if strength > 0 else {},
            strength,
            rule,
            permitted,
            closeness,
            vector_strength,
        )
        if not reordered.moved and (strength <= 0 or (not evidence and evidence.too_few)):
            reordered.note = self._quiet_note(evidence, trust)
        return reordered

    def vector_evidence(self, vector: np.ndarray, scope: str, names: Sequence[str]) -> dict[str, UsageEvidence]:
        """For each of `names` with a usage vector in `scope`: how close the request is to it, as a score
        ``max(0, (cosine − floor) / (1 − floor))`` (tools at or under the floor: absent)."""
        with self._lock:
            sid = self._scopes.get(scope)
            table = self._vectors.get(sid) if sid is not None else None
        row = _unit_row(vector)
        if table is None or row is None or row.shape[0] != table.matrix.shape[1]:
            return {}
        wanted = [(name, table.position[name]) for name in names if name in table.position]
        if not wanted:
            return {}
        cosines = table.matrix[[p for _, p in wanted]] @ row
        floor, precise = self.rule.vector_floor, self.rule.vector_precision
        return {
            name: UsageEvidence(
                (c - floor) / (1.0 - floor) * (float(table.precision[p]) if precise else 1.0),
                int(table.conversations[p]),
                c,
                "vector",
            )
            for (name, p), c in zip(wanted, cosines.tolist(), strict=True)
            if c > floor
        }

    def _quiet_note(self, evidence: UsageScores, trust: float) -> str | None:
        """Why similar past requests moved nothing (None when none were found)."""
        if not evidence.near:
            return None
        similar = f"{evidence.near} similar past request{'s' if evidence.near != 1 else ''}"
        if not evidence:
            plural = "s" if evidence.conversations != 1 else ""
            return (
                f"not applied: {similar} (cosine >= {self.rule.gate:.1f}) in {evidence.conversations} "
                f"conversation{plural} called {', '.join(sorted(evidence.too_few)[:3])}; a tool moves on the "
                f"evidence of {self.rule.min_conversations} conversations"
            )
        return (
            f"not applied: trust {trust:.2f} over {self._count:,} requests ({similar} called "
            f"{', '.join(sorted(evidence)[:3])}); it rises when similar requests call the same tools"
        )

    def companions(
        self, anchors: Sequence[str], *, scope: str, conversation: str | None, min_share: float
    ) -> list[Companion]:
        """Tools called together with any of `anchors` by past requests of `scope` (co-usage, a signal of
        this one memory: its scope, bounds, eviction and forget), counted in conversations: a companion
        needs ``min_conversations`` conversations that called it with the anchor, or the request's own
        `conversation`, and at least `min_share` of the conversations that called the anchor. Best share
        first; each tool once, with its strongest anchor."""
        with self._lock:
            sid = self._scopes.get(scope)
            if sid is None:
                return []
            return self._together.companions(sid, anchors, conversation, min_share, self.rule.min_conversations)

    def knows_companions_of(self, anchor: str, *, scope: str, conversation: str | None) -> bool:
        """Whether past requests of `scope` that may steer this `conversation` called `anchor` (its
        companions, not its schema, then say what goes with it)."""
        with self._lock:
            sid = self._scopes.get(scope)
            if sid is None:
                return False
            return self._together.knows(sid, anchor, conversation, self.rule.min_conversations)

    def scoped(
        self, scope: str, conversation: str | None = None, destructive: Callable[[str], bool] | None = None
    ) -> ScopedUsage:
        """This memory as the requests of one scope (and conversation) read it."""
        return ScopedUsage(self, scope, conversation, destructive)


@dataclass(frozen=True)
class ScopedUsage:
    """One scope's view of a :class:`UsageMemory`: what a request of that scope reads."""

    memory: UsageMemory
    scope: str = SHARED_SCOPE
    conversation: str | None = None
    destructive: Callable[[str], bool] | None = None
    """Whether a tool is destructive: it never enters on other conversations' requests alone."""

    @property
    def rule(self) -> UsageRule:
        return self.memory.rule

    def __len__(self) -> int:
        return len(self.memory)

    def reorder(
        self,
        names: Sequence[str],
        scores: Sequence[float],
        vector: np.ndarray | None,
        permitted: Callable[[str], bool] | None = None,
    ) -> Reordered:
        return self.memory.reorder(
            names,
            scores,
            vector,
            permitted,
            scope=self.scope,
            conversation=self.conversation,
            destructive=self.destructive,
        )

    def companions(self, anchors: Sequence[str], *, min_share: float) -> list[Companion]:
        """:meth:`UsageMemory.companions` for this scope and conversation."""
        return self.memory.companions(anchors, scope=self.scope, conversation=self.conversation, min_share=min_share)

    def knows_companions_of(self, anchor: str) -> bool:
        """:meth:`UsageMemory.knows_companions_of` for this scope and conversation."""
        return self.memory.knows_companions_of(anchor, scope=self.scope, conversation=self.conversation)


@dataclass(frozen=True)
class Companion:
    """A tool called with `anchor` in `together` of the `anchor_conversations` conversations (of the
    scope) that called `anchor`; `own`: the request's own conversation did."""

    name: str
    anchor: str
    together: int
    anchor_conversations: int
    own: bool = False

    @property
    def share(self) -> float:
        return self.together / self.anchor_conversations


class _TogetherCounts:
    """Per scope: the conversations that called each tool, and each pair of tools in one request (rows
    of at most :data:`MAX_TOOLS_PER_REQUEST` tools), kept in step with the memory's rows (under its lock)."""

    def __init__(self) -> None:
        self._tool: dict[int, dict[str, Counter[str]]] = {}
        self._pair: dict[int, dict[str, dict[str, Counter[str]]]] = {}

    def add(self, sid: int, tools: Sequence[str], conversation: str, sign: int) -> None:
        if sid < 0 or not tools:
            return
        per_tool, per_pair = self._tool.setdefault(sid, {}), self._pair.setdefault(sid, {})
        for name in tools:
            _bump(per_tool.setdefault(name, Counter()), conversation, sign)
            partners = per_pair.setdefault(name, {})
            for other in tools:
                if other != name:
                    _bump(partners.setdefault(other, Counter()), conversation, sign)

    def knows(self, sid: int, anchor: str, conversation: str | None, min_conversations: int) -> bool:
        called = self._tool.get(sid, {}).get(anchor)
        if not called:
            return False
        return len(called) >= min_conversations or (conversation is not None and conversation in called)

    def companions(
        self, sid: int, anchors: Sequence[str], conversation: str | None, min_share: float, min_conversations: int
    ) -> list[Companion]:
        found: dict[str, Companion] = {}
        tools, pairs = self._tool.get(sid, {}), self._pair.get(sid, {})
        for anchor in anchors:
            with_anchor = tools.get(anchor)
            if not with_anchor:
                continue
            for name, together in pairs.get(anchor, {}).items():
                candidates = []
                if conversation is not None and conversation in together:  # its own earlier requests steer it
                    candidates.append(
                        Companion(name, anchor, together[conversation], with_anchor[conversation], own=True)
                    )
                if len(together) >= min_conversations:  # other conversations: never one alone
                    candidates.append(Companion(name, anchor, len(together), len(with_anchor)))
                for companion in candidates:
                    if companion.share >= min_share and (name not in found or companion.share > found[name].share):
                        found[name] = companion
        return sorted(found.values(), key=lambda c: (-c.share, -c.together, c.name))


def _bump(counter: Counter[str], key: str, sign: int) -> None:
    counter[key] += sign
    if counter[key] <= 0:
        del counter[key]


def _similarities(query: tuple[np.ndarray, np.float32], codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Cosine of every row of `codes` to the quantized `query` (int8 dot products, exact on every CPU)."""
    import simsimd

    q, scale = query
    dots = np.asarray(simsimd.cdist(q, codes, metric="dot"), dtype=np.float32)[0]
    dots *= scales
    dots *= scale
    return dots


def usage_scores(
    sims: np.ndarray,
    tools: Sequence[tuple[str, ...]],
    conversations: Sequence[str],
    rule: UsageRule,
    *,
    decay: Callable[[np.ndarray], np.ndarray] | None = None,
    skip: str | None = None,
    own: str | None = None,
) -> UsageScores:
    """Each tool's usage score from the rows' cosines `sims` to a request: the ``neighbours`` nearest
    conversations at or above the gate (one conversation weighs what its nearest row does, however many
    of its turns are near), a tool scored only when ``min_conversations`` of them called it, or the
    request's `own` conversation did. `skip`: a conversation left out (trust's leave-one-out)."""
    near = np.flatnonzero(sims >= rule.gate)
    if not len(near):
        return UsageScores()
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
        return UsageScores()
    total = sum(weight_of.values()) + rule.prior
    scores = UsageScores(
        (
            name,
            UsageEvidence(
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


@dataclass(frozen=True)
class _ToolVectors:
    """One scope's usage vectors: a unit row per tool called in ``min_conversations`` conversations."""

    matrix: np.ndarray
    position: dict[str, int]
    conversations: np.ndarray
    precision: np.ndarray
    """Per tool: of the sampled past requests at or above the floor to its vector, the share that called it."""


def _tool_vectors(snapshot: _Snapshot, live: np.ndarray, rule: UsageRule) -> dict[int, _ToolVectors]:
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
        tables[scope] = _ToolVectors(
            matrix,
            {n: p for p, n in enumerate(names)},
            counts[positions],
            _precision(snapshot, live[snapshot.scopes[live] == scope], matrix, names, rule.vector_floor),
        )
    return tables


def _precision(snapshot: _Snapshot, rows: np.ndarray, matrix: np.ndarray, names: list[str], floor: float) -> np.ndarray:
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


def _estimate_trust(snapshot: _Snapshot, live: np.ndarray, rule: UsageRule) -> tuple[float, dict[int, float]]:
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


def _predicted(snapshot: _Snapshot, sample: np.ndarray, rule: UsageRule) -> tuple[float, float]:
    """(usage mass on tools each sampled row called, all usage mass), each row predicted from the other
    conversations of its scope."""
    import simsimd

    codes, scales = snapshot.codes, snapshot.scales
    sims = np.asarray(simsimd.cdist(codes[sample], codes, metric="dot"), dtype=np.float32)
    sims *= scales[sample][:, None] * scales[None, :]
    hit, mass = 0.0, 0.0
    for j, row_sims in zip(sample.tolist(), sims, strict=True):
        row_sims[snapshot.scopes != snapshot.scopes[j]] = -np.inf  # predicted from its own scope only
        scores = usage_scores(row_sims, snapshot.tools, snapshot.conversations, rule, skip=snapshot.conversations[j])
        called = set(snapshot.tools[j])
        hit += sum(e.score for n, e in scores.items() if n in called)
        mass += sum(e.score for e in scores.values())
    return hit, mass


def reorder_by_usage(
    names: Sequence[str],
    scores: Sequence[float],
    evidence: dict[str, UsageEvidence],
    strength: float,
    rule: UsageRule,
    permitted: Callable[[str], bool] | None = None,
    closeness: dict[str, UsageEvidence] | None = None,
    vector_strength: float = 0.0,
) -> Reordered:
    """`names` (best first) reordered within the rule's ``depth`` by envelope score + strength × usage
    (+ vector_strength × the closeness of the request to the tool's usage vector).

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
        usage = evidence[head[p]].score if head[p] in evidence else 0.0
        near = closeness[head[p]].score if head[p] in closeness else 0.0
        return -(envelope[p] + strength * usage + vector_strength * near), p

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


def _name_bytes(tools: Iterable[str]) -> int:
    return sum(len(n.encode()) for n in tools)


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
