"""Learning from use kept in a ``.npz`` file beside the agent (``learning.file``): read at start and
while running, written atomically under a lock and merged with the other processes' rows, wiped by a
generation (``sk-toolfilter forget``), and read only as far as the memory can hold (the arrays' sizes
come from their npy headers before anything is decompressed).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

import numpy as np

from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.basics.files import exclusive_lock, write_atomically
from sk_toolfilter.basics.input_files import open_regular
from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.retrieval.memory import MAX_TOOLS_PER_REQUEST, SHARED_SCOPE, LearningMemory, MemoryRow
from sk_toolfilter.store.synced_file import SyncedFile, off_the_loop

logger = library_logger(__name__)

FILE_FORMAT = 3
"""2: a generation (forget), the conversation and scope of each row, tools one JSON per row; 3: each row's
tools as UTF-8 JSON in one byte array with the rows' end offsets (a fixed-width column made one row of
twelve long names set every row's width: files many times their content, over their read bound)."""
READ_FORMATS = (1, 2, 3)
MAX_NAME_CHARS = 512  # a longer "tool name" in a file is not one of this catalog's tools
MAX_FILE_ROWS = 1_000_000  # a file of more rows is refused from its headers, before anything is decompressed
MAX_TOOLS_JSON_CHARS = MAX_TOOLS_PER_REQUEST * (MAX_NAME_CHARS + 4) + 2  # one row's tools, as JSON
READ_CHUNK_BYTES = 2**20  # rows past the newest the memory keeps are read through and dropped in chunks of this


def forget_file(path: str | Path, catalog: str = "default", model: str = "") -> int:
    """Wipe a learning file (``sk-toolfilter forget``): it is replaced, under its lock, by an empty file of
    the next generation, so a running process drops what it learned before the wipe instead of
    writing it back. Returns how many rows the file held (0 when there was none)."""
    return LearningFile(path, catalog, model).wipe()


def describe_foreign(found: tuple[str, str], ours: tuple[str, str]) -> str:
    """Why a learning file of catalog and model `found` is not read by a process of `ours`, and the fix."""
    if found[0] != ours[0]:
        fix = (
            f"for the same tools set learning.catalog: {found[0]!r} (code: ToolFilterConfig(learning="
            f"{{'catalog': {found[0]!r}}}))"
        )
    else:
        fix = f"it was learned with embedding model {found[1]!r}: point learning.file at a new path for {ours[1]!r}"
    return (
        f"it holds learning of catalog {found[0]!r}, model {found[1]!r}, not this agent's catalog {ours[0]!r}, "
        f"model {ours[1]!r} ({fix})"
    )


class LearningFile(SyncedFile[LearningMemory]):
    """Keeps a :class:`LearningMemory` in a ``.npz`` file beside the agent: read at start, written
    (atomically, under a lock, merged with what other processes wrote) at most every `every_seconds`
    after something was learned, and on :meth:`flush`.

    The file holds vectors, tool names, and fingerprints of requests, conversations and scopes, with
    their times; its catalog and embedding model are checked on read. A missing file starts empty; a
    damaged one, one that is not a regular file or is over its size bound, or one of another catalog
    or model, is not read and never overwritten, with one warning (what is learned stays in memory;
    :attr:`blocked` says why); bad rows in it are
    skipped; only the newest rows the memory can hold are read, in memory proportional to them (the
    arrays' sizes are read from their headers before anything is decompressed).

    **Forget**: the header carries a *generation*; :meth:`wipe` writes an empty file of the next one.
    A process that finds a newer generation than it knew (before each write, and every
    `every_seconds` when its requests tick) drops what it had learned instead of writing it back.
    """

    what = "learning file"

    def __init__(self, path: str | Path, catalog: str, model: str, every_seconds: float = 30.0) -> None:
        super().__init__(path, every_seconds)
        self.catalog = catalog
        self.model = model
        self.generation = 0
        """The newest wipe this process knows of (0: none)."""
        self._wiped_at = 0.0  # when that wipe was (rows learned before it never come back)
        self._written_version = -1
        self._next_check = time.monotonic() + every_seconds
        self._seen: tuple[int, int] | None = None  # (mtime_ns, size) of the file when last read or written
        self._checking: asyncio.Future[object] | None = None
        self.foreign: tuple[str, str] | None = None
        """(catalog, model) of the file when they are not this process's: it is never overwritten."""

    def load_into(self, memory: LearningMemory) -> int:
        """Learn the rows in the file; returns how many were taken."""
        rows, self.generation, self._wiped_at = self._read(memory)
        memory.forget_before(self._wiped_at)  # (the file's rows are newer; the memory learns the time)
        taken = self._restore(memory, rows)
        self._written_version = memory.version
        return taken

    def _restore(self, memory: LearningMemory, rows: list[MemoryRow]) -> int:
        clamped = memory.clamped
        taken = memory.restore(rows)
        if memory.clamped > clamped:
            self._warn_once("future", f"{memory.clamped - clamped} rows dated in the future were dated now")
        return taken

    def max_file_bytes(self, memory: LearningMemory) -> int:
        """The largest file read for `memory`: its vectors as float32 (4x its int8 codes), and room."""
        return 8 * memory.max_bytes + 16 * 2**20

    def _read(self, memory: LearningMemory) -> tuple[list[MemoryRow], int, float]:
        """The file's well-formed rows (at most the newest `memory` can hold), its generation and when its
        last wipe was; no rows when it is missing or unusable (then the generation this process knows)."""
        self.blocked, self.foreign = None, None
        try:
            with open_regular(self.path, "learning file", self.max_file_bytes(memory), own_only=True) as handle:
                self._seen = _stat_key(os.fstat(handle.fileno()))
                return self._read_open(handle, memory)
        except FileNotFoundError:
            return [], self.generation, 0.0
        except ConfigError as exc:
            self._refuse(str(exc).removeprefix(f"learning file {self.path}: "))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, zipfile.BadZipFile) as exc:
            self._refuse(f"cannot be read ({exc})")
        return [], self.generation, 0.0

    def _refuse(self, why: str) -> None:
        """The file is not this process's to read or write (`why`): it is never overwritten (one warning)."""
        self.blocked = why
        self._warn_once(
            "read",
            f"{why}; not read, and never overwritten: what this process learns stays in its memory "
            "(point learning.file at another path, or delete this one)",
        )

    def _read_open(self, handle: IO[bytes], memory: LearningMemory) -> tuple[list[MemoryRow], int, float]:
        with zipfile.ZipFile(handle) as archive:
            header = json.loads(str(_small_member(archive, "header")))
            if not isinstance(header, dict) or header.get("format") not in READ_FORMATS:
                raise ValueError(f"not a learning file of format {FILE_FORMAT}")
            generation, wiped_at = _generation(header)
            scope = (header.get("catalog"), header.get("model"))
            if scope != (self.catalog, self.model):
                if _npy_shape(archive, "keys")[0] == (0,):
                    return [], generation, wiped_at  # an empty file (a wipe's): nothing to warn about
                self.foreign = (str(scope[0]), str(scope[1]))
                self._refuse(f"{describe_foreign(self.foreign, (self.catalog, self.model))}")
                return [], generation, wiped_at
            try:
                return _file_rows(archive, header["format"], memory, self._warn_once), generation, wiped_at
            except (ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
                self._refuse(f"cannot be read ({exc})")
                return [], generation, wiped_at  # its generation still counts: a wipe is never missed

    def check(self, memory: LearningMemory) -> None:
        """Every `every_seconds`: read what the other processes wrote, and notice a wipe (``forget``), even
        when this one has nothing to write — off the event loop when one runs (a ``stat``; the file
        only when it changed)."""
        now = time.monotonic()
        if now < self._next_check or (self._checking is not None and not self._checking.done()):
            return
        self._next_check = now + self.every_seconds
        self._checking = off_the_loop(self._check, memory)

    def _check(self, memory: LearningMemory) -> None:
        try:
            info = self.path.stat()
        except OSError:
            return
        if _stat_key(info) == self._seen:
            return
        with self._lock:
            self._merge(memory)

    def _merge(self, memory: LearningMemory) -> None:
        """Take what the other processes wrote, after adopting a wipe the file shows (under ``_lock``)."""
        rows, generation, wiped_at = self._read(memory)
        if generation > self.generation:
            self._adopt_wipe(memory, generation, wiped_at)
        memory.forget_before(wiped_at)  # a wipe's time holds whatever generation brought it
        self._restore(memory, rows)

    def _adopt_wipe(self, memory: LearningMemory, generation: int, wiped_at: float) -> None:
        """Another process wiped the file at `wiped_at`: what this one learned before is dropped, never
        written back (what it learned since stays)."""
        memory.forget_before(wiped_at)
        self.generation, self._wiped_at = generation, wiped_at
        logger.info("sk-toolfilter: learning file %s was wiped (forget): what was learned here is dropped", self.path)

    def peek(self) -> tuple[dict[str, Any], int, float, int]:
        """(header, generation, time of the wipe, rows) of the file, from its headers alone; ({}, 0, 0.0, 0)
        when missing or unreadable."""
        try:
            with (
                open_regular(self.path, "learning file", 2**62, own_only=True) as handle,
                zipfile.ZipFile(handle) as archive,
            ):
                self._seen = _stat_key(os.fstat(handle.fileno()))
                header = json.loads(str(_small_member(archive, "header")))
                if not isinstance(header, dict):
                    raise ValueError("header")
                generation, wiped_at = _generation(header)
                return header, generation, wiped_at, int(_npy_shape(archive, "keys")[0][0])
        except (OSError, ConfigError, ValueError, KeyError, TypeError, IndexError, EOFError, zipfile.BadZipFile):
            return {}, 0, 0.0, 0

    def _pending(self, memory: LearningMemory) -> bool:
        return memory.version != self._written_version

    def _merge_and_write(self, memory: LearningMemory) -> bool:
        self._merge(memory)  # what the others learned since, and any wipe
        if self.blocked is not None:
            return False  # another catalog's, or not a learning file: never overwritten
        version = memory.version  # (a row learned while this writes moves it on: written next time)
        self._wiped_at = max(self._wiped_at, memory.forgotten_before)  # a table's wipe reaches the file's readers
        self._write(memory.rows(), self.generation)
        self._written_version = version
        return True

    def wipe(self) -> int:
        """Replace the file with an empty one of the next generation (``sk-toolfilter forget``); returns
        how many rows it held. A learning file of another catalog (or, when this file knows its model,
        another model), or a file that is not a learning file, is refused with a :class:`ConfigError`:
        never overwritten."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._lock, exclusive_lock(self._lock_path):
                header, generation, _, rows = self.peek()
                if not header and os.path.lexists(self.path):  # never a file that is not a learning file
                    raise ConfigError(
                        f"learning file {self.path}: not a learning file (or not one this user may read): not "
                        "wiped (point learning.file at another path, or delete it yourself if it should go)"
                    )
                found = (str(header.get("catalog")), str(header.get("model", self.model)))
                if header.get("catalog") is not None and (
                    found[0] != self.catalog or (self.model and found[1] != self.model)
                ):
                    why = describe_foreign(found, (self.catalog, self.model or found[1]))
                    raise ConfigError(
                        f"learning file {self.path}: {why}; its {rows:,} rows were not wiped (to wipe them: forget "
                        "with that catalog, or delete the file)"
                    )
                self.generation = max(self.generation, generation) + 1
                if header.get("catalog") is not None:  # the file's own model: its readers' header
                    self.model = found[1]
                self._wiped_at = time.time()
                self._write([], self.generation)
                return rows
        except OSError as exc:
            raise ConfigError(f"learning file {self.path}: cannot be wiped ({exc.strerror or exc})") from None

    def _write(self, rows: list[MemoryRow], generation: int) -> None:
        dims = rows[0].vector.shape[0] if rows else 0
        header = {
            "format": FILE_FORMAT,
            "catalog": self.catalog,
            "model": self.model,
            "generation": generation,
            "wiped_at": self._wiped_at,
        }
        tools = [json.dumps(list(row.tools)).encode("utf-8", "surrogatepass") for row in rows]
        arrays = {
            "header": np.array(json.dumps(header)),
            "keys": np.array([row.key for row in rows], dtype="U32"),
            "vectors": np.array([row.vector for row in rows], dtype=np.float32).reshape(len(rows), dims),
            "times": np.array([row.at for row in rows], dtype=np.float64),
            "tools_bytes": np.frombuffer(b"".join(tools), dtype=np.uint8),
            "tools_ends": np.cumsum([len(t) for t in tools], dtype=np.int64),
            "conversations": np.array([row.conversation for row in rows], dtype="U32"),
            "scopes": np.array([row.scope for row in rows], dtype="U32"),
        }
        write_atomically(self.path, lambda f: np.savez(f, **arrays))  # type: ignore[arg-type]
        try:
            self._seen = _stat_key(self.path.stat())
        except OSError:
            self._seen = None


def _generation(header: dict[str, Any]) -> tuple[int, float]:
    """A header's wipe generation and the time of that wipe (ValueError for a malformed one)."""
    generation, wiped_at = header.get("generation", 0), header.get("wiped_at", 0.0)
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
        raise ValueError(f"generation {generation!r}")
    if not isinstance(wiped_at, int | float) or isinstance(wiped_at, bool) or not np.isfinite(wiped_at):
        raise ValueError(f"wiped_at {wiped_at!r}")
    return generation, float(wiped_at)


def _stat_key(info: os.stat_result) -> tuple[int, int]:
    """What tells a file changed since it was last read or written: its modification time and size."""
    return info.st_mtime_ns, info.st_size


def _npy_shape(archive: zipfile.ZipFile, name: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """A member's shape and dtype from its npy header alone (nothing past the header is decompressed)."""
    with archive.open(f"{name}.npy") as member:
        return _npy_header(member)


def _npy_header(member: IO[bytes]) -> tuple[tuple[int, ...], np.dtype[Any]]:
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
    else:
        raise ValueError(f"npy format {version}")
    if dtype.hasobject or (fortran and len(shape) > 1):
        raise ValueError(f"{dtype} array{' in Fortran order' if fortran else ''}")
    return tuple(int(n) for n in shape), dtype


def _small_member(archive: zipfile.ZipFile, name: str, max_bytes: int = 2**16) -> np.ndarray:
    """A member of at most `max_bytes` (the header)."""
    with archive.open(f"{name}.npy") as member:
        shape, dtype = _npy_header(member)
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if size > max_bytes:
            raise ValueError(f"{name} of {size:,} bytes")
        return _exact(member, dtype, shape, size)


def _exact(member: IO[bytes], dtype: np.dtype[Any], shape: tuple[int, ...], size: int) -> np.ndarray:
    data = member.read(size)
    if len(data) != size:
        raise EOFError("the file ends early")
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def _tail(archive: zipfile.ZipFile, name: str, rows: int, keep: int) -> np.ndarray:
    """The last `keep` of a member's `rows` rows: the rows before are read through in chunks and dropped."""
    with archive.open(f"{name}.npy") as member:
        shape, dtype = _npy_header(member)
        if not shape or shape[0] != rows:
            raise ValueError(f"{name} of shape {shape}, not {rows} rows")
        row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
        _skip(member, (rows - keep) * row_bytes)
        return _exact(member, dtype, (keep, *shape[1:]), keep * row_bytes)


def _skip(member: IO[bytes], count: int) -> None:
    """Read `count` bytes of `member` through, in chunks, keeping none (rows before the newest kept)."""
    while count:
        chunk = member.read(min(READ_CHUNK_BYTES, count))
        if not chunk:
            raise EOFError("the file ends early")
        count -= len(chunk)


def _tail_json_bytes(archive: zipfile.ZipFile, rows: int, keep: int) -> list[str]:
    """The last `keep` rows' tools of a format-3 file: their end offsets (``tools_ends``), then only their
    bytes of ``tools_bytes`` (the rows before are read through in chunks and dropped)."""
    with archive.open("tools_ends.npy") as member:
        shape, dtype = _npy_header(member)
        if shape != (rows,) or dtype.kind not in "iu":
            raise ValueError(f"tools_ends of shape {shape} and type {dtype}")
        ends = _exact(member, dtype, shape, rows * dtype.itemsize).astype(np.int64)
    starts = np.concatenate([[0], ends[:-1]])
    if (ends < starts).any() or (ends - starts > 4 * MAX_TOOLS_JSON_CHARS).any():
        raise ValueError("tools_ends out of order or a row over its bound")
    first, last = int(starts[rows - keep]), int(ends[-1])
    with archive.open("tools_bytes.npy") as member:
        shape, dtype = _npy_header(member)
        if shape != (last,) or dtype != np.uint8:
            raise ValueError(f"tools_bytes of shape {shape} and type {dtype}, not {last} bytes")
        _skip(member, first)
        blob = member.read(last - first)
    if len(blob) != last - first:
        raise EOFError("the file ends early")
    offsets = (starts[rows - keep :] - first).tolist(), (ends[rows - keep :] - first).tolist()
    return [blob[a:b].decode("utf-8", "replace") for a, b in zip(*offsets, strict=True)]


def _tail_texts(archive: zipfile.ZipFile, name: str, rows: int, keep: int) -> list[str]:
    """The last `keep` texts of a fixed-width text member, read in chunks of rows: memory follows the
    texts' real lengths, not the widest row's width times every row."""
    with archive.open(f"{name}.npy") as member:
        shape, dtype = _npy_header(member)
        if shape != (rows,) or dtype.kind != "U":
            raise ValueError(f"{name} of shape {shape} and type {dtype}")
        _skip(member, (rows - keep) * dtype.itemsize)
        per_chunk = max(1, READ_CHUNK_BYTES // dtype.itemsize)
        texts: list[str] = []
        while len(texts) < keep:
            count = min(per_chunk, keep - len(texts))
            texts += _exact(member, dtype, (count,), count * dtype.itemsize).tolist()
        return texts


def _file_rows(
    archive: zipfile.ZipFile, version: int, memory: LearningMemory, warn: Callable[[str, str], None]
) -> list[MemoryRow]:
    """The newest rows `memory` can hold, checked against every member's header before any is read."""
    (rows, *rest), vector_type = _npy_shape(archive, "vectors")
    if rows == 0:
        return []
    if len(rest) != 1 or not rest[0] or vector_type.kind != "f":
        raise ValueError(f"vectors of shape {(rows, *rest)}")
    dims = rest[0]
    capacity = memory.capacity(dims)
    bound = min(MAX_FILE_ROWS, max(4 * capacity, 10_000))
    if rows > bound:
        raise ValueError(f"{rows:,} rows, over the bound of {bound:,}")
    columns = ["keys", "times", *(("conversations", "scopes") if version >= 2 else ())]
    for name in columns:
        shape, dtype = _npy_shape(archive, name)
        if shape != (rows,) or dtype.kind not in "Uf" or dtype.itemsize > 4 * 64:
            raise ValueError(f"{name} of shape {shape} and type {dtype}")
    if version < 3:
        tools_shape, tools_type = _npy_shape(archive, "tools")
        width = tools_type.itemsize // 4
        if tools_type.kind != "U" or width > (MAX_TOOLS_JSON_CHARS if version >= 2 else 8 * memory.max_bytes):
            raise ValueError(f"tools of type {tools_type}")
    keep = min(rows, capacity)  # (the memory's own byte bound then keeps the newest of them, as it held them)
    vectors = _tail(archive, "vectors", rows, keep).astype(np.float32)
    keys = _tail(archive, "keys", rows, keep).tolist()
    times = _tail(archive, "times", rows, keep).astype(np.float64)
    if version >= 2:
        if version >= 3:
            tools = [_json_or_none(text) for text in _tail_json_bytes(archive, rows, keep)]
        elif tools_shape != (rows,):
            raise ValueError(f"tools of shape {tools_shape}")
        else:
            tools = [_json_or_none(text) for text in _tail_texts(archive, "tools", rows, keep)]
        conversations = _tail(archive, "conversations", rows, keep).tolist()
        scopes = _tail(archive, "scopes", rows, keep).tolist()
    else:
        with archive.open("tools.npy") as member:
            shape, dtype = _npy_header(member)
            every = json.loads(str(_exact(member, dtype, shape, dtype.itemsize)))
        if not isinstance(every, list) or len(every) != rows:
            raise ValueError("tools disagree with the other arrays in length")
        tools = every[-keep:] if keep else []
        conversations, scopes = list(keys), [SHARED_SCOPE] * keep
    return list(_good_rows(keys, vectors, tools, times, conversations, scopes, warn))


def _json_or_none(text: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _good_rows(
    keys: list[str],
    vectors: np.ndarray,
    tools: list[object],
    times: np.ndarray,
    conversations: list[str],
    scopes: list[str],
    warn: Callable[[str, str], None],
) -> Iterable[MemoryRow]:
    """The file's rows that are well formed; one warning for the rest."""
    bad = 0
    rows = zip(keys, vectors, tools, times.tolist(), conversations, scopes, strict=True)
    for key, vector, names, at, conversation, scope in rows:
        good_names = isinstance(names, list) and all(isinstance(n, str) and len(n) <= MAX_NAME_CHARS for n in names)
        if good_names and np.isfinite(vector).all() and np.isfinite(at) and isinstance(key, str):
            yield MemoryRow(key, vector, tuple(names), at, str(conversation), str(scope))
        else:
            bad += 1
    if bad:
        warn("rows", f"{bad} malformed rows ignored")
