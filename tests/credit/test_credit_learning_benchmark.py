"""``benchmarks/credit_learning.py``: its env passes ``check_env``, each method's advantages differ where they
should on hand-played walks, and the benchmark runs its smallest setting (seconds). Nothing here times a
run or asserts which method wins."""

from __future__ import annotations

import asyncio
import math
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from vlm_envs.checker import check_env
from vlm_envs.rollout import ChatCodec, EngineOutput, Status, Trajectory, run_episode
from vlm_envs.testing import build_tiny_processor

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from line_walk_env import LineWalkEnv

pytest.importorskip("trl")
pytest.importorskip("verl")
import credit_learning

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SMALLEST = ["--steps", "1", "--sft-steps", "1", "--episodes", "8", "--groups", "2", "--threads", "1"]
ROW = re.compile(
    r"^\| ([^|]+) \| (\d+) \| \d+ \| ([\d.]+)% \| ([\d.]+)% \| [+-][\d.]+ \| (\d+)% / (\d+)% "
    r"\| ([\d.]+)% \| ([\d.]+)% \|$",
    re.M,
)
GAP = re.compile(r"max \|diff\| ([\d.e+-]+)")
SEED = 5  # a start off the walls (asserted), so a move away from the goal moves


class Script:
    """An engine that answers each turn with the next of ``words`` and the end of the turn."""

    name = "scripted walk"

    def __init__(self, codec: ChatCodec, words: Sequence[str]) -> None:
        self.ids = {w: [*codec.tokenizer.encode(w), codec.end_of_turn_id] for w in ("Left", "Right")}
        self.words = list(words)

    async def generate(
        self, input_ids: Sequence[int], images: Sequence[Any], params: Mapping[str, Any]
    ) -> EngineOutput:
        ids = self.ids[self.words.pop(0)]
        return EngineOutput(token_ids=ids, log_probs=[-0.5] * len(ids), finish_reason="stop")


def walk(codec: ChatCodec, moves: str) -> Trajectory:
    """One episode of seed SEED played by ``moves``: ``t`` a move toward the goal, ``a`` away."""
    env = LineWalkEnv(distance=credit_learning.DISTANCE)
    _, info = env.reset(seed=SEED)
    assert 0 < info["start"] < env.config.length - 1
    toward = "Right" if info["goal"] > info["start"] else "Left"
    away = "Left" if toward == "Right" else "Right"
    engine = Script(codec, [toward if m == "t" else away for m in moves])
    return asyncio.run(run_episode(env, engine, codec, seed=SEED, config=credit_learning.EPISODE))


@pytest.fixture(scope="module")
def group() -> list[Trajectory]:
    codec = ChatCodec(build_tiny_processor())
    played = [walk(codec, moves) for moves in ("ttt", "atttt", "aaaaa", "tatat")]
    assert [t.status for t in played] == [Status.COMPLETED] * 2 + [Status.TRUNCATED] * 2
    assert [t.reward for t in played] == [1.0, 1.0, 0.0, 0.0]
    return played


def per_episode(method: str, group: list[Trajectory]) -> list[list[float]]:
    """``method``'s advantages of the group's turns, episode by episode."""
    samples, advantages = credit_learning.credit(method, [group])
    assert len(samples) == sum(len(t.turns) for t in group) and all(map(math.isfinite, advantages))
    out, at = [], 0
    for traj in group:
        out.append(advantages[at : at + len(traj.turns)])
        at += len(traj.turns)
    return out


def test_the_walk_passes_check_env() -> None:
    assert "state signals" in check_env(LineWalkEnv())


def test_episode_only_credit_gives_every_turn_its_episodes_advantage(group: list[Trajectory]) -> None:
    won, won_late, lost, lost_too = per_episode("episode", group)
    for turns in (won, won_late, lost, lost_too):
        assert len(set(turns)) == 1
    assert won[0] == won_late[0] > 0 > lost[0] == lost_too[0]


def test_gigpo_tells_apart_turns_from_the_same_state(group: list[Trajectory]) -> None:
    won, won_late, lost, lost_too = per_episode("gigpo", group)
    assert len(set(won_late)) > 1  # one episode, turns of different worth
    # the four first turns share the start state: the sooner the goal, the more; no goal, equal
    assert won[0] > won_late[0] and lost[0] == lost_too[0]
    assert won[0] > per_episode("episode", group)[0][0]


def test_shaping_credits_each_move_by_where_it_led(group: list[Trajectory]) -> None:
    _, _, _, zigzag = per_episode("shaping", group)  # toward, away, toward, away, toward
    assert zigzag[0] > zigzag[1] < zigzag[2] > zigzag[3] < zigzag[4]


def test_the_benchmark_runs_its_smallest_setting() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    script = BENCHMARKS / "credit_learning.py"
    done = subprocess.run(
        [sys.executable, str(script), *SMALLEST], capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {name: values for name, *values in ROW.findall(done.stdout)}
    assert list(rows) == list(credit_learning.METHODS.values()), done.stdout[-2000:]
    for steps, *rates in rows.values():
        assert steps == "1" and all(0 <= float(rate) <= 100 for rate in rates)
    assert len({values[1] for values in rows.values()}) == 1  # one "before" for all: the same weights
    assert "success over 8 held-out episodes" in done.stdout
    # the trainer's forward scores the rollout's tokens: fp32 log probs equal within numerics
    gap = GAP.search(done.stdout)
    assert gap is not None and float(gap.group(1)) < 1e-4, done.stdout[-2000:]
