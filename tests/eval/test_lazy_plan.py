"""An eval plans its episodes as it goes: a huge ``-n`` costs no memory before the first episode."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vlm_envs.eval import EvalConfig, run_eval
from vlm_envs.eval.policies import RandomPolicy
from vlm_envs.eval.records import EpisodeResult
from vlm_envs.protocol import Env


class _TaskCounter(RandomPolicy):
    """The random policy, noting how many asyncio tasks exist while each episode plays."""

    def __init__(self) -> None:
        self.tasks: list[int] = []

    async def play(self, env: Env, seed: int, max_turns: int) -> EpisodeResult:
        self.tasks.append(len(asyncio.all_tasks()))
        return await super().play(env, seed, max_turns)


def test_tasks_alive_are_bounded_by_concurrency_not_by_n(tmp_path: Path) -> None:
    policy = _TaskCounter()
    config = EvalConfig(
        env="toyenvs.guess:GuessEnv", policy="random", n=300, out=tmp_path / "r", concurrency=3
    )
    summary = run_eval(config, policy=policy)
    assert summary["episodes"] == 300 and len(policy.tasks) == 300
    assert max(policy.tasks) <= 3 + 1, max(policy.tasks)  # the players and the run itself


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.timeout(120)
def test_five_million_episodes_start_at_once_in_little_memory(tmp_path: Path) -> None:
    out = tmp_path / "big"
    cmd = [sys.executable, "-m", "vlm_envs.cli", "eval", "toyenvs.guess:GuessEnv", "--policy", "random"]
    cmd += ["-n", "5000000", "--out", str(out), "--quiet"]
    support = str(Path(__file__).parents[1] / "support")  # toyenvs
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [support, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        results = out / "results.jsonl"
        deadline = time.monotonic() + 60  # a hang before the first episode is the defect
        while time.monotonic() < deadline and proc.poll() is None:
            if results.exists() and results.read_bytes().count(b"\n") >= 20:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert results.read_bytes().count(b"\n") >= 20
        assert _rss_mib(proc.pid) < 400  # about 6 GiB when every episode was planned up front
        assert json.loads((out / "run.json").read_text())["n"] == 5_000_000
    finally:
        proc.kill()
        proc.wait()
        if proc.stderr:
            proc.stderr.close()
