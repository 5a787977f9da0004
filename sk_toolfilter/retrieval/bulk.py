"""Building big catalogs without the cyclic garbage collector in the way.

Indexing 50,000 tools creates a few hundred thousand small objects next to a kernel that already
holds millions; every automatic collection then walks the whole heap. Measured on a 50,000-tool
replica start: 3.7 s with the collector, 2.1 s with it paused. The pause covers one build (nested
and concurrent builds share it) and the collector's previous state is restored after.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause automatic garbage collection for the duration (objects are still freed by refcount)."""
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
