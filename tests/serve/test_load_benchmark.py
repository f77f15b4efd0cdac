"""``benchmarks/serve_load.py`` runs as its docstring says, in a tiny setting, with no failed request on
any server it compares: ours and OpenEnv's own (one process, ``uvicorn --workers 2``), so the comparison
cannot break silently (OpenEnv's observation model once refused a field ours gained, and every OpenEnv
request failed while the table still printed)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openenv")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "serve_load.py"
TINY = ["--sessions", "2", "--steps", "2", "--min-steps", "4", "--rounds", "1", "--workers", "1"]
ROW = re.compile(r"^\| ([^|]+?) \| 2 \| (\d+) \| (\d+) \|", re.M)


def test_the_load_benchmark_compares_every_server_without_a_failed_request() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), *TINY], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {name: (int(steps), int(failed)) for name, steps, failed in ROW.findall(done.stdout)}
    assert {"OpenEnv create_app, 1 process", "OpenEnv create_app, uvicorn --workers 2"} <= set(rows), (
        done.stdout
    )
    assert any(name.startswith("vlm-envs serve") for name in rows), done.stdout
    assert all(steps >= 4 and failed == 0 for steps, failed in rows.values()), rows
