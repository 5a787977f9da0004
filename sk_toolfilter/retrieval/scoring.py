"""The catalog's vectors as semantic search reads them: float32, or int8 codes with one scale per tool.

Scoring a query is one dot product per tool. Both kernels are single-threaded and never touch the
BLAS thread pool (whose wake-up cost a busy process 6–8 ms per query):

- ``float32`` — ``np.vecdot``; 1,536 bytes per 384-dimension tool; exact.
- ``int8`` — each unit vector scaled so its largest component is ±127 and rounded, the scale kept
  (4 bytes); the query likewise; scores are the codes' dot products times both scales. 392 bytes
  per tool (with the kernel's 4-byte row shift, below), and 3–4× faster where memory bandwidth is
  the limit (100,000 tools). Scores move by ~1e-3, which changed recall@5 on no dev set (README,
  Benchmarks).

The int8 dot products are exact integers, computed by SimSIMD's unsigned-byte kernel on the codes
shifted by 128 (:class:`ShiftedCodes`), the shift taken back out: the same scores bit for bit as its
signed kernel gave, in half the kernel time on AVX2 while the codes are in cache (~10 % less per scan
read from memory, as a request's is).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Precision = Literal["float32", "int8"]


class CatalogVectors:
    """One unit vector per tool, stored at `precision`; :meth:`scores` gives cosine similarities."""

    def __init__(self, vectors: np.ndarray, precision: Precision = "float32") -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.precision: Precision = precision
        self.shape: tuple[int, int] = (int(vectors.shape[0]), int(vectors.shape[1]))
        if precision == "int8":
            codes, self._scale = quantize_rows(vectors)
            self._codes = ShiftedCodes(codes)
            self._vectors: np.ndarray | None = None
        else:
            self._vectors = vectors

    @property
    def nbytes(self) -> int:
        """Memory held for the vectors."""
        if self._vectors is not None:
            return int(self._vectors.nbytes)
        return int(self._codes.nbytes + self._scale.nbytes)

    def float32(self) -> np.ndarray:
        """The vectors as float32 rows (a dequantized copy for int8: codes × scale)."""
        if self._vectors is not None:
            return self._vectors
        return self._codes.rows(slice(None)).astype(np.float32) * self._scale[:, None]

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """The float32 vectors of a few tools (dequantized for int8), without touching the others."""
        if self._vectors is not None:
            return self._vectors[positions]
        return self._codes.rows(positions).astype(np.float32) * self._scale[positions, None]

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Cosine similarity of every tool to the unit vector `query` (float32)."""
        if self._vectors is not None:
            return np.vecdot(self._vectors, query.astype(np.float32, copy=False))
        codes, scale = quantize_one(np.asarray(query, dtype=np.float32))
        dots = self._codes.dots(codes)[0]
        dots *= self._scale  # in place: no catalog-sized temporary
        dots *= scale
        return dots

    def scores_many(self, queries: np.ndarray) -> np.ndarray:
        """:meth:`scores` of each row of `queries` (the same floats), as a (rows, tools) array: at int8 the
        catalog is read once for all of them (a request's texts, an agent loop's listed actions)."""
        queries = np.asarray(queries, dtype=np.float32)
        if self._vectors is not None:
            return np.stack([self.scores(query) for query in queries])
        # Row by row, the first last: its codes stay kept for the small-talk check (see quantize_one).
        quantized = [quantize_one(query) for query in queries[::-1]][::-1]
        dots = self._codes.dots(np.vstack([codes for codes, _ in quantized]))
        dots *= self._scale
        dots *= np.array([scale for _, scale in quantized], dtype=np.float32)[:, None]
        return dots


class ShiftedCodes:
    """int8 codes kept as unsigned bytes (code + 128) with each row's share of the shift, so that one
    query's integer dot products come from SimSIMD's unsigned kernel (on AVX2 twice as fast as its
    signed one): ``(c + 128)·(q + 128) = c·q + 128·Σc + 128·Σq + 128²·dims``, every term an exact integer."""

    def __init__(self, codes: np.ndarray) -> None:
        self._shifted = codes.view(np.uint8) ^ np.uint8(0x80)  # two's complement + 128: the top bit flipped
        self._dims = codes.shape[1]
        # 128·Σc, exact in float32: |Σc| ≤ 127 × dims < 2²⁴ (up to 132,000 dimensions), times a power of 2.
        self._row_shift = (SHIFT * np.add.reduce(codes, axis=1, dtype=np.int64)).astype(np.float32)

    @property
    def nbytes(self) -> int:
        """Memory held for the codes and their row shifts (4 bytes a row)."""
        return int(self._shifted.nbytes + self._row_shift.nbytes)

    def rows(self, positions: np.ndarray | slice) -> np.ndarray:
        """The int8 codes of some rows."""
        return (self._shifted[positions] ^ np.uint8(0x80)).view(np.int8)

    def dots(self, queries: np.ndarray) -> np.ndarray:
        """The integer dot product of every row with each of the (k, dims) int8 `queries`, as a (k, rows)
        float32 array (rounded past 2²⁴ as any float32 is): the shifts are taken out in float64, where
        every term is exact."""
        import simsimd

        shifted = queries.view(np.uint8) ^ np.uint8(0x80)
        # float64 out: the shifted products reach 255² × dims, past float32's exact integers.
        total = np.asarray(simsimd.cdist(shifted, self._shifted, metric="dot", out_dtype="float64"))
        total -= self._row_shift
        query_shift = SHIFT * np.add.reduce(queries, axis=1, dtype=np.int64) + SHIFT * SHIFT * self._dims
        return np.subtract(total, query_shift[:, None].astype(np.float64), out=np.empty(total.shape, np.float32))


SHIFT = 128


def quantize_rows(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 codes with each row's largest component at ±127, and each row's scale (float32)."""
    peak = np.maximum(vectors.max(axis=1), -vectors.min(axis=1))
    scale = np.where(peak > 0, peak / CODE_MAX, 1.0).astype(np.float32)
    codes = np.empty(vectors.shape, dtype=np.int8)
    for start in range(0, len(vectors), QUANTIZE_ROWS):  # in blocks: no catalog-sized temporaries
        block = vectors[start : start + QUANTIZE_ROWS] / scale[start : start + QUANTIZE_ROWS, None]
        codes[start : start + QUANTIZE_ROWS] = _rounded(block)
    return codes, scale


def quantize_one(vector: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """:func:`quantize_rows` of one query vector (the same codes and scale) in a few small operations:
    its blocks and temporaries cost more than the work for a single row. The last vector's codes are
    kept (read-only): a request's vector is scored against the catalog, then the small-talk exemplars."""
    global _last_quantized
    key = vector.tobytes()
    last = _last_quantized
    if last is not None and last[0] == key:
        return last[1], last[2]
    peak = np.abs(vector).max()
    scale = peak / np.float32(CODE_MAX) if peak > 0 else np.float32(1.0)
    codes = _rounded(vector / scale).astype(np.int8)[None, :]
    codes.flags.writeable = False
    _last_quantized = (key, codes, scale)
    return codes, scale


_last_quantized: tuple[bytes, np.ndarray, np.float32] | None = None


def _rounded(scaled: np.ndarray) -> np.ndarray:
    """Scaled components (float32, changed in place) rounded and clipped to the codes' range."""
    np.rint(scaled, out=scaled)
    np.minimum(scaled, CODE_MAX, out=scaled)  # np.clip's checks cost more than a query's whole row
    np.maximum(scaled, -CODE_MAX, out=scaled)
    return scaled


CODE_MAX = 127  # a row's largest component, as an int8 code
QUANTIZE_ROWS = 4096
