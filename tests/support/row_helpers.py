"""What the every-env trainer tests share: make-dataset's rows as each trainer reads them, and the
oracle's replies for the episode a row names (so the episode is won, whatever the env)."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from PIL import Image

from vlm_envs import build_env


def oracle_replies(env_name: str, seed: int | None, sample: Any = None, **env_config: Any) -> list[str]:
    """The oracle's reply at every turn of the episode (built from ``sample`` where the row's task is
    the sample itself, else from the env config), until the episode ends."""
    env = build_env(env_name, sample=sample, **env_config)
    try:
        env.reset(seed=seed)
        replies, done = [], False
        while not done:
            reply = env.oracle_response()
            assert reply is not None, f"{env_name} has no oracle reply"
            replies.append(reply)
            done = env.step(reply)[1]
        return replies
    finally:
        env.close()


def row_images(row: Mapping[str, Any]) -> list[Image.Image]:
    """A parquet row's ``images`` column (``datasets`` image dicts) as RGB images."""
    return [Image.open(io.BytesIO(image["bytes"])).convert("RGB") for image in row.get("images") or []]


def user_message(text: str, images: list[Image.Image]) -> list[dict[str, Any]]:
    """The conversation slime's Dataset builds for a row with --multimodal-keys (images, then text)."""
    parts = [*({"type": "image", "image": im} for im in images), {"type": "text", "text": text}]
    return [{"role": "user", "content": parts}]
