"""``benchmarks/trl_learning.py`` runs as its docstring says, in its smallest setting (seconds), so it
cannot break silently again (its rows once named the env by file path, which TRL's carrier refuses:
every episode FAILED and success stayed at 0). The benchmark stops on any failed episode."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "trl_learning.py"
SMALLEST = ["--minutes", "0", "--sft-steps", "1", "--episodes", "8", "--threads", "1"]
ROW = re.compile(r"^\| (GRPO[^|]*) \| (\d+) \| \d+ \| ([\d.]+)% \| ([\d.]+)% \| [+-][\d.]+ \|$", re.M)


def test_the_learning_benchmark_runs_its_smallest_setting() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *SMALLEST], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {
        name: (int(steps), float(before), float(after))
        for name, steps, before, after in ROW.findall(done.stdout)
    }
    assert set(rows) == {"GRPO", "GRPO, advantages' sign flipped"}, done.stdout[-2000:]
    assert all(steps >= 1 for steps, _, _ in rows.values())
    assert all(0 <= before <= 100 and 0 <= after <= 100 for _, before, after in rows.values())
    assert "success over 8 held-out episodes" in done.stdout
