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
