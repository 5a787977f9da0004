"""Building big catalogs without the cyclic garbage collector in the way, and without keeping what
the build freed.

Indexing 50,000 tools creates a few hundred thousand small objects next to a kernel that already
holds millions; every automatic collection then walks the whole heap. Measured on a 50,000-tool
replica start: 3.7 s with the collector, 2.1 s with it paused. The pause covers one build (nested
and concurrent builds share it) and the collector's previous state is restored after.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import sys
import threading
from collections.abc import Callable, Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause automatic garbage collection for the duration (objects are still freed by refcount);
    after the last build, give freed memory back (:func:`release_free_memory`)."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
            last = _depth == 0
        if last:
            release_free_memory()


def _load_malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS, Windows): nothing to do
        return None


_malloc_trim = _load_malloc_trim() if sys.platform.startswith("linux") else None


def release_free_memory() -> None:
    """Give memory freed by a build back to the operating system (glibc's ``malloc_trim``).

    A build frees a lot at once (an image read in parts, float32 vectors quantized to int8); glibc
    keeps such memory for reuse. Measured on a 50,000-tool replica: resident memory after start
    +152 MiB without, +67 MiB with. Elsewhere a no-op.
    """
    if _malloc_trim is not None:
        _malloc_trim(0)
