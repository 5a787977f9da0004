"""State several processes share (the co-usage file) is merged on write, never lost."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from sk_toolfilter.selection.co_usage import CoUsage, CoUsageFile
from sk_toolfilter.selection.turns import Turn

ROOT = Path(__file__).resolve().parents[1]

REPLICA = textwrap.dedent(
    """
    import sys
    from sk_toolfilter.selection.co_usage import CoUsage, CoUsageFile
    from sk_toolfilter.selection.turns import Turn

    path, name, go = sys.argv[1], sys.argv[2], sys.argv[3]
    while not __import__("os").path.exists(go):  # both replicas start writing together
        pass
    learned, store = CoUsage(), CoUsageFile(path, every_seconds=0)
    for i in range(50):
        learned.count([Turn(f"{name} request {i}", [f"{name}-open", f"{name}-tool_{i % 7}"])])
        store.changed(learned)  # no event loop: written (merged) at once, 50 writes per replica
    store.flush(learned)
    print(len(learned.turns()))
    """
)


def test_two_replicas_on_one_co_usage_file_keep_both_replicas_turns(tmp_path):
    path, go = tmp_path / "co_usage.json", tmp_path / "go"
    replicas = [
        subprocess.Popen(
            [sys.executable, "-c", REPLICA, str(path), name, str(go)], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        for name in ("A", "B")
    ]
    go.touch()
    for replica in replicas:
        out, _ = replica.communicate(timeout=300)
        assert replica.returncode == 0
        assert int(out.strip()) >= 50  # each learned its own 50 (and whatever the other had written)
    turns = json.loads(path.read_text())["turns"]
    assert len(turns) == 100
    assert {calls[0] for _, calls in turns} == {"A-open", "B-open"}
    restored = CoUsage()
    assert CoUsageFile(path).load_into(restored) == 100


def test_a_deeply_nested_co_usage_file_starts_empty_with_one_warning(tmp_path, caplog):
    path = tmp_path / "co_usage.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    learned = CoUsage()
    assert CoUsageFile(path).load_into(learned) == 0
    assert "nested too deeply" in caplog.text and str(path) in caplog.text
    learned.count([Turn("lock the doors", ["Car-lock", "Car-brake"])])
    store = CoUsageFile(path, every_seconds=0)
    store.changed(learned)
    assert json.loads(path.read_text())["turns"][0][1] == ["Car-lock", "Car-brake"]
