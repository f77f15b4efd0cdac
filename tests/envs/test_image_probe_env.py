"""ImageProbe: each turn's answer is in that turn's image only, so a blind policy stays at chance."""

from __future__ import annotations

import random

import pytest

from vlm_envs import build_env
from vlm_envs.checker import check_env
from vlm_envs.envs.image_probe import COLORS, ImageProbeEnv


def play(env: ImageProbeEnv, seed: int, reply) -> tuple[list, float, dict]:
    obs, _ = env.reset(seed=seed)
    seen = [obs]
    done, step = False, None
    while not done:
        obs, done, step = env.step(reply(seen[-1]))
        seen.append(obs)
    return seen, env.episode_reward(), step.metrics


def looking(obs) -> str:
    """A policy that reads the image: the letter of the colour it shows."""
    rgb = obs.images[0].getpixel((0, 0))
    distance = [sum(abs(a - b) for a, b in zip(rgb, c, strict=True)) for _, c in COLORS]
    return "ABCDEF"[distance.index(min(distance))]


def test_the_answer_is_in_the_image_only() -> None:
    env = build_env("image_probe", questions=4, choices=3)
    seen, reward, metrics = play(env, 7, looking)
    assert reward == 1.0 and metrics == {
        "format_valid": True, "correct": True, "success": True, "accuracy": 1.0, "later_accuracy": 1.0
    }  # fmt: skip
    assert all(len(obs.images) == 1 for obs in seen[:-1]) and not seen[-1].images
    texts = {obs.text.split("\n", 1)[1] for obs in seen[1:-1]}  # after the Right/Wrong header
    colors = [COLORS[c][0] for c in env._ep.colors]
    assert not any(name in text for text in texts for name in colors)  # options only in the intro
    # the same seed and config give the same images, byte for byte
    again, _, _ = play(build_env("image_probe", questions=4, choices=3), 7, looking)
    assert [o.images[0].tobytes() for o in seen[:-1]] == [o.images[0].tobytes() for o in again[:-1]]


def test_a_blind_policy_stays_at_chance() -> None:
    env = build_env("image_probe", questions=5, choices=2)
    later = [play(env, seed, lambda obs: "<answer>A</answer>")[2]["later_accuracy"] for seed in range(400)]
    assert abs(sum(later) / len(later) - 0.5) < 0.05
    oracle = [play(env, seed, lambda obs: env.oracle_response())[1] for seed in range(20)]
    assert oracle == [1.0] * 20


@pytest.mark.parametrize(
    ("reply", "valid", "right"),
    [("A", True, True), ("red", True, True), ("<answer> b </answer>", True, False), ("Zebra", False, False),
     ("", False, False), ("<answer>A" * 5000, False, False), ("\x00<|image_pad|>", False, False)],
)  # fmt: skip
def test_replies(reply: str, valid: bool, right: bool) -> None:
    env = build_env("image_probe", choices=2)
    env.reset(seed=0)
    env._ep.colors[0] = 0  # red, option A
    obs, done, step = env.step(reply)
    assert step.metrics["format_valid"] is valid and step.metrics["correct"] is right
    assert step.reward == pytest.approx(1 / 3 if right else 0.0) and not done and len(obs.images) == 1


def test_presets_and_conformance() -> None:
    hard = build_env("image_probe", difficulty="hard")
    assert (hard.config.choices, hard.config.questions) == (6, 5)
    assert build_env("image_probe", difficulty="easy", questions=4).config.questions == 4
    cut = build_env("image_probe", questions=5, max_turns=2)
    seen, reward, metrics = play(cut, 0, looking)
    assert len(seen) == 3 and reward == 2 / 5 and metrics["accuracy"] == 1.0
    with pytest.raises(ValueError):
        build_env("image_probe", choices=7)
    check_env(build_env("image_probe"))
    env = build_env("image_probe")
    env.reset(seed=3)
    assert env.random_response(random.Random(0)) in ("<answer>A</answer>", "<answer>B</answer>")
