"""The ``random`` baseline draws from its own stream, never the env's ``random.Random(seed)``."""

from __future__ import annotations

import json
import random
from pathlib import Path

from vlm_envs.cli import main
from vlm_envs.eval.policies import policy_rng


def _run(out: Path, n: int, seed: int = 0) -> list[dict]:
    argv = ["eval", "toyenvs.guess:GuessEnv", "--policy", "random", "-n", str(n), "--seed", str(seed)]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    return sorted((json.loads(line) for line in lines), key=lambda r: r["episode"])


def test_random_policy_scores_chance_on_an_env_that_draws_its_task_from_random_random(tmp_path: Path) -> None:
    records = _run(tmp_path / "guess", 300)
    summary = json.loads((tmp_path / "guess" / "summary.json").read_text())
    # a blind guess among 3 succeeds 1/3 of the time; a policy rng equal to Random(seed) scored 100%
    assert 0.2 < summary["success_rate"] < 0.47, summary["success_rate"]
    assert {r["turns"][1]["model_text"] for r in records} == {"0", "1", "2"}


def test_random_policy_is_the_same_per_seed_in_every_run(tmp_path: Path) -> None:
    first, second = _run(tmp_path / "a", 20, seed=7), _run(tmp_path / "b", 20, seed=7)
    assert [r["turns"][1]["model_text"] for r in first] == [r["turns"][1]["model_text"] for r in second]
    assert [r["seed"] for r in first] == list(range(7, 27))


def test_policy_rng_depends_on_salt_and_seed_and_not_on_the_env_stream() -> None:
    draws = [policy_rng("vlm-envs random policy", s).random() for s in range(5)]
    assert draws == [policy_rng("vlm-envs random policy", s).random() for s in range(5)]
    assert len(set(draws)) == 5
    assert policy_rng("another salt", 3).random() != policy_rng("vlm-envs random policy", 3).random()
    assert all(
        policy_rng("vlm-envs random policy", s).random() != random.Random(s).random() for s in range(5)
    )
