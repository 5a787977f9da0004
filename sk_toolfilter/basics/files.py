"""Files more than one process writes: an exclusive lock across processes, atomic replacement, and
the temporaries a killed writer left. Used by the embedding cache and by learning from use's file."""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO


def write_atomically(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write `path` through a temporary file beside it that replaces it once complete and synced:
    readers see the old file or the new one, never a half-written one. Raises OSError."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


LOCK_POLL_SECONDS = 0.05


@contextlib.contextmanager
def exclusive_lock(lock_path: Path, timeout: float | None = None) -> Iterator[None]:
    """Hold an exclusive lock on `lock_path` (created 0600 if missing) across processes: read, merge and
    replace a shared file inside it and no other writer's data is lost. The lock file is opened without
    following a link and must be a regular file of this user (another local user cannot plant one).
    `timeout`: give up after this many seconds (TimeoutError) instead of waiting for ever. Raises OSError."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(lock_path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PermissionError(errno.EPERM, f"the lock file {lock_path} is a symbolic link: refused") from None
        raise
    with os.fdopen(fd, "r+b") as lock_file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (hasattr(os, "geteuid") and info.st_uid != os.geteuid()):
            raise PermissionError(errno.EPERM, f"the lock file {lock_path} is not a regular file of this user")
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: atomic replace still prevents corruption
            yield
            return
        if timeout is None:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise TimeoutError(errno.ETIMEDOUT, f"the lock {lock_path} is held elsewhere") from None
                    time.sleep(LOCK_POLL_SECONDS)
        yield


def remove_stale_temporaries(path: Path) -> int:
    """Remove the temporary files :func:`write_atomically` left beside `path` when a writer was killed
    (call it under the file's exclusive lock: no live writer of `path` is mid-write). Only regular
    files of this user are removed; returns how many."""
    removed = 0
    for leftover in path.parent.glob(f"{glob.escape(path.name)}.*.tmp"):
        try:
            info = leftover.lstat()
            if stat.S_ISREG(info.st_mode) and (not hasattr(os, "geteuid") or info.st_uid == os.geteuid()):
                leftover.unlink()
                removed += 1
        except OSError:
            continue
    return removed
