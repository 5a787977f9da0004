"""What learning from use remembers of a request (a row, never its text), its bounds, and the rule
the rows are read by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

# What one row costs beyond its vector and its tool names' bytes: the fingerprint key, the conversation,
# the tool tuple, the bookkeeping.
ROW_OVERHEAD_BYTES = 160
MAX_TOOLS_PER_REQUEST = 12  # a turn of many calls (a bulk delete) says little about any one of them
MAX_CLOCK_SKEW_SECONDS = 300.0
"""A row dated later than now plus this (a replica whose clock runs ahead, a crafted file) is dated now."""
SHARED_SCOPE = ""
"""The scope of ``learning.scope: shared``: one memory for every request of the catalog."""


@dataclass(frozen=True)
class LearningRule:
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
    plain_similarity: float = 0.85
    plain_trust: float = 0.5
    """Plain evidence acts before trust has grown: a tool that near-copies of the request (cosine at least
    ``plain_similarity``) called in ``min_conversations`` conversations, with a usage score of at least
    ``enter``, moves with the strength of ``plain_trust`` when the memory's own trust is lower (0: off)."""


DEFAULT_RULE = LearningRule()


class MemoryRow(NamedTuple):
    """One remembered request as a file or table keeps it (never its text)."""

    key: str
    vector: np.ndarray
    tools: tuple[str, ...]
    at: float
    conversation: str
    """The conversation it came from (a fingerprint): one conversation counts once, whatever its turns."""
    scope: str = SHARED_SCOPE
    """Whose traffic it is (a fingerprint of the scope key; ``""``: shared by every request)."""


def unit_row(vector: np.ndarray) -> np.ndarray | None:
    """`vector` as a float32 unit row, or None when it is empty, not 1-D or not finite."""
    row = np.asarray(vector, dtype=np.float32).reshape(-1) if np.ndim(vector) <= 2 else None
    if row is None or not row.size or not np.isfinite(row).all():
        return None
    norm = float(np.linalg.norm(row))
    return row / norm if norm > 0 else None
