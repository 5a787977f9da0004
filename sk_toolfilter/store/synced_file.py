"""What every file a process keeps learned state in does alike (the file-side twin of
:mod:`~sk_toolfilter.store.synced_table`): written at most every ``every_seconds`` after a change and on
``flush``, off the event loop when one runs (a request never waits on the disk), one write at a time in
this process and under a lock file across processes, each write merged with what the other processes
wrote since (the subclass's ``_merge_and_write``), atomically replaced; a file that cannot be written is
one warning and what is learned stays in memory.

Subclass: :class:`~sk_toolfilter.store.learning_file.LearningFile` (learning from use, ``.npz``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from sk_toolfilter.basics.files import exclusive_lock, remove_stale_temporaries
from sk_toolfilter.basics.redaction import library_logger

logger = library_logger(__name__)

State = TypeVar("State")


def off_the_loop(call: Callable[[State], object], state: State) -> asyncio.Future[object] | None:
    """`call(state)` in the default executor when an event loop runs (the future), else now (None)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        call(state)
        return None
    return loop.run_in_executor(None, call, state)


class SyncedFile(Generic[State]):
    """A process's `State` kept in a file several processes share (see the module docstring)."""

    what = "state file"
    """What the file keeps, as its warnings name it (``learning file``, ``co-usage file``)."""

    def __init__(self, path: str | Path, every_seconds: float = 30.0) -> None:
        self.path = Path(path).expanduser()
        self.every_seconds = every_seconds
        self._last_write = time.monotonic()
        self._writing: asyncio.Future[object] | None = None
        self._lock = threading.Lock()  # one writer at a time in this process (the lock file guards the others)
        self._warned: set[str] = set()
        self.read_only = False
        """True: the file is read, never written (the CLI's inspecting commands)."""
        self.blocked: str | None = None
        """Why the file must not be written (one of another catalog or model, one that is not ours): it is
        never overwritten; what is learned stays in memory. None: it may be written."""
        self.write_error: str | None = None
        """Why the last write failed (None: it succeeded, or none was tried)."""
        self.lock_timeout = 10.0
        """Seconds a write waits for the lock another process holds; then it is skipped (one warning) and
        what is learned stays in memory for the next write."""

    @property
    def _lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def changed(self, state: State) -> None:
        """`state` changed: write it when ``every_seconds`` passed since the last write (off the event loop
        when one runs; never two writes at once)."""
        if time.monotonic() - self._last_write < self.every_seconds:
            return
        if self._writing is not None and not self._writing.done():
            return
        self._last_write = time.monotonic()
        self._writing = off_the_loop(self.flush, state)

    def flush(self, state: State) -> bool:
        """Write now if anything changed since the last write (merged with the other writers' state).
        Returns False when something was left unwritten: the file is read-only here, must not be
        overwritten (:attr:`blocked`) or could not be written (:attr:`write_error`)."""
        with self._lock:
            if not self._pending(state):
                return True
            if self.read_only:
                return False
            self._last_write = time.monotonic()
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with exclusive_lock(self._lock_path, timeout=self.lock_timeout):
                    remove_stale_temporaries(self.path)  # a writer killed mid-write left its temporary file
                    written = self._merge_and_write(state)
            except OSError as exc:
                self.write_error = str(exc.strerror or exc)
                self._warn_once("write", f"cannot be written ({self.write_error}); what is learned stays in memory")
                return False
            self.write_error = None
            return written

    def _warn_once(self, what: str, reason: str) -> None:
        """One warning per kind of trouble (``read``, ``write``, …) for the life of this process."""
        if what not in self._warned:
            self._warned.add(what)
            logger.warning("sk-toolfilter: %s %s: %s", self.what, self.path, reason)

    def _pending(self, state: State) -> bool:
        """Whether `state` has anything the file does not (under ``_lock``)."""
        raise NotImplementedError

    def _merge_and_write(self, state: State) -> bool:
        """Read what the others wrote, merge it into `state`, write the file (under both locks); False when
        the file turned out not to be this process's to write (:attr:`blocked`)."""
        raise NotImplementedError
