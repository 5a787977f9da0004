"""Progress reporting for long work (indexing, evaluation): a callback type and a terminal indicator."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(done, total)`` while work advances."""


class Progress:
    """A one-line progress indicator on stderr (silent when stderr is not a terminal, except the end)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.started = time.perf_counter()
        self.interactive = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        if self.interactive:
            width = 30
            filled = int(width * done / max(total, 1))
            sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            elapsed = time.perf_counter() - self.started
            sys.stderr.write(f"\r{self.label}: {total} done in {elapsed:.1f}s{' ' * 20}\n")
        sys.stderr.flush()
