"""Learning from use's memory as a request reads it: each tool's evidence, trust, the reordering,
companions; one scope's view (:class:`ScopedMemory`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sk_toolfilter.retrieval.memory.companions import Companion
from sk_toolfilter.retrieval.memory.evidence import PastEvidence, PastEvidenceScores, past_evidence_scores, similarities
from sk_toolfilter.retrieval.memory.reorder import Reordered, reorder_by_past_calls
from sk_toolfilter.retrieval.memory.rows import RememberedRows
from sk_toolfilter.retrieval.memory.rule import SHARED_SCOPE, LearningRule, unit_row
from sk_toolfilter.retrieval.memory.trust import RowsSnapshot, estimate_trust, scaled_trust, tool_vectors
from sk_toolfilter.retrieval.scoring import quantize_one


class LearningMemory(RememberedRows):
    """Past requests (unit vectors) and the tools each called, bounded (:class:`RememberedRows`); thread-safe.
    A request reads each tool's evidence (:meth:`evidence`), the trust of its scope, the reordering
    (:meth:`reorder`) and the companions of its best tools. Trust is re-estimated in a background
    thread when 5 % of the rows are new; a request reads the last estimate."""

    def evidence(
        self, vector: np.ndarray, scope: str = SHARED_SCOPE, conversation: str | None = None
    ) -> PastEvidenceScores:
        """Each tool's usage score for a request with `vector` in `scope` and `conversation` (tools no
        similar request of enough conversations, nor of its own, called: absent)."""
        row = unit_row(vector)
        with self._lock:
            sid = self._scopes.get(scope)
            if row is None or not self._count or row.shape[0] != self.dims or sid is None:
                return PastEvidenceScores()
            sims = similarities(quantize_one(row), self._codes[: self._high], self._scales[: self._high])
            if len(self._scopes) > 1:  # (a free slot has scale 0: under any gate, no mask needed for it)
                sims[self._scope_ids[: self._high] != sid] = -np.inf
            decay = None
            if self.half_life_days is not None:
                now, times, half_life = self._clock(), self._times, self.half_life_days

                def decay(rows: np.ndarray) -> np.ndarray:
                    return np.exp2(-np.maximum(0.0, now - times[rows]) / 86_400 / half_life)

            return past_evidence_scores(
                sims, self._tools, self._conversations, self.rule, decay=decay, own=conversation
            )

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
        self.wait_for_estimate()
        return self.trust

    def wait_for_estimate(self) -> None:
        """Wait for a background trust estimate in progress, if any (closing: no thread left running)."""
        with self._trust_lock:
            thread = self._estimating
        if thread is not None:
            thread.join()

    def _stale(self) -> bool:
        with self._lock:
            return self._trust is None or self._added_since_trust >= max(1, self._count // 20)

    def _estimate(self) -> None:
        """Leave one conversation out over a sample of rows: the share of the usage mass that fell on
        tools the row called, predicted from the other conversations of its scope."""
        with self._lock:
            added, count = self._added_since_trust, self._count
            live = np.asarray(self._live_slots(), dtype=np.int64)
            snapshot = RowsSnapshot(
                self._codes[: self._high].copy(),
                self._scales[: self._high].copy(),
                self._scope_ids[: self._high].copy(),
                list(self._tools[: self._high]),
                list(self._conversations[: self._high]),
            )
        trust, per_scope = estimate_trust(snapshot, live, self.rule)
        vectors = tool_vectors(snapshot, live, self.rule) if self.rule.vector_weight > 0 else {}
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
        in `scope` (see :func:`reorder_by_past_calls`) for a request of `conversation`; reads the last trust
        estimate, never waits for one."""
        if vector is None or not self._count:
            return Reordered(list(names))
        rule, trust = self.rule, self.trust_now(scope)
        strength = rule.weight * scaled_trust(trust, rule.floor)
        vector_strength = rule.vector_weight * (trust if rule.vector_trust else 1.0)
        evidence = self.evidence(vector, scope, conversation)
        if destructive is not None:  # moved up or brought in only by its own conversation's requests
            for name in [n for n, e in evidence.items() if not e.own and destructive(n)]:
                del evidence[name]
        plain = {name: e for name, e in evidence.items() if e.is_plain(rule)}  # acts before trust has grown
        plain_strength = rule.weight * rule.plain_trust if plain else 0.0
        if strength <= 0 and vector_strength <= 0 and not plain:
            return Reordered(list(names), note=self._quiet_note(evidence, trust))
        closeness = self.vector_evidence(vector, scope, names[: rule.depth]) if vector_strength > 0 else {}
        if destructive is not None:  # (a usage vector is every conversation's: never the request's own)
            closeness = {name: near for name, near in closeness.items() if not destructive(name)}
        reordered = reorder_by_past_calls(
            names,
            scores,
            evidence if strength > 0 else plain,
            strength,
            rule,
            permitted,
            closeness,
            vector_strength,
            plain_strength,
        )
        if not reordered.moved and (strength <= 0 or (not evidence and evidence.too_few)):
            reordered.note = self._quiet_note(evidence, trust)
        return reordered

    def vector_evidence(self, vector: np.ndarray, scope: str, names: Sequence[str]) -> dict[str, PastEvidence]:
        """For each of `names` with a usage vector in `scope`: how close the request is to it, as a score
        ``max(0, (cosine − floor) / (1 − floor))`` (tools at or under the floor: absent)."""
        with self._lock:
            sid = self._scopes.get(scope)
            table = self._vectors.get(sid) if sid is not None else None
        row = unit_row(vector)
        if table is None or row is None or row.shape[0] != table.matrix.shape[1]:
            return {}
        wanted = [(name, table.position[name]) for name in names if name in table.position]
        if not wanted:
            return {}
        cosines = table.matrix[[p for _, p in wanted]] @ row
        floor, precise = self.rule.vector_floor, self.rule.vector_precision
        return {
            name: PastEvidence(
                (c - floor) / (1.0 - floor) * (float(table.precision[p]) if precise else 1.0),
                int(table.conversations[p]),
                c,
                "vector",
            )
            for (name, p), c in zip(wanted, cosines.tolist(), strict=True)
            if c > floor
        }

    def _quiet_note(self, evidence: PastEvidenceScores, trust: float) -> str | None:
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
    ) -> ScopedMemory:
        """This memory as the requests of one scope (and conversation) read it."""
        return ScopedMemory(self, scope, conversation, destructive)


@dataclass(frozen=True)
class ScopedMemory:
    """One scope's view of a :class:`LearningMemory`: what a request of that scope reads."""

    memory: LearningMemory
    scope: str = SHARED_SCOPE
    conversation: str | None = None
    destructive: Callable[[str], bool] | None = None
    """Whether a tool is destructive: it never enters on other conversations' requests alone."""

    @property
    def rule(self) -> LearningRule:
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
        """:meth:`LearningMemory.companions` for this scope and conversation."""
        return self.memory.companions(anchors, scope=self.scope, conversation=self.conversation, min_share=min_share)

    def knows_companions_of(self, anchor: str) -> bool:
        """:meth:`LearningMemory.knows_companions_of` for this scope and conversation."""
        return self.memory.knows_companions_of(anchor, scope=self.scope, conversation=self.conversation)
