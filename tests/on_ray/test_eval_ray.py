"""``vlm-envs eval --ray`` on a real two-node cluster: the same records as a local run, the sglang
policy on actors, and a driver killed with SIGKILL then resumed with nothing lost or repeated."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray

from vlm_envs.cli import main
from vlm_envs.eval import EvalConfig, PolicyOptions
from vlm_envs.eval.config import RayPlacement
from vlm_envs.eval.ray_episodes import RayEpisodes
from vlm_envs.testing import Fault, SGLangTestServer, build_tiny_tokenizer

ROOT = Path(__file__).resolve().parents[2]
#: Per actor: small, the two one-CPU nodes are shared with the other Ray tests' pools.
ACTORS = ["--actors", "2", "--actor-cpus", "0.25"]
SOKOBAN_TEXT = ["--config", "render_mode=text", "--max-turns", "2", "--max-tokens", "6"]


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def frames(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "frames").rglob("*.png"))}


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("tokenizer")
    build_tiny_tokenizer().save_pretrained(path)
    return str(path)


def test_oracle_records_on_actors_equal_the_local_run(ray_cluster: str, tmp_path: Path) -> None:
    argv = ["eval", "sokoban", "--policy", "oracle", "-n", "6", "--quiet", "--concurrency", "3"]
    local, remote = tmp_path / "local", tmp_path / "ray"
    assert main([*argv, "--out", str(local)]) == 0
    assert main([*argv, "--out", str(remote), "--ray", ray_cluster, *ACTORS]) == 0
    by_episode = [sorted(records(out), key=lambda r: r["episode"]) for out in (local, remote)]
    assert by_episode[0] == by_episode[1] and len(by_episode[0]) == 6
    assert all(r["success"] for r in by_episode[1])
    assert frames(local) == frames(remote) and frames(remote)  # the driver wrote the actors' PNGs


def test_the_sglang_policy_on_actors_plays_as_locally(
    ray_cluster: str, sglang_server: SGLangTestServer, tokenizer_dir: str, tmp_path: Path
) -> None:
    argv = ["eval", "sokoban", "--policy", f"sglang:{sglang_server.url}", "--tokenizer", tokenizer_dir]
    argv += [*SOKOBAN_TEXT, "-n", "4", "--quiet"]
    sglang_server.requests.clear()
    remote, local = tmp_path / "ray", tmp_path / "local"
    assert main([*argv, "--out", str(remote), "--ray", ray_cluster, *ACTORS]) == 0
    played = sorted(records(remote), key=lambda r: r["episode"])
    assert [r["status"] for r in played] != [] and all(r["status"] != "failed" for r in played), played
    assert len(sglang_server.requests) == sum(r["num_turns"] for r in played)
    assert main([*argv, "--out", str(local)]) == 0
    assert played == sorted(records(local), key=lambda r: r["episode"])  # greedy: the same replies


def test_a_killed_actor_fails_its_episodes_with_the_cause_and_is_replaced(
    ray_cluster: str, sglang_server: SGLangTestServer, tokenizer_dir: str, tmp_path: Path
) -> None:
    url = sglang_server.url
    config = EvalConfig(
        env="sokoban",
        policy=f"sglang:{url}",
        n=6,
        out=tmp_path,
        max_turns=2,
        env_config={"render_mode": "text"},
        options=PolicyOptions(tokenizer=tokenizer_dir, max_tokens=6),
        ray=RayPlacement(actors=2, actor_cpus=0.25),
    )
    runner = RayEpisodes(config, f"sglang:{url}")

    async def play() -> tuple[list, list, bool]:
        await runner.start()
        try:
            sglang_server.inject(Fault("delay", seconds=1.0), times=100)
            # fewest in flight first: episodes 0 and 2 go to actor 0, 1 and 3 to actor 1
            tasks = [asyncio.ensure_future(runner.play(i)) for i in range(4)]
            await asyncio.sleep(0.5)
            killed = runner._actors[0]
            ray.kill(killed)
            first = await asyncio.wait_for(asyncio.gather(*tasks), 120)
            replaced = runner._actors[0] is not killed
            sglang_server.clear_faults()
            # episode 4 goes to the replacement in slot 0
            again = await asyncio.wait_for(asyncio.gather(runner.play(4), runner.play(5)), 120)
            return first, again, replaced
        finally:
            sglang_server.clear_faults()
            await runner.close()

    first, again, replaced = asyncio.run(play())
    assert [f.index for f in first] == [0, 1, 2, 3] and [f.record["episode"] for f in first] == [0, 1, 2, 3]
    for lost in (first[0], first[2]):
        assert lost.record["status"] == "failed" and "ActorDiedError" in lost.record["error"]
        assert lost.record["seed"] == lost.index and lost.record["reward"] == 0.0
    assert all(f.record["status"] != "failed" for f in (first[1], first[3], *again)), [
        f.record for f in again
    ]
    assert replaced


def _free_cpus() -> float:
    return ray.available_resources().get("CPU", 0.0)


def _settled_free_cpus(timeout: float = 30.0) -> float:
    """Free CPUs once actors killed by earlier runs have given theirs back (no change for 2 s)."""
    deadline, last, since = time.monotonic() + timeout, _free_cpus(), time.monotonic()
    while time.monotonic() - since < 2.0 and time.monotonic() < deadline:
        time.sleep(0.25)
        now = _free_cpus()
        if now != last:
            last, since = now, time.monotonic()
    return last


def test_a_driver_killed_mid_run_resumes_with_nothing_lost_or_repeated(
    ray_cluster: str, sglang_server: SGLangTestServer, tokenizer_dir: str, tmp_path: Path
) -> None:
    n, out = 40, tmp_path / "killed"
    argv = ["eval", "sokoban", "--policy", f"sglang:{sglang_server.url}", "--tokenizer", tokenizer_dir]
    argv += [*SOKOBAN_TEXT, "-n", str(n), "--concurrency", "4", "--out", str(out), "--quiet"]
    argv += ["--ray", ray_cluster, *ACTORS]
    idle = _settled_free_cpus()
    sglang_server.inject(Fault("delay", seconds=0.3), times=10_000)  # a slow model: the kill lands mid-run
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests" / "support")])}
    driver = subprocess.Popen([sys.executable, "-m", "vlm_envs.cli", *argv], env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 240
        results = out / "results.jsonl"
        while not (results.exists() and results.read_bytes().count(b"\n") >= 3):
            assert driver.poll() is None, f"the driver ended early with {driver.returncode}"
            assert time.monotonic() < deadline, "no results within 240 s"
            time.sleep(0.2)
        assert _free_cpus() <= idle - 0.5 + 1e-9  # its two actors hold their CPUs
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(30)
        sglang_server.clear_faults()
    before = results.read_bytes().count(b"\n")
    assert 3 <= before < n
    deadline = time.monotonic() + 60  # the killed driver's actors die with it, giving their CPUs back
    while _free_cpus() < idle - 1e-9:
        assert time.monotonic() < deadline, f"actors outlived their driver: {ray.available_resources()}"
        time.sleep(0.5)

    assert main([*argv, "--resume"]) == 0
    episodes = [r["episode"] for r in records(out)]
    assert sorted(episodes) == list(range(n))  # every episode exactly once: 0 lost, 0 repeated
    assert json.loads((out / "summary.json").read_text())["episodes"] == n


def test_actors_the_cluster_cannot_hold_are_one_line_and_exit_code_2(
    ray_cluster: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two one-CPU nodes, two actors of two CPUs: refused at once (before: 300 s of waiting)."""
    argv = ["eval", "sokoban", "--policy", "oracle", "-n", "2", "--quiet", "--out", str(tmp_path / "run")]
    start = time.monotonic()
    assert main([*argv, "--ray", ray_cluster, "--actors", "2", "--actor-cpus", "2"]) == 2
    assert time.monotonic() - start < 60
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(
        "vlm-envs: error: --ray: Ray actors asking CPU=2 each: 2 wanted, the cluster has room"
    )
    assert (
        "for 0 (its 2 alive node(s) have CPU=2 in all, at most CPU=1 on one); ask for fewer --actors" in line
    )
