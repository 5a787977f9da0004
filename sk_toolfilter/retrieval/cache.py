"""A persistent embedding cache keyed by (model id, hash of the exact text embedded).

One ``.npz`` file per model in the cache directory. Writes go to a temporary file that replaces
the old one atomically (a crash never leaves a half-written cache), under an exclusive lock file so
two processes sharing the directory merge rather than overwrite each other. A corrupt or foreign
file is reported once and rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import threading
from pathlib import Path

import numpy as np

from sk_toolfilter._compat import moved_attributes
from sk_toolfilter.basics.files import exclusive_lock, write_atomically
from sk_toolfilter.basics.redaction import library_logger

logger = library_logger(__name__)

FORMAT_VERSION = 2
"""2: the shipped int8 models compute exactly (u8 × u8, ``training/exact_int8.py``); on a CPU without
VNNI their vectors moved, so files of version 1 are not read (each model is embedded once again)."""


def default_cache_dir() -> Path:
    """``$SK_TOOLFILTER_CACHE``, else ``$XDG_CACHE_HOME/sk-toolfilter``, else ``~/.cache/sk-toolfilter``."""
    if os.environ.get("SK_TOOLFILTER_CACHE"):
        return Path(os.environ["SK_TOOLFILTER_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "sk-toolfilter"


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


MAX_ENTRIES = 200_000
"""Vectors kept per model (file and memory); the oldest written are evicted first."""


class EmbeddingCache:
    """Embeddings on disk, shared by restarts and processes."""

    def __init__(self, directory: str | Path | None = None, *, max_entries: int = MAX_ENTRIES) -> None:
        self.directory = Path(directory).expanduser() if directory is not None else default_cache_dir()
        self.max_entries = max_entries
        self._memory: dict[str, dict[str, np.ndarray]] = {}
        self._lock = threading.Lock()
        self._reported: set[Path] = set()

    def _path(self, model_id: str) -> Path:
        slug = re.sub(r"[^0-9A-Za-z_.-]", "_", model_id)[:80]
        digest = hashlib.sha256(model_id.encode()).hexdigest()[:8]
        return self.directory / f"embeddings-v{FORMAT_VERSION}-{slug}-{digest}.npz"

    def _read(self, path: Path) -> dict[str, np.ndarray]:
        try:
            if not path.exists():
                return {}
        except OSError as exc:  # e.g. a folder we may not enter
            self._warn_once(path, f"embedding cache {path} is not accessible ({exc.strerror}); continuing without it")
            return {}
        try:
            with np.load(path, allow_pickle=False) as data:
                if int(data["version"]) != FORMAT_VERSION:
                    raise ValueError(f"format version {int(data['version'])}")
                keys, vectors = data["keys"], data["vectors"]
                if vectors.ndim != 2 or len(keys) != len(vectors) or not np.isfinite(vectors).all():
                    raise ValueError("inconsistent arrays")
                return {str(k): v for k, v in zip(keys, vectors, strict=True)}
        except Exception as exc:
            self._warn_once(path, f"embedding cache {path} is unreadable ({exc}); rebuilding it")
            return {}

    def _warn_once(self, path: Path, message: str) -> None:
        if path not in self._reported:
            self._reported.add(path)
            logger.warning("sk-toolfilter: %s", message)

    def _exclusive(self, path: Path) -> contextlib.AbstractContextManager[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        return exclusive_lock(path.with_suffix(".lock"))

    def get(self, model_id: str, texts: list[str]) -> list[np.ndarray | None]:
        """The cached vector of each text, or None where it is not cached."""
        with self._lock:
            entries = self._memory.get(model_id)
            if entries is None:
                entries = self._read(self._path(model_id))
                self._memory[model_id] = entries
            return [entries.get(text_key(t)) for t in texts]

    def put(self, model_id: str, texts: list[str], vectors: np.ndarray) -> None:
        """Store vectors (merged with what other processes wrote meanwhile), atomically."""
        if not texts:
            return
        path = self._path(model_id)
        new = {text_key(t): np.asarray(v, dtype=np.float32) for t, v in zip(texts, vectors, strict=True)}
        with self._lock:
            try:
                with self._exclusive(path):
                    entries = self._read(path)
                    dims = {v.shape[0] for v in new.values()}
                    entries = {k: v for k, v in entries.items() if v.shape[0] in dims}  # model resized
                    for key in new:  # re-inserted at the end: the oldest entries are evicted first
                        entries.pop(key, None)
                    entries.update(new)
                    if len(entries) > self.max_entries:
                        entries = dict(list(entries.items())[-self.max_entries :])
                    keys = np.array(list(entries), dtype="U64")
                    matrix = np.stack(list(entries.values())).astype(np.float32)
                    write_atomically(
                        path, lambda f: np.savez(f, version=np.array(FORMAT_VERSION), keys=keys, vectors=matrix)
                    )
                    self._memory[model_id] = entries
            except OSError as exc:
                reason = exc.strerror or str(exc)
                message = f"cannot write embedding cache {path} ({reason}); continuing without it"
                self._warn_once(self.directory, message)
                memory = self._memory.setdefault(model_id, {})
                memory.update(new)
                if len(memory) > self.max_entries:
                    self._memory[model_id] = dict(list(memory.items())[-self.max_entries :])


__getattr__ = moved_attributes(__name__)
