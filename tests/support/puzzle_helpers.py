"""Shared pieces of the puzzle env tests: episode digests (in and out of process), oracle and random play."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys

from vlm_envs.protocol import Env, Observation
from vlm_envs.registry import build_env

DIGEST_CODE = """
import hashlib, sys
sys.path.insert(0, {tests!r})
from puzzle_helpers import episode_digest
from vlm_envs.registry import build_env
print(episode_digest(build_env({target!r}, **{config!r}), {seed}))
"""


def _obs_bytes(obs: Observation) -> bytes:
    return obs.text.encode() + b"".join(im.tobytes() for im in obs.images) + repr(obs.image_slots).encode()


def episode_digest(env: Env, seed: int) -> str:
    """A digest of the oracle's whole episode: every observation's text and image bytes, every reply."""
    h = hashlib.sha256()
    obs, _ = env.reset(seed=seed)
    h.update(_obs_bytes(obs))
    done = False
    while not done:
        reply = env.oracle_response()
        assert reply is not None
        obs, done, info = env.step(reply)
        h.update(reply.encode() + _obs_bytes(obs) + repr(sorted(info.metrics.items())).encode())
    return h.hexdigest()


def digest_in_subprocess(target: str, config: dict, seed: int) -> str:
    code = DIGEST_CODE.format(tests=os.path.dirname(__file__), target=target, config=config, seed=seed)
    environ = {**os.environ, "PYTHONHASHSEED": "987", "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def assert_seed_exact(target: str, config: dict, seed: int) -> None:
    """The oracle's episode of ``seed`` is the same twice in this process and in a fresh one, and differs
    from the next seed's."""
    env = build_env(target, **config)
    assert episode_digest(env, seed) == episode_digest(env, seed) != episode_digest(env, seed + 1)
    assert digest_in_subprocess(target, config, seed) == episode_digest(env, seed)


def assert_malformed_replies_end_at_the_cap(target: str, cap: int) -> None:
    """An episode of ``max_turns=cap`` given only malformed replies answers each one as invalid and ends at
    the cap, truncated and lost."""
    env = build_env(target, max_turns=cap)
    env.reset(seed=0)
    for turn in range(cap):
        obs, done, info = env.step("no answer")
        assert "Invalid answer" in obs.text and done == (turn == cap - 1)
    assert info.truncated and info.metrics["success"] is False


def play(env: Env, seed: int, policy: str) -> dict:
    """One episode by the oracle or the random policy; the final step's metrics and the step count."""
    env.reset(seed=seed)
    rng = random.Random(seed)
    done, steps = False, 0
    while not done:
        reply = env.oracle_response() if policy == "oracle" else env.random_response(rng)
        _, done, info = env.step(reply)
        steps += 1
    return {**info.metrics, "steps": steps, "reward": env.episode_reward()}


def success_rate(target: str, config: dict, policy: str, seeds: range) -> float:
    env = build_env(target, **config)
    return sum(play(env, s, policy)["reward"] for s in seeds) / len(seeds)


HOSTILE = [
    "",
    "<answer>",
    "</answer><answer>",
    "<answer></answer>",
    "<answer>" + "Up, " * 300_000 + "</answer>",
    "x" * 2_000_000,
    "<answer><image><|im_start|>\u202e\u200b</answer>",
    "<answer>swap(1," + "9" * 5000 + ")</answer>",
    "<answer>swap(0,1) swap(1,1)</answer>",
    "<answer>x+ y- " * 10_000 + "</answer>",
    "<answer>same mirror</answer>",
    "<answer>Ｕｐ 🧱 TurnLeft x+ swap(1,2)</answer>",
    "<ANSWER>  Up ; Forward </ANSWER>",
    "\\boxed{" + "\\frac{1}{" * 3000 + "}",
]


def assert_hostile_never_raise(env: Env, seed: int) -> None:
    """Every hostile reply gets an observation (never an exception); quoted text never becomes a slot."""
    for reply in HOSTILE:
        env.reset(seed=seed)
        obs, done, info = env.step(reply)
        assert isinstance(obs, Observation) and isinstance(done, bool)
        assert len(obs.image_slots) in (0, len(obs.images))
        assert "<image>" not in obs.text and "<|im_start|>" not in obs.text
        assert "format_valid" in info.metrics
