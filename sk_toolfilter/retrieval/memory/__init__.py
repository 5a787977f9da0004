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

from sk_toolfilter.retrieval.memory.companions import Companion
from sk_toolfilter.retrieval.memory.evidence import PastEvidence, PastEvidenceScores, past_evidence_scores
from sk_toolfilter.retrieval.memory.memory import LearningMemory, ScopedMemory
from sk_toolfilter.retrieval.memory.reorder import Reordered, reorder_by_past_calls
from sk_toolfilter.retrieval.memory.rule import (
    DEFAULT_RULE,
    MAX_CLOCK_SKEW_SECONDS,
    MAX_TOOLS_PER_REQUEST,
    SHARED_SCOPE,
    LearningRule,
    MemoryRow,
)

__all__ = [
    "DEFAULT_RULE",
    "MAX_CLOCK_SKEW_SECONDS",
    "MAX_TOOLS_PER_REQUEST",
    "SHARED_SCOPE",
    "Companion",
    "LearningMemory",
    "LearningRule",
    "MemoryRow",
    "PastEvidence",
    "PastEvidenceScores",
    "Reordered",
    "ScopedMemory",
    "past_evidence_scores",
    "reorder_by_past_calls",
]
