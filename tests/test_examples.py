"""The README's runnable example works as documented (offline)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_example(name: str, tmp_path) -> list[str]:
    """The lines an example prints, run as a user would (a fresh process, a private cache)."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={"SK_TOOLFILTER_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_quickstart_example_runs_and_filters_the_wire(tmp_path):
    lines = run_example("quickstart.py", tmp_path)
    assert lines[0].startswith("['Time-current_time'")
    assert "'Math-convert_units'" in lines[1]
    assert lines[2].startswith("tools on the wire: ['Text-reverse_text'")


def test_agent_framework_example_runs_and_filters_every_model_call(tmp_path):
    lines = run_example("agent_framework_quickstart.py", tmp_path)
    assert lines[0] == "It arrives Friday."
    for line in lines[1:3]:
        assert "'track_package'" in line and "'send_email'" not in line and "'get_weather'" not in line


def test_the_bfcl_example_runs_from_a_clone_with_the_data_it_ships(tmp_path):
    """examples/bfcl_catalog.yaml and examples/data/bfcl (source, commit and licence in its README)."""
    import json

    from sk_toolfilter.cli import main

    examples = Path(__file__).resolve().parents[1] / "examples"
    assert "Apache-2.0" in (examples / "data" / "bfcl" / "README.md").read_text()
    argv = ["report", str(examples / "bfcl_catalog.yaml"), "--queries", str(examples / "data" / "bfcl" / "dev.jsonl")]
    assert main([*argv, "--limit", "3", "--out", str(tmp_path / "r")]) == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["catalog_size"] == 1287 and len(report["queries"]) == 3
