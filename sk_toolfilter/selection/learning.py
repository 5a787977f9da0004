"""Learning from use, for one manager: every completed turn becomes (the request's vector, the tools
called), kept in a :class:`~sk_toolfilter.retrieval.usage.UsageMemory` and, when configured, in a file.

What is learned from a turn: only the tools that were in the catalog, visible and allowed to that
conversation when it was served (never an excluded, hidden or disallowed tool, never a discovery
tool itself — a tool the model *found* through discovery and then called is learned, it is the most
valuable label: the first stage missed it). What is kept: the request's vector, the tool names, a
fingerprint of the request (a hash scoped to the catalog) and the time. Never the text.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path

import numpy as np

from sk_toolfilter.basics.errors import EmbeddingServiceError
from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.config import LearningConfig
from sk_toolfilter.retrieval.cache import exclusive_lock, write_atomically
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.usage import MAX_TOOLS_PER_REQUEST, UsageMemory
from sk_toolfilter.selection.turns import Turn
from sk_toolfilter.selection.visibility import ToolPolicy
from sk_toolfilter.store.learning_table import LearningTable
from sk_toolfilter.store.shared_index import SharedIndex

logger = library_logger(__name__)

FILE_FORMAT = 1
MAX_NAME_CHARS = 512  # a longer "tool name" in a file is not one of this catalog's tools
MAX_FILE_ROWS = 1_000_000  # rows read from a file at most (the newest; the memory keeps fewer)


def request_key(catalog: str, request: str) -> str:
    """The fingerprint a request is remembered by: a hash of the catalog and the request, never the text."""
    return hashlib.sha256(f"{catalog}\x00{request.strip()}".encode()).hexdigest()[:32]


def forget_file(path: str | Path) -> bool:
    """Delete a learning file (under its lock); False when there was none."""
    target = Path(path).expanduser()
    if not target.exists():
        return False
    with exclusive_lock(target.with_name(target.name + ".lock")):
        try:
            target.unlink()
        except FileNotFoundError:
            return False
    return True


def memory_for(config: LearningConfig) -> UsageMemory:
    """An empty memory bounded as `config` says."""
    return UsageMemory(
        max_requests=config.max_requests,
        max_bytes=int(config.max_megabytes * 2**20),
        max_age_days=config.max_age_days,
        half_life_days=config.half_life_days,
    )


class Learning:
    """One manager's learning from use: what completed turns teach, kept within its bounds."""

    def __init__(self, config: LearningConfig, catalog: str, model: str, policy: ToolPolicy | None = None) -> None:
        self.config, self.policy = config, policy
        self.catalog = catalog
        self.memory = memory_for(config)
        path = config.file if config.enabled else None  # off: nothing stored, nothing read
        self.file = LearningFile(path, catalog, model, config.sync_seconds) if path else None
        if self.file is not None:
            self.file.load_into(self.memory)
        self.table: LearningTable | None = None
        """Where the fleet shares what it learned (``index.store: postgres``), or None."""
        self._pending: set[str] = set()

    async def share(self, store: SharedIndex) -> None:
        """With a shared store and learning on: learn from, and share with, the other replicas."""
        if self.config.enabled:
            self.table = store.learning_table(self.config.sync_seconds)
            if self.table is not None:
                await self.table.sync(self.memory)

    def tick(self) -> None:
        """On each selection: a background sync with the shared table when one is due."""
        if self.table is not None:
            self.table.tick(self.memory)

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def permits(
        self, name: str, index: ToolIndex, discovery: Collection[str], allowed: Collection[str] | None = None
    ) -> bool:
        """Whether `name` may be learned: indexed, visible, not a discovery tool, and allowed to the
        conversation (`allowed`: the caller's allow-list, None for every tool)."""
        hidden = self.policy is not None and self.policy.is_hidden(name)
        return name in index and name not in discovery and not hidden and (allowed is None or name in allowed)

    def usable(self) -> UsageMemory | None:
        """The memory a ranking reads (None when learning is off or nothing was learned)."""
        return self.memory if self.config.enabled and len(self.memory) else None

    async def learn(self, index: ToolIndex, turns: Sequence[Turn], allowed: Callable[[str], bool]) -> int:
        """Learn every completed turn not learned before; `allowed` says whether a tool was visible and
        allowed to the conversation. Returns how many rows were added or refreshed."""
        if not self.config.enabled or not turns or not index.has_embeddings:
            return 0  # (an index without vectors, BM25 only, has nothing to compare requests with)
        fresh: dict[str, tuple[str, list[str]]] = {}
        for turn in turns:
            calls = [c for c in turn.calls if c in index and allowed(c)][:MAX_TOOLS_PER_REQUEST]
            key = request_key(self.catalog, turn.request)
            if calls and not self.memory.knows(key, calls) and key not in self._pending:
                fresh[key] = (turn.request, calls)
        if not fresh:
            return 0
        self._pending.update(fresh)
        try:
            vectors = await index.embed_queries([request for request, _ in fresh.values()])
        except EmbeddingServiceError as exc:
            logger.debug("sk-toolfilter: learning skipped %d turns (%s)", len(fresh), exc)
            return 0
        finally:
            self._pending.difference_update(fresh)
        rows = zip(fresh.items(), vectors, strict=True)
        learned = sum(self.memory.learn(vector, calls, key) for (key, (_, calls)), vector in rows)
        if learned and self.file is not None:
            self.file.changed(self.memory)
        return learned

    def forget_removed(self, index: ToolIndex) -> None:
        """Tools no longer in the catalog are forgotten (a row left without tools goes)."""
        if len(self.memory) and self.memory.forget_tools(lambda name: name in index) and self.file is not None:
            self.file.changed(self.memory)

    async def forget(self) -> None:
        """Forget everything: in memory, in the file and in the shared table."""
        self.memory.clear()
        if self.file is not None:
            self.file.wipe()
        if self.table is not None:
            await self.table.forget()

    def flush(self) -> None:
        """Write the file now if anything changed since the last write."""
        if self.file is not None:
            self.file.flush(self.memory)

    async def aclose(self) -> None:
        """Write the file and a last sync with the shared table."""
        self.flush()
        if self.table is not None:
            await self.table.aclose(self.memory)


class LearningFile:
    """Keeps a :class:`UsageMemory` in a ``.npz`` file beside the agent: read at start, written
    (atomically, under a lock, merged with what other processes wrote) at most every `every_seconds`
    after something was learned, and on :meth:`flush`.

    The file holds vectors, tool names, fingerprints and times; its catalog and embedding model are
    checked on read. A missing file starts empty; a damaged one, or one of another catalog or model, is
    ignored with one warning (and replaced at the next write); bad rows in it (not finite, wrong size,
    over-long names) are skipped; only the newest rows the memory can hold are read.
    """

    def __init__(self, path: str | Path, catalog: str, model: str, every_seconds: float = 30.0) -> None:
        self.path = Path(path).expanduser()
        self.catalog = catalog
        self.model = model
        self.every_seconds = every_seconds
        self._written_version = -1
        self._last_write = time.monotonic()
        self._warned: set[str] = set()
        self._writing: asyncio.Future[None] | None = None
        self._lock = threading.Lock()  # one writer at a time in this process (the file lock guards others)

    def load_into(self, memory: UsageMemory) -> int:
        """Learn the rows in the file; returns how many were taken."""
        taken = memory.restore(self._read(memory))
        self._written_version = memory.version
        return taken

    def _warn_once(self, what: str, reason: str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            logger.warning("sk-toolfilter: learning file %s: %s", self.path, reason)

    def _read(self, memory: UsageMemory) -> list[tuple[str, np.ndarray, list[str], float]]:
        """The file's well-formed rows, at most the newest `memory` can hold; [] when missing or unusable."""
        try:
            with np.load(self.path, allow_pickle=False) as data:
                header = json.loads(str(data["header"]))
                if header.get("format") != FILE_FORMAT:
                    raise ValueError(f"not a learning file of format {FILE_FORMAT}")
                scope = (header.get("catalog"), header.get("model"))
                if scope != (self.catalog, self.model):
                    found = f"catalog {scope[0]!r}, model {scope[1]!r}"
                    self._warn_once(
                        "scope",
                        f"it was learned for {found}, not catalog {self.catalog!r}, model "
                        f"{self.model!r}; ignored (replaced at the next write)",
                    )
                    return []
                vectors = data["vectors"]
                if vectors.ndim != 2 or not vectors.shape[1]:
                    raise ValueError(f"vectors of shape {vectors.shape}")
                keep = min(MAX_FILE_ROWS, memory.capacity(vectors.shape[1]))
                vectors = vectors[-keep:]
                keys = data["keys"][-keep:].tolist()
                times = data["times"][-keep:].astype(np.float64)
                tools = json.loads(str(data["tools"]))[-keep:]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError) as exc:
            reason = f"cannot be read ({exc}); starting with nothing learned (replaced at the next write)"
            self._warn_once("read", reason)
            return []
        if not (len(vectors) == len(keys) == len(times) == len(tools)):
            self._warn_once("read", "its arrays disagree in length; starting with nothing learned")
            return []
        return list(_good_rows(keys, vectors, tools, times, self._warn_once))

    def changed(self, memory: UsageMemory) -> None:
        """`memory` changed: write it when `every_seconds` passed since the last write — off the event
        loop when one runs (a request never waits on the disk), one write at a time."""
        if time.monotonic() - self._last_write < self.every_seconds:
            return
        if self._writing is not None and not self._writing.done():
            return
        self._last_write = time.monotonic()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush(memory)
            return
        self._writing = loop.run_in_executor(None, self.flush, memory)

    def flush(self, memory: UsageMemory) -> None:
        """Write now if anything changed since the last write (merged with the other writers' rows)."""
        with self._lock:
            self._flush(memory)

    def _flush(self, memory: UsageMemory) -> None:
        if memory.version == self._written_version:
            return
        self._last_write = time.monotonic()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with exclusive_lock(self.path.with_name(self.path.name + ".lock")):
                memory.restore(self._read(memory))  # what the other processes learned since
                version = memory.version  # (a row learned while this writes moves it on: written next time)
                self._write(memory.rows())
            self._written_version = version
        except OSError as exc:
            self._warn_once("write", f"cannot be written ({exc.strerror or exc}); what is learned stays in memory")

    def wipe(self) -> None:
        """Replace the file with an empty one (``sk-toolfilter forget``)."""
        try:
            with self._lock, exclusive_lock(self.path.with_name(self.path.name + ".lock")):
                self._write([])
        except OSError as exc:
            self._warn_once("write", f"cannot be written ({exc.strerror or exc})")

    def _write(self, rows: list[tuple[str, np.ndarray, tuple[str, ...], float]]) -> None:
        dims = rows[0][1].shape[0] if rows else 0
        header = json.dumps({"format": FILE_FORMAT, "catalog": self.catalog, "model": self.model})
        arrays = {
            "header": np.array(header),
            "keys": np.array([k for k, _, _, _ in rows], dtype="U32"),
            "vectors": np.array([v for _, v, _, _ in rows], dtype=np.float32).reshape(len(rows), dims),
            "times": np.array([t for _, _, _, t in rows], dtype=np.float64),
            "tools": np.array(json.dumps([list(tools) for _, _, tools, _ in rows])),
        }
        write_atomically(self.path, lambda f: np.savez(f, **arrays))  # type: ignore[arg-type]


def _good_rows(
    keys: list[str], vectors: np.ndarray, tools: list[object], times: np.ndarray, warn: Callable[[str, str], None]
) -> Iterable[tuple[str, np.ndarray, list[str], float]]:
    """The file's rows that are well formed; one warning for the rest."""
    bad = 0
    for key, vector, names, at in zip(keys, vectors, tools, times.tolist(), strict=True):
        good_names = isinstance(names, list) and all(isinstance(n, str) and len(n) <= MAX_NAME_CHARS for n in names)
        if good_names and np.isfinite(vector).all() and np.isfinite(at) and isinstance(key, str):
            yield key, vector, names, at  # type: ignore[misc]
        else:
            bad += 1
    if bad:
        warn("rows", f"{bad} malformed rows ignored")
