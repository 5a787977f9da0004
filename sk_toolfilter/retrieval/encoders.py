"""Embedding calls every framework shares: the local ONNX encoder, and calling any embedding
service safely (batches, timeouts, shape and value checks).

An embedding service is anything with ``async generate_embeddings(texts) -> vectors`` (the
:class:`EmbeddingService` protocol): Semantic Kernel's embedding services, the local model, or an
adapter of another framework's client. Nothing here imports an agent framework.
"""

from __future__ import annotations

import asyncio
import math
import sys
import threading
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel

from sk_toolfilter.basics.errors import EmbeddingServiceError
from sk_toolfilter.retrieval.local_models import LocalModel
from sk_toolfilter.retrieval.text import clean_text


@runtime_checkable
class EmbeddingService(Protocol):
    """What the index needs of an embedding service: one async call from texts to vectors."""

    async def generate_embeddings(self, texts: list[str], settings: Any = None, **kwargs: Any) -> Any:
        """One row of numbers per text."""
        ...


class OnnxEncoder:
    """One ONNX encoder and its tokenizer, loaded on first use after every file's sha256 is checked.

    Vectors are mean-pooled over real tokens (attention mask) and L2-normalized, like
    sentence-transformers. Raises EmbeddingServiceError for a missing, damaged or unloadable file.

    `batch_size` is texts per ONNX run; the default, 1, runs every text alone. On CPU that is the
    fastest setting for real tool texts (no padding; `benchmarks/tool_embedding_benchmark.py`), the
    peak memory is one text's activations whatever the catalog's size or text lengths, and a vector
    depends on its text only: the int8 models quantize a run's activations together, so in a batch a
    text's vector depends on its batch mates and their padding (cosine ~0.99 to its vector alone).
    """

    def __init__(self, files: LocalModel, *, max_length: int = 256, batch_size: int = 1, threads: int = 0) -> None:
        self.files, self.max_length, self.batch_size = files, max_length, batch_size
        self.threads = threads  # onnxruntime's intra-op threads; 0: its default (one per physical core)
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()  # guards loading; onnxruntime sessions run concurrently

    @property
    def loaded(self) -> bool:
        """Whether the files were checked and loaded (the next call does no file work)."""
        return self._session is not None

    def load(self) -> None:
        """Check and load the files (once); EmbeddingServiceError when one is missing or damaged."""
        with self._lock:
            if self._session is None:
                self._load_files()

    def _load_files(self) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        files = self.files
        files.check_files(EmbeddingServiceError, "local embedding model", "embedding.model")
        try:
            tokenizer = Tokenizer.from_file(str(files.tokenizer_file))
            # Pad per batch (faster than the file's fixed 128), and mean-pool with the attention mask
            # so padding never changes a vector.
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            tokenizer.enable_truncation(max_length=min(self.max_length, files.max_length))
            options = ort.SessionOptions()
            options.log_severity_level = 3
            options.intra_op_num_threads = self.threads
            # Memory patterns are planned and kept per input shape, and every text length is a shape:
            # they piled up over a catalog (606 bfcl tools in runs of 32: 3.3 GB peak with them, 1.6
            # without). Vectors are unchanged: this is memory planning only.
            options.enable_mem_pattern = False
            session = ort.InferenceSession(
                str(files.model_file), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # a manifest pointing at files that are no model or tokenizer
            raise EmbeddingServiceError(
                f"local embedding model {files.id!r} could not be loaded ({type(exc).__name__})"
            ) from None
        self._session, self._tokenizer = session, tokenizer

    def embed(self, texts: list[str], *, alone: bool = False) -> np.ndarray:
        """Rows of L2-normalized float32 vectors, one per text, computed in the calling thread.

        `alone`: each text is run by itself whatever `batch_size` is (requests are, so a selection
        never depends on what else was embedded with it)."""
        self.load()
        out = np.zeros((len(texts), self.files.dimensions), dtype=np.float32)
        # Sorting by length keeps padding small inside each batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        step = 1 if alone else self.batch_size
        for start in range(0, len(order), step):
            idx = order[start : start + step]
            ids, mask = self._tokenize([texts[i] or " " for i in idx])
            hidden = self._session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[idx] = pooled
        return out

    def _tokenize(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Token ids and attention mask, padded to the longest text.

        A request's few texts are tokenized one by one: ``encode_batch`` hands even one text to the
        tokenizer's thread pool, whose wake-up cost milliseconds when onnxruntime's threads had just
        run (7 ms for a request of a few intents, measured under load); the catalog's batches still
        go through it.
        """
        if len(texts) > SERIAL_TOKENIZE:
            encodings = self._tokenizer.encode_batch(texts)
            return (
                np.array([e.ids for e in encodings], dtype=np.int64),
                np.array([e.attention_mask for e in encodings], dtype=np.int64),
            )
        encodings = [self._tokenizer.encode(text) for text in texts]
        ids = np.zeros((len(texts), max(len(e.ids) for e in encodings)), dtype=np.int64)  # 0 is [PAD]
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = encoding.attention_mask
        return ids, mask


SERIAL_TOKENIZE = 16
"""Batches of at most this many texts are tokenized in the calling thread (see ``OnnxEncoder._tokenize``)."""


def query_encoder(service: EmbeddingService) -> EmbeddingService:
    """The service that embeds requests for `service`'s documents: its ``query_encoder`` when it has
    one (an asymmetric model, or a wrapper of one), else `service` itself."""
    return optional_attribute(service, "query_encoder") or service


def optional_attribute(obj: object, name: str) -> Any:
    """``getattr(obj, name, None)``. On a pydantic model (every Semantic Kernel service) whose class and
    instance lack `name`, None at once: pydantic's ``__getattr__`` fallback would only format and raise
    an error, ~3 µs a lookup on each request's path. Any other class (a proxy forwarding attributes
    through its own ``__getattr__``) is asked as usual."""
    cls = type(obj)
    if getattr(cls, "__getattr__", None) is _PYDANTIC_GETATTR and not _class_has(cls, name):
        extra = getattr(obj, "__pydantic_extra__", None) or {}
        if name not in vars(obj) and name not in extra:
            return None
    return getattr(obj, name, None)


_PYDANTIC_GETATTR = getattr(BaseModel, "__getattr__", None)


def _class_has(cls: type, name: str) -> bool:
    key = (cls, name)
    found = _CLASS_ATTRIBUTES.get(key)
    if found is None:
        if len(_CLASS_ATTRIBUTES) >= 256:
            _CLASS_ATTRIBUTES.clear()
        found = _CLASS_ATTRIBUTES[key] = any(name in vars(klass) for klass in cls.__mro__)
    return found


_CLASS_ATTRIBUTES: dict[tuple[type, str], bool] = {}


def fitted_weights(service: EmbeddingService | None, kind: str = "hybrid_weights") -> dict[str, float] | None:
    """The hybrid blend fitted for `service`'s model (a local model's, through any wrapper), or None;
    ``kind="loop_hybrid_weights"``: the one chosen for agent-loop turns."""
    while service is not None:
        weights = getattr(service, kind, None)
        if weights is not None:
            return dict(weights)
        service = getattr(service, "inner", None)
    return None


def embedding_model_id(service: EmbeddingService) -> str:
    """A stable id of the model behind a service (for caches and reports)."""
    return str(getattr(service, "ai_model_id", None) or type(service).__name__)


TEXTS_PER_TIMEOUT = 8
"""A catalog call of n texts may take ``timeout_seconds × ⌈n / 8⌉`` (a query embeds a few)."""


def catalog_call_timeout(timeout: float | None, n_texts: int) -> float | None:
    """The bound on one embedding call of `n_texts` catalog texts, given the per-query `timeout`."""
    return None if timeout is None else timeout * math.ceil(n_texts / TEXTS_PER_TIMEOUT)


async def embed_texts(
    service: EmbeddingService, texts: list[str], batch_size: int = 64, *, timeout: float | None = None
) -> np.ndarray:
    """Embed texts in batches; validate shape and values; return L2-normalized float32 rows.

    Every text is cleaned first (:func:`clean_text`); each service call is bounded by `timeout`.
    Raises EmbeddingServiceError naming the problem (service exception, timeout, non-numeric,
    ragged or wrongly shaped vectors, NaN/inf) — never another exception type.
    """
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    texts = [clean_text(t) for t in texts]
    expected_dims = optional_attribute(service, "dimensions")
    parts: list[np.ndarray] = []
    for start in range(0, len(texts), batch_size):
        batch = texts[start : start + batch_size]
        result = await _call_service(service, batch, timeout)
        try:
            array = np.asarray(result, dtype=np.float32)
        except (ValueError, TypeError) as exc:
            raise EmbeddingServiceError(
                f"embedding service {embedding_model_id(service)!r} returned non-numeric or ragged vectors ({exc})"
            ) from None
        if isinstance(expected_dims, int) and array.ndim == 2 and array.shape[1] != expected_dims:
            raise EmbeddingServiceError(
                f"embedding service {embedding_model_id(service)!r} returned {array.shape[1]}-dimensional vectors; "
                f"{expected_dims} were asked for"
            )
        if array.ndim != 2 or array.shape[0] != len(batch) or array.shape[1] == 0:
            raise EmbeddingServiceError(
                f"embedding service returned shape {array.shape} for {len(batch)} texts "
                f"(expected ({len(batch)}, dimensions))"
            )
        if parts and array.shape[1] != parts[0].shape[1]:
            raise EmbeddingServiceError(
                f"embedding service changed dimensions mid-run: {parts[0].shape[1]} then {array.shape[1]}"
            )
        parts.append(array)
    vectors = parts[0] if len(parts) == 1 else np.concatenate(parts)
    # np.linalg.norm's own arithmetic (the same bits) without its wrapper: a request's one call pays it.
    squares = np.add.reduce(vectors * vectors, axis=1, keepdims=True)
    # A NaN or an infinity makes its row's sum of squares one; a finite sum clears every value at once.
    if not np.isfinite(squares).all() and not np.isfinite(vectors).all():
        raise EmbeddingServiceError("embedding service returned NaN or infinite values")
    return vectors / np.maximum(np.sqrt(squares), 1e-12)


async def _call_service(service: EmbeddingService, batch: list[str], timeout: float | None) -> Any:
    name = embedding_model_id(service)
    try:
        return await _bounded(service.generate_embeddings(batch), timeout)
    except EmbeddingServiceError:
        raise
    except asyncio.TimeoutError:
        raise EmbeddingServiceError(f"embedding service {name!r} did not answer within {timeout:g}s") from None
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and getattr(task, "cancelling", lambda: 1)():
            raise  # this task is being cancelled: let it
        raise EmbeddingServiceError(f"embedding service {name!r} cancelled the request") from None
    except (KeyboardInterrupt, SystemExit):
        raise  # the process is being stopped: never contained
    except BaseException as exc:  # any failure of a third-party service, GeneratorExit and the like included
        # The service's own message is untrusted text (some gateways quote the request in it): it never
        # enters our message, hence no log line or span; it stays reachable as the error's __cause__.
        raise EmbeddingServiceError(
            f"embedding service {name!r} failed: {type(exc).__name__} (its message is withheld: it may quote "
            "the request; see the exception's __cause__)"
        ) from exc


async def _bounded(call: Awaitable[Any], timeout: float | None) -> Any:
    """`call` awaited within `timeout` seconds (TimeoutError after), in the calling task (``wait_for``
    wraps it in a task of its own: three turns of the event loop). A service that answers in its first
    step (a local model, a cache hit: nothing to wait for) sets no timer; one that waits is bounded by
    a deadline counted from the start, as if the timer had been set before the first step."""
    if timeout is None:
        return await call
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    if not asyncio.iscoroutine(call):  # an awaitable of another kind (a future): awaited under the timer
        return await _before(deadline, call)
    try:
        waiting = call.send(None)
    except StopIteration as done:
        return done.value
    return await _before(deadline, _Resumed(call, waiting))


async def _before(deadline: float, call: Awaitable[Any]) -> Any:
    """`call` awaited until the event loop's clock reads `deadline` (TimeoutError after)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout_at(deadline):
            return await call
    loop = asyncio.get_running_loop()  # pragma: no cover
    return await asyncio.wait_for(call, max(deadline - loop.time(), 0.0))  # pragma: no cover


class _Resumed:
    """A coroutine that has taken its first step, awaited from where it stopped (``yield from`` once
    its first yield is already out): what it waits on, and what the event loop sends or throws back,
    pass through unchanged."""

    def __init__(self, call: Coroutine[Any, Any, Any], waiting: Any) -> None:
        self._call, self._waiting = call, waiting

    def __await__(self) -> Generator[Any, Any, Any]:
        call, waiting = self._call, self._waiting
        while True:
            try:
                sent = yield waiting
            except GeneratorExit:
                call.close()
                raise
            except BaseException as exc:  # a cancellation (the deadline, or the caller's) goes in
                try:
                    waiting = call.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    waiting = call.send(sent)
                except StopIteration as done:
                    return done.value
