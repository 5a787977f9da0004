"""The second stage: a cross-encoder reads the request and each shortlisted tool together.

The first stage (BM25 + a bi-encoder) *finds* the tools a request needs — its top 20 holds them for
most requests — but ranks each tool from two independent vectors. A cross-encoder attends across
request and tool text at once, so it can *order* the shortlist. It only reorders: it never adds a
tool outside the shortlist, and how many tools are sent stays the first stage's decision.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sk_toolfilter.basics.errors import ConfigError, RerankError
from sk_toolfilter.basics.redaction import library_logger, warn_once
from sk_toolfilter.config import RerankConfig
from sk_toolfilter.retrieval.candidate_features import load_learned_ranker
from sk_toolfilter.retrieval.gloss import with_english_gloss
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.local_models import MODELS_DIR, LocalModel, read_manifest, shipped_models

logger = library_logger(__name__)

RERANK_MAX_TOKENS = 64
"""Tokens of one (request, tool) pair; the longer side is cut first."""

RERANKER_MODEL_ID = "minilm-l2-rerank-v1"
"""The last cross-encoder trained here (``training/experiments/train_reranker.py``). Leave one catalog out
it did not gain (docs: the second stage): it is in neither the package nor the repository (its record:
``training/experiments/minilm-l2-rerank-v1.md``), and ``rerank: cross-encoder`` needs ``rerank.model``."""


class CrossEncoder:
    """An int8 ONNX cross-encoder and its tokenizer, loaded on first use after the files' sha256 check.

    ``score(request, texts)`` runs every (request, text) pair in one batch and returns one score each
    (higher: more needed). Raises :class:`RerankError` for a missing, damaged or failing model.
    """

    def __init__(self, files: LocalModel, *, threads: int = 0) -> None:
        self.files, self.threads = files, threads
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        return self.files.id

    def load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            self.files.check_files(RerankError, "reranker", "rerank.model")
            try:
                tokenizer = Tokenizer.from_file(str(self.files.tokenizer_file))
                tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
                tokenizer.enable_truncation(max_length=RERANK_MAX_TOKENS, strategy="longest_first")
                options = ort.SessionOptions()
                options.log_severity_level = 3
                options.intra_op_num_threads = self.threads
                session = ort.InferenceSession(
                    str(self.files.model_file), sess_options=options, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:
                raise RerankError(f"reranker {self.id!r} could not be loaded ({type(exc).__name__})") from None
            self._session, self._tokenizer = session, tokenizer
            try:  # a network that gives anything but one score per pair is refused at load, not per request
                self._run(["check"] * 2, ["one", "two words"])
            except RerankError as exc:
                self._session = self._tokenizer = None
                raise RerankError(f"{exc} (rerank.model: {self.files.manifest or self.id})") from None

    def score(self, request: str, texts: Sequence[str]) -> np.ndarray:
        """One float32 score per text for `request` (one batch, in the calling thread)."""
        self.load()
        if not texts:
            return np.zeros(0, dtype=np.float32)
        query = with_english_gloss(request)
        return self._run([query] * len(texts), texts)

    def _run(self, queries: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """One finite score per (query, text) pair; RerankError for a failing run or an output of
        another shape (a manifest naming another network)."""
        encodings = [self._tokenizer.encode(query, text) for query, text in zip(queries, texts, strict=True)]
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask, types = np.zeros_like(ids), np.zeros_like(ids)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n], mask[row, :n], types[row, :n] = e.ids, e.attention_mask, e.type_ids
        try:
            scores = self._session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
        except Exception as exc:
            raise RerankError(f"reranker {self.id!r} failed ({type(exc).__name__}: {exc})") from None
        scores = np.asarray(scores, dtype=np.float32)
        if scores.size != len(texts) or scores.ndim > 2 or not np.all(np.isfinite(scores)):
            shape = "x".join(str(n) for n in scores.shape)
            raise RerankError(
                f"reranker {self.id!r} gave an output of shape {shape} for {len(texts)} pairs (one finite score "
                "per pair is needed): its model.json names another network"
            )
        return scores.reshape(len(texts))


_LOADED: dict[str, CrossEncoder] = {}
_LOADED_LOCK = threading.Lock()


def resolve_reranker(name: str | None) -> LocalModel:
    """The reranker ``rerank.model`` names: a folder with a ``model.json`` of kind ``cross-encoder`` (or the
    id of one shipped with the package: none is, since it did not gain). ConfigError for anything else."""
    if not name or not name.strip():
        raise ConfigError(
            "tool_filtering.rerank: type cross-encoder needs rerank.model, a folder with a reranker's model.json: "
            "none ships with sk-toolfilter (leave one catalog out it did not gain; rerank: learned costs no model). "
            "python -m training.experiments.train_reranker trains one and training.experiments.export_reranker writes "
            "its folder (the repository's training/experiments/NOTEBOOK.md: how the last one was made and measured)"
        )
    key = name.strip()
    shipped = MODELS_DIR / key / "model.json"
    if "/" not in key and "\\" not in key and shipped.is_file():
        model = read_manifest(shipped.parent, model_id=key)
    elif (Path(key).expanduser() / "model.json").is_file():
        model = read_manifest(Path(key).expanduser())
    else:
        raise ConfigError(
            f"tool_filtering.rerank.model: {key!r} is neither a reranker shipped with sk-toolfilter "
            f"({', '.join(shipped_models('cross-encoder')) or 'none'}) nor a folder with a model.json"
        )
    if model.kind != "cross-encoder":
        raise ConfigError(f"tool_filtering.rerank.model: {key!r} is an embedding model, not a cross-encoder")
    return model


def check_rerank_model(rerank: RerankConfig) -> None:
    """A ConfigError now for a ``rerank.model`` that names no cross-encoder or learned ranker (at start,
    not per request)."""
    if rerank.type == "cross-encoder":
        resolve_reranker(rerank.model)
    elif rerank.type == "learned":
        load_learned_ranker(rerank.model)


def load_reranker(name: str | None) -> CrossEncoder:
    """The process's one :class:`CrossEncoder` for `name` (files checked on first use)."""
    key = name or ""
    with _LOADED_LOCK:
        if key not in _LOADED:
            _LOADED[key] = CrossEncoder(resolve_reranker(name))
        return _LOADED[key]


def second_stage_scores(scores: np.ndarray, first_stage_weight: float) -> np.ndarray:
    """The order the second stage ranks by: the network's score of each shortlisted tool (first-stage
    order) plus ``first_stage_weight * -log(1 + position)`` — the network was trained to correct the first
    stage's order, not to replace it."""
    return scores - np.float32(first_stage_weight) * np.log1p(np.arange(len(scores), dtype=np.float32))


def reorder_by_scores(
    lists: Sequence[list[int]], shortlist: list[int], scores: np.ndarray, per_part: int
) -> list[list[int]]:
    """Each ranking with its members inside `shortlist` reordered by `scores` (aligned with `shortlist`;
    ties keep the first stage's order). The whole request's ranking (``lists[0]``) keeps its shortlist;
    each part's keeps only its own first `per_part` tools, so each intent's best by the second stage is
    one of that intent's own candidates (the rounds of the interleave then give each intent its best
    first)."""
    score_of = dict(zip(shortlist, scores.tolist(), strict=True))
    out = []
    for position, ranking in enumerate(lists):
        members = [i for i in (ranking if position == 0 else ranking[:per_part]) if i in score_of]
        out.append(sorted(members, key=lambda i: -score_of[i]))  # sorted() is stable: ties stay in order
    return out


PER_PART = 5
"""A request part's own first-stage candidates the reranker may pick its best from."""


@dataclass
class SecondStage:
    """What the second stage did to one ranking: the rankings reordered (None: the first stage's order
    stands), each shortlisted tool's score (by catalog position), and a note for ``explain``."""

    lists: list[list[int]] | None
    scores: dict[int, float] = field(default_factory=dict)
    note: str = ""


async def rerank_lists(
    index: ToolIndex, query: str, lists: list[list[int]], shortlist: list[int], config: RerankConfig
) -> SecondStage:
    """Score `shortlist` (catalog positions) for `query` in one batch and reorder `lists` (the whole
    request's ranking, then each part's: :func:`reorder_by_scores`). On any failure the first stage's
    order stands and the note says why (logged once per cause)."""
    try:
        reranker = load_reranker(config.model)
        texts = [index.tools[i].rerank_text for i in shortlist]
        scores = await asyncio.to_thread(reranker.score, query, texts)
    except Exception as exc:  # (RerankError, ConfigError, or anything else: the first stage's order stands)
        reason = str(exc) if isinstance(exc, RerankError | ConfigError) else f"{type(exc).__name__}: {exc}"
        warn_once(logger, f"the second stage failed ({reason}); the first stage's order is used")
        return SecondStage(None, {}, f"second stage failed ({reason}): the first stage's order")
    scores = second_stage_scores(scores, reranker.files.first_stage_weight)
    reordered = reorder_by_scores(lists, shortlist, scores, PER_PART)
    return SecondStage(
        reordered,
        dict(zip(shortlist, scores.tolist(), strict=True)),
        f"reordered by {reranker.id} (the first stage's top {len(shortlist)})",
    )
