"""Whether vectors computed on one machine may be used on another: a probe of this CPU's arithmetic.

onnxruntime's int8 kernels differ by instruction set: multiplying u8 × s8 saturates without VNNI and is
exact with it, and the tool-trained encoders felt it (the same request's vector moved by up to 0.057
cosine between two x86 CPUs; the general model under 1e-4). The shipped networks now multiply u8 × u8,
exact everywhere (``training/exact_int8.py``; ``tests/test_numerics.py`` runs them under an emulated
AVX2 CPU), so they give every x86 CPU the same vectors. What is computed on one machine and used on
another — the shipped small-talk exemplar vectors, a shared index filled by one replica and queried by
another — is still checked where it is used, for any model and any CPU: a few :data:`PROBE_TEXTS` are
embedded here and compared with the same texts' stored vectors (:func:`agrees`). Stored vectors that
disagree are never used; they are computed where they are used instead (the exemplars in the
background, a shared catalog by the replica itself).
"""

from __future__ import annotations

import numpy as np

PROBE_TEXTS: tuple[str, ...] = (
    "many thanks", "fair enough", "thank you so very much", "no way!", "that appears true", "i appreciate that",
    "that’s incorrect", "maybe", "thanks for that", "what time is it in fredericksburg, tx", "that is a yes",
    "yes, that is it", "yeah, that's right", "maybe one, maybe the other", "possibly",
    "are you influenced by someone else",
)  # fmt: skip
"""The requests whose vectors moved most between two CPUs' int8 arithmetic (the 8 worst of each
tool-trained encoder before the networks were made exact: AVX-512 VNNI against AVX2); all of them are
small-talk exemplars, so a shipped exemplar file carries its own probe."""

AGREEMENT = 0.995
"""The worst probe cosine at which stored vectors count as this CPU's: the same arithmetic gives above
0.9999 (the stored int8 codes included); two CPUs of different arithmetic gave 0.943 (tool model, 6
layers) and 0.974 (2 layers) at their worst probe text."""


def worst_agreement(stored: np.ndarray, fresh: np.ndarray) -> float:
    """The lowest cosine between matching rows of two sets of unit vectors (-1.0 when shapes differ)."""
    if stored.shape != fresh.shape or stored.size == 0:
        return -1.0
    return float(np.min(np.sum(stored * fresh, axis=1)))


def agrees(stored: np.ndarray, fresh: np.ndarray, bound: float = AGREEMENT) -> bool:
    """Whether `stored` vectors are what this CPU computes for the same texts (`fresh`), within `bound`."""
    return worst_agreement(stored, fresh) >= bound
