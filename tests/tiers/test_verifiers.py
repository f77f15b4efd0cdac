"""The ``verifiers`` extra alone: docs/interop.md's ``load_environment(env="sokoban", num_examples=N,
**config)`` builds verifiers' own env, whose tasks are the env's seeds, each prompt the env's first
observation (its text and pixels) and system prompt. The ``verifiers`` tier (tests/tiers/run_tiers.py)
also runs tests/interop/test_verifiers.py: ``vf-eval`` playing episodes against a loopback server."""

from __future__ import annotations

import base64
import io

from PIL import Image
from readme_episode import CONFIG, SEED

from vlm_envs import build_env
from vlm_envs.interop.verifiers import VlmEnvsEnv, load_environment


def _pixels(image: Image.Image) -> tuple[tuple[int, int], bytes]:
    return image.size, image.convert("RGB").tobytes()


def _decoded(url: str) -> tuple[tuple[int, int], bytes]:
    assert url.startswith("data:image/png;base64,")
    return _pixels(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))


def test_load_environment_gives_the_envs_seeds_as_tasks() -> None:
    env = load_environment(env="sokoban", num_examples=SEED + 1, **CONFIG)
    assert isinstance(env, VlmEnvsEnv)
    tasks = list(env.taskset)
    assert [t.data.info for t in tasks] == [
        {"env": "sokoban", "seed": s, "config": CONFIG} for s in range(SEED + 1)
    ]
    for task in tasks:
        local = build_env("sokoban", **CONFIG)
        obs, _ = local.reset(seed=task.data.info["seed"])
        assert task.data.system_prompt == local.system_prompt()
        (message,) = task.data.prompt
        texts = [p.text for p in message.content if p.type == "text"]
        images = [_decoded(p.image_url.url) for p in message.content if p.type == "image_url"]
        assert "".join(texts) == obs.text
        assert images == [_pixels(image) for image in obs.images]
