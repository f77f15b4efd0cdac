"""Joining a Ray cluster in bounded time: an address where nothing answers, one that accepts and
never answers, and a local Ray that cannot start each end in one line, never on the caller's loop.

Each case runs in a fresh process: this one may be connected to the test cluster already.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests" / "support")]),
    "RAY_USAGE_STATS_ENABLED": "0",
}
ENV.pop("RAY_ADDRESS", None)
#: Where Ray cannot make its temp folder (a file stands in the way): a local Ray fails to start.
UNUSABLE_TMPDIR = {"RAY_TMPDIR": str(Path(__file__).resolve() / "ray")}


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``argv`` in a fresh process (bounded: a hang fails the test)."""
    return subprocess.run(
        argv, env={**ENV, **(env or {})}, capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "vlm_envs.cli", *args]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never says a word (ray.init waits on it for minutes)."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    for conn in held:
        conn.close()


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (
            ["make-dataset", "sokoban", "-n", "2", "--ray"],
            {"RAY_ADDRESS": "127.0.0.1:1"},
            "make-dataset 'sokoban' --ray: could not join the Ray cluster at 127.0.0.1:1 (from RAY_ADDRESS): "
            "nothing answers there",
        ),
        (
            ["eval", "sokoban", "--policy", "oracle", "-n", "2", "--ray", "127.0.0.1:1"],
            {},
            "--ray: could not join the Ray cluster at 127.0.0.1:1: nothing answers there",
        ),
        (
            ["make-dataset", "sokoban", "-n", "2", "--ray"],
            UNUSABLE_TMPDIR,
            "make-dataset 'sokoban' --ray: could not join or start a local Ray cluster: NotADirectoryError",
        ),
        (
            ["eval", "sokoban", "--policy", "oracle", "-n", "2", "--ray"],
            UNUSABLE_TMPDIR,
            "--ray: could not join or start a local Ray cluster: NotADirectoryError",
        ),
    ],
    ids=["dataset-unreachable", "eval-unreachable", "dataset-no-local-ray", "eval-no-local-ray"],
)
def test_a_cluster_that_cannot_be_joined_is_one_line_and_exit_code_2(
    argv: list[str], env: dict[str, str], expected: str, tmp_path: Path
) -> None:
    out = tmp_path / ("x.parquet" if argv[0] == "make-dataset" else "run")
    start = time.monotonic()
    done = run(cli(*argv, "--out", str(out)), env)
    took, code, err = time.monotonic() - start, done.returncode, done.stderr
    assert code == 2 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "vlm-envs" in line]
    assert len(lines) == 1 and lines[0].startswith("vlm-envs: error: ") and expected in lines[0], err
    assert "Failed to connect to GCS" not in err and "SIGTERM" not in err
    assert took < 60  # before: 3.5 min of Ray's retries for make-dataset, over 10 min for eval
    assert not out.exists()


POOL_ON_A_SILENT_ADDRESS = """
import asyncio, sys, time
from vlm_envs.rollout.executors.ray_workers import RayEpisodeWorkers
from vlm_envs.rollout.executors.worker_process import EpisodeJob

async def main(address):
    ticks = 0

    async def tick():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    ticker = asyncio.ensure_future(tick())
    start = time.monotonic()
    pool = RayEpisodeWorkers(1, None, None, address=address, join_timeout_s=3)
    traj = await asyncio.wait_for(pool.run(EpisodeJob("sokoban")), 60)
    took = time.monotonic() - start
    ticker.cancel()
    print(traj.status.name, took, ticks, traj.error, sep="|")

asyncio.run(main(sys.argv[1]))
"""


@pytest.mark.parametrize("where", ["silent", "refused"])
def test_the_pool_joins_off_the_callers_loop_and_fails_in_bounded_time(where: str, silent_port: int) -> None:
    """The slime hook's ``vlm_envs_ray_address``: before, ray.init ran on the trainer's event loop
    and held it for minutes; now the episode ends FAILED within the join's bound and the loop turns
    meanwhile."""
    address = f"127.0.0.1:{silent_port}" if where == "silent" else "127.0.0.1:1"
    done = run([sys.executable, "-c", POOL_ON_A_SILENT_ADDRESS, address])
    assert done.returncode == 0, done.stderr
    status, took, ticks, error = done.stdout.strip().splitlines()[-1].split("|")
    assert status == "FAILED", done.stdout
    if where == "silent":
        assert f"could not join the Ray cluster at {address}: no answer within 3 s" in error
        assert 2.5 < float(took) < 30 and int(ticks) > 20  # the loop turned while the join waited
    else:
        assert "nothing answers there" in error and float(took) < 30


def test_a_local_ray_started_for_the_build_lives_until_the_build_is_done() -> None:
    """No cluster anywhere: ``--ray`` starts a local one (ray.init off the main thread, whose end
    would take the cluster's processes with it) and builds on it."""
    temp = Path(tempfile.mkdtemp(prefix="vr"))  # short: Ray's socket paths live under it
    try:
        out = temp / "x.parquet"
        done = run(
            cli("make-dataset", "sokoban", "-n", "40", "--out", str(out), "--ray"), {"RAY_TMPDIR": str(temp)}
        )
        assert done.returncode == 0, done.stderr
        assert "built on Ray: " in done.stdout and out.exists()
    finally:
        shutil.rmtree(temp, ignore_errors=True)
