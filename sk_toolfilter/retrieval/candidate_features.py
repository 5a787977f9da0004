"""What the first stage already knows about each shortlisted tool, as numbers a learned ranker reads.

Everything comes from the request's own pass (its scores per method and per intent) and from the
catalog (tool vectors, names, plugins) — no new model call. One row per candidate, best first:

- the fused score, its gap to the best, its z-score within the shortlist, the candidate's position;
- its cosine and BM25 score, with their ranks and the cosine's z-score within the shortlist;
- per intent part of the request: its best part score, whether it is some part's best and by what
  margin over that part's runner-up, in how many parts it is among the top 3;
- redundancy: the highest cosine between its tool vector and a better-ranked candidate's;
- the share of its name's words the request contains;
- its plugin (MCP server) against the best candidate's and the top 3's, and how many candidates share it;
- its description length and the catalog's size.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sk_toolfilter.retrieval.metadata import ToolMetadata

FEATURES = (
    "fused",
    "fused_gap",
    "fused_z",
    "log_position",
    "cosine",
    "cosine_z",
    "log_cosine_rank",
    "bm25_share",
    "log_bm25_rank",
    "parts",
    "best_part_score",
    "best_of_a_part",
    "part_margin",
    "part_top3_share",
    "redundancy",
    "name_overlap",
    "plugin_of_best",
    "plugin_share",
    "plugin_in_top3",
    "log_description",
    "log_catalog",
)

_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@dataclass(frozen=True)
class FirstStagePass:
    """One request's first-stage pass: the shortlist (catalog positions, best first) and the scores the
    pass computed over the catalog (fused per text: the whole request, then each intent part)."""

    query: str
    shortlist: Sequence[int]
    fused: np.ndarray
    part_scores: Sequence[np.ndarray]
    cosine: np.ndarray | None
    bm25: np.ndarray | None


def words(text: str) -> set[str]:
    """The lower-case words of a text or a tool name (``getUserToken``, ``get_user-token``: get, user, token)."""
    return set(_WORD.findall(_CAMEL.sub(" ", text).lower()))


def _z(values: np.ndarray) -> np.ndarray:
    sd = float(values.std())
    return (values - values.mean()) / sd if sd > 1e-9 else np.zeros_like(values)


def _ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(-values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values))
    return np.log1p(ranks)


def candidate_features(
    view: FirstStagePass, vectors: np.ndarray | None, tools: Sequence[ToolMetadata], catalog_size: int
) -> np.ndarray:
    """One row of :data:`FEATURES` per shortlisted tool (float64), best first. `vectors`: the shortlisted
    tools' vectors (row per candidate); `tools`: the catalog's tools by position."""
    short = np.asarray(view.shortlist, dtype=np.int64)
    n = len(short)
    rows = np.zeros((n, len(FEATURES)))
    if not n:
        return rows
    fused = view.fused[short].astype(np.float64)
    rows[:, 0], rows[:, 1], rows[:, 2] = fused, fused[0] - fused, _z(fused)
    rows[:, 3] = np.log1p(np.arange(n))
    if view.cosine is not None:
        cosine = view.cosine[short].astype(np.float64)
        rows[:, 4], rows[:, 5], rows[:, 6] = cosine, _z(cosine), _ranks(cosine)
    if view.bm25 is not None:
        bm25 = view.bm25[short].astype(np.float64)
        top = float(view.bm25.max())
        rows[:, 7] = bm25 / top if top > 0 else 0.0
        rows[:, 8] = _ranks(bm25)
    rows[:, 9:14] = _part_features(view.part_scores, short)
    rows[:, 14] = _redundancy(vectors)
    query_words = words(view.query)
    shortlisted = [tools[p] for p in short.tolist()]
    for i, tool in enumerate(shortlisted):
        own = words(tool.full_name.split("-", 1)[-1])
        rows[i, 15] = len(own & query_words) / len(own) if own else 0.0
        rows[i, 19] = math.log1p(len(tool.description))
    rows[:, 16:19] = _plugin_features([tool.plugin for tool in shortlisted])
    rows[:, 20] = math.log1p(catalog_size)
    return rows


def _part_features(part_scores: Sequence[np.ndarray], short: np.ndarray) -> np.ndarray:
    """Per candidate: number of parts, best part score, best of a part, margin, top-3 share.

    The margin is, over the parts, the best of the candidate's score minus the best *other* candidate's
    score in that part: positive for a part's best (its lead), negative otherwise (how far behind)."""
    out = np.zeros((len(short), 5))
    if not part_scores or len(short) < 2:
        return out
    scores = np.stack([s[short] for s in part_scores]).astype(np.float64)  # parts × candidates
    order = np.argsort(-scores, axis=1, kind="stable")
    first, second = order[:, 0], order[:, 1]
    rows = np.arange(len(scores))
    best_other = np.repeat(scores[rows, first][:, None], len(short), axis=1)
    best_other[rows, first] = scores[rows, second]  # for a part's best, the runner-up is the best other
    out[:, 0] = len(part_scores)
    out[:, 1] = scores.max(axis=0)
    out[:, 2] = np.isin(np.arange(len(short)), first).astype(np.float64)
    out[:, 3] = (scores - best_other).max(axis=0)
    top3 = np.zeros(len(short))
    np.add.at(top3, order[:, :3].ravel(), 1.0)
    out[:, 4] = top3 / len(part_scores)
    return out


def _redundancy(vectors: np.ndarray | None) -> np.ndarray:
    """The highest cosine between each candidate's tool vector and a better-ranked candidate's."""
    if vectors is None or len(vectors) < 2:
        return np.zeros(0 if vectors is None else len(vectors))
    out = np.zeros(len(vectors))
    sims = vectors.astype(np.float32) @ vectors.astype(np.float32).T
    for i in range(1, len(vectors)):
        out[i] = float(sims[i, :i].max())
    return out


def _plugin_features(plugins: list[str]) -> np.ndarray:
    """Per candidate: same plugin as the best, share of the shortlist in its plugin, plugin in the top 3."""
    counts = Counter(plugins)
    top3 = set(plugins[:3])
    return np.array([[float(p == plugins[0]), counts[p] / len(plugins), float(p in top3)] for p in plugins])


class LinearRanker:
    """A learned second stage: standardized features times weights (trained by ``training.learned_ranker``)."""

    def __init__(self, weights: np.ndarray, mean: np.ndarray, scale: np.ndarray, shortlist: int) -> None:
        if weights.shape != (len(FEATURES),) or mean.shape != weights.shape or scale.shape != weights.shape:
            raise ValueError(f"a linear ranker needs {len(FEATURES)} weights, means and scales")
        if not (np.isfinite(weights).all() and np.isfinite(mean).all() and (scale > 0).all()):
            raise ValueError("a linear ranker's weights, means and scales must be finite (scales positive)")
        self.weights, self.mean, self.scale, self.shortlist = weights, mean, scale, shortlist

    def scores(self, rows: np.ndarray) -> np.ndarray:
        return ((rows - self.mean) / self.scale) @ self.weights

    def to_json(self) -> dict[str, object]:
        return {
            "kind": "linear",
            "features": list(FEATURES),
            "weights": self.weights.tolist(),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "shortlist": self.shortlist,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> LinearRanker:
        if data.get("kind") != "linear" or data.get("features") != list(FEATURES):
            raise ValueError("not a linear ranker over this version's features")
        arrays = [np.asarray(data[k], dtype=np.float64) for k in ("weights", "mean", "scale")]
        shortlist = data.get("shortlist")
        if not isinstance(shortlist, int) or shortlist < 2:
            raise ValueError("a linear ranker's shortlist must be a whole number of at least 2")
        return cls(arrays[0], arrays[1], arrays[2], shortlist)


LEARNED_RANKER_ID = "learned-ranker-v1"
"""The shipped learned ranker: ``models/learned-ranker-v1/ranker.json`` (its MODEL_CARD.md beside it)."""
_LOADED: dict[str, LinearRanker] = {}


def load_learned_ranker(name: str | None) -> LinearRanker:
    """The learned ranker ``rerank.model`` names: the shipped id (default) or a ranker file written by
    ``training.learned_ranker``. ConfigError naming the file for a missing or damaged one."""
    from sk_toolfilter.basics.errors import ConfigError
    from sk_toolfilter.basics.input_files import read_bounded_text
    from sk_toolfilter.retrieval.local_models import MODELS_DIR

    key = (name or LEARNED_RANKER_ID).strip()
    if key not in _LOADED:
        shipped = MODELS_DIR / key / "ranker.json"
        path = shipped if "/" not in key and "\\" not in key and shipped.is_file() else Path(key).expanduser()
        try:
            text = read_bounded_text(path, "the learned ranker (tool_filtering.rerank.model)")
            _LOADED[key] = LinearRanker.from_json(json.loads(text))
        except FileNotFoundError:
            raise ConfigError(
                f"tool_filtering.rerank.model: {key!r} is neither the shipped learned ranker ({LEARNED_RANKER_ID}) "
                "nor a ranker file (python -m training.learned_ranker folds --export FILE writes one)"
            ) from None
        except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            raise ConfigError(f"tool_filtering.rerank.model: {path} is not a learned ranker ({exc})") from None
    return _LOADED[key]
