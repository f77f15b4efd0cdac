"""verifiers 0.4 (verifiers.v1) plays our envs: its own runner (vf-eval) against an OpenAI-compatible
server on loopback that plays the oracle; rewards 1, and every turn's request holds the in-process
env's images, pixel for pixel; a task's difficulty picks its episode; the player's limits are set
unless the run sets its own; what the taskset will play is checked when it loads, in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verifiers")

from oracle_server import Episode, OracleServer

from vlm_envs import build_env
from vlm_envs.interop.verifiers import PLAYER_LIMITS, VlmEnvsEnv, content, load_environment

EPISODES = 2


def vf_eval(env: str, server: OracleServer, out: Path, *options: str) -> list[dict]:
    """Run verifiers' own eval CLI on ``env`` against ``server``; the traces it wrote."""
    command = [
        str(Path(sys.executable).parent / "vf-eval"),
        "--env.taskset.id", "vlm-envs-verifiers",
        "--env.taskset.env", env,
        "--env.taskset.num-examples", str(EPISODES),
        *options,
        "-m", "oracle",
        "--client.base-url", server.url,
        "--no-push", "--no-rich",
        "-o", str(out),
    ]  # fmt: skip
    env_vars = {**os.environ, "PRIME_API_KEY": "unused"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env_vars, cwd=out.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    (traces,) = out.glob("*/traces.jsonl")
    return [trace for line in traces.read_text().splitlines() for trace in json.loads(line)["traces"]]


@pytest.mark.parametrize(
    ("env", "options", "config"),
    [
        ("sokoban", ["--env.taskset.difficulty", "hard"], {"difficulty": "hard"}),  # a reset option
        (
            "geo3k",
            ["--env.taskset.config", '{"max_turns": 3}', "--env.taskset.first-seed", "0"],
            {"max_turns": 3},
        ),
    ],
)
def test_vf_eval_plays_the_oracle_with_every_image(
    env: str, options: list, config: dict, tmp_path: Path
) -> None:
    episodes = [Episode(env, seed, config) for seed in range(EPISODES)]
    with OracleServer(episodes) as server:
        traces = vf_eval(env, server, tmp_path / "out", *options)
    assert len(traces) == EPISODES
    assert all(t["rewards"]["episode_reward"]["score"] == 1.0 and t["metrics"] for t in traces)
    assert all(t["ok"] and not t["errors"] for t in traces)
    limits = {**PLAYER_LIMITS, "timeout": {"rollout": PLAYER_LIMITS["timeout"].rollout}}
    assert all(t["agent"]["config"] | limits == t["agent"]["config"] for t in traces)
    assert {s.episode.seed for s in server.seen} == set(range(EPISODES))
    assert all(s.images_match for s in server.seen), [s for s in server.seen if not s.images_match]
    later = [s for s in server.seen if s.turn > 0]
    assert later, "no episode had a second turn"
    if env == "sokoban":  # an image every turn: each request holds all of them so far
        assert all(s.images == s.turn + 1 for s in server.seen)
    else:  # Geo3k's diagram in the prompt; its tool replies are text
        assert all(s.images == 1 for s in server.seen)


def test_load_environment_is_verifiers_own_env() -> None:
    env = load_environment(env="image_probe", num_examples=3, questions=2)
    assert isinstance(env, VlmEnvsEnv)
    tasks = list(env.taskset)
    assert [t.data.info for t in tasks] == [
        {"env": "image_probe", "seed": seed, "config": {"questions": 2}} for seed in range(3)
    ]
    parts = tasks[0].data.prompt[0].content
    assert [p.type for p in parts] == ["text", "image_url", "text"]
    assert parts[1].image_url.url.startswith("data:image/png;base64,")


def test_a_tasks_difficulty_picks_its_episode() -> None:
    """A mix shares the tasks out by seed as make-dataset does; each task's prompt is the episode of
    ``build_env(env, difficulty=level)`` for its seed (``VlmEnvsEnv.run`` resets it the same way)."""
    tasks = list(load_environment(env="sokoban", num_examples=4, difficulty="easy:0.5,hard:0.5").taskset)
    levels = [t.data.info["difficulty"] for t in tasks]
    assert sorted(levels) == ["easy", "easy", "hard", "hard"]
    for task in tasks:
        info = task.data.info
        obs, _ = build_env("sokoban", difficulty=info["difficulty"]).reset(info["seed"])
        assert task.data.prompt[0].content == content(obs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"env": "nope"}, "unknown env 'nope'"),
        ({"env": "image_probe", "colours": 2}, "unknown key 'colours'; valid keys: choices"),
        ({"env": "sokoban", "grid_size": "x"}, "grid_size"),
        ({"env": "sokoban", "first_seed": "3"}, "seed must be"),
        ({"env": "sokoban", "first_seed": -1}, "seed must be"),
        ({"env": "sokoban", "num_examples": "8"}, "num_examples must be"),
        ({"env": "sokoban", "difficulty": "easy:0.5,hard:0.5"}, "give num_examples too"),
        ({"env": "sokoban", "difficulty": "extreme", "num_examples": 2}, "'extreme' is not a level"),
    ],
)
def test_what_the_taskset_plays_is_checked_when_it_loads(kwargs: dict, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message) as refused:
        load_environment(**kwargs)  # not when the first task is drawn
    assert "\n" not in str(refused.value)
