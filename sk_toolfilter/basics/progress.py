"""Progress reporting for long work (indexing, evaluation, reports): a callback type and a terminal indicator."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(done, total)`` while work advances."""

# Without a terminal (CI logs, pipes), a line at most this often, so long work is never silent.
LOG_EVERY_SECONDS = 10.0


class Progress:
    """A progress indicator on stderr with the rate and the time left: a bar redrawn in place on a
    terminal, else one line every ``LOG_EVERY_SECONDS``; always a last line with the total time."""

    def __init__(self, label: str, unit: str = "", stream: TextIO | None = None) -> None:
        self.label, self.unit = label, unit
        self.stream = stream or sys.stderr
        self.started = time.perf_counter()
        self.interactive = self.stream.isatty()
        self._logged = self.started

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        elapsed = now - self.started
        if done >= total:
            rate = f" ({done / elapsed:.1f}{self._per()}/s)" if elapsed > 0 and done else ""
            line = f"{self.label}: {total} done in {elapsed:.1f}s{rate}"
            self.stream.write(f"\r{line}{' ' * 20}\n" if self.interactive else f"{line}\n")
        elif self.interactive:
            filled = int(30 * done / max(total, 1))
            self.stream.write(
                f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}{self._pace(done, total, elapsed)}"
            )
        elif now - self._logged >= LOG_EVERY_SECONDS:
            self._logged = now
            self.stream.write(f"{self.label}: {done}/{total}{self._pace(done, total, elapsed)}\n")
        self.stream.flush()

    def _per(self) -> str:
        return f" {self.unit}" if self.unit else ""

    def _pace(self, done: int, total: int, elapsed: float) -> str:
        """ ", 12.3 queries/s, 41s left" once something is done."""
        if done <= 0 or elapsed <= 0:
            return ""
        rate = done / elapsed
        return f", {rate:.1f}{self._per()}/s, {format_seconds((total - done) / rate)} left"


def format_seconds(value: float) -> str:
    """``41s``, ``3m05s``, ``1h02m``."""
    seconds = max(round(value), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
