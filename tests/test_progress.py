"""Long work is never silent: the rate and the time left, on a terminal and in logs."""

import io

from sk_toolfilter.basics import progress as progress_module
from sk_toolfilter.basics.progress import Progress, format_seconds


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_without_a_terminal_a_line_with_rate_and_time_left_comes_at_most_every_interval(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "perf_counter", clock)
    out = io.StringIO()
    bar = Progress("report queries", unit="queries", stream=out)
    for done in range(1, 51):
        clock.now = done * 0.5  # 2 queries per second
        bar(done, 50)
    lines = out.getvalue().strip().splitlines()
    assert lines[0] == "report queries: 20/50, 2.0 queries/s, 15s left"  # first line after 10 s
    assert lines[1] == "report queries: 40/50, 2.0 queries/s, 5s left"
    assert lines[-1].strip() == "report queries: 50 done in 25.0s (2.0 queries/s)"
    assert len(lines) == 3


def test_time_left_reads_naturally():
    assert [format_seconds(s) for s in (0, 41, 185, 3720)] == ["0s", "41s", "3m05s", "1h02m"]
