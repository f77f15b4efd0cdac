"""A slime-shaped env with an image every turn (the shape of slime's BaseInteractionEnv, not ours).

Duck-typed, no vlm_envs import: ``reset(seed=None)`` returns an observation dict with an image under
``multi_modal_data["image"]``; each ``step`` shows a new square and asks for its colour;
``format_observation`` is a method putting the images before the text; no episode reward.
"""

from __future__ import annotations

import random
import re
from typing import Any

from PIL import Image

COLORS = {"red": (220, 40, 40), "green": (40, 180, 60), "blue": (40, 80, 220)}
ANSWER_RE = re.compile(r"<answer>\s*([a-z]{1,16})\s*</answer>")
SIZE = 56


class ColorTurnsEnv:
    """Name the colour of the square; a new square every turn."""

    def __init__(self, max_turns: int) -> None:
        self.max_turns = max_turns
        self.rng = random.Random(0)
        self.turn, self.color, self.right = 0, "red", 0

    def _frame(self) -> dict[str, Any]:
        self.color = self.rng.choice(sorted(COLORS))
        image = Image.new("RGB", (SIZE, SIZE), (255, 255, 255))
        image.paste(COLORS[self.color], (8, 8, 8 + SIZE // 2, 8 + SIZE // 2))
        text = f"Turn {self.turn + 1}: what colour is the square? Reply <answer>colour</answer>."
        return {"obs_str": text, "role": "user", "multi_modal_data": {"image": [image]}}

    def reset(self, seed: int | None = None):
        self.rng = random.Random(seed)
        self.turn, self.right = 0, 0
        return self._frame(), {"first_color": self.color}

    def step(self, response_text: str):
        found = ANSWER_RE.findall(response_text[-2048:].lower())
        correct = bool(found) and found[-1] == self.color
        self.turn += 1
        self.right += correct
        info = {"correct": correct, "format_ok": bool(found), "right_so_far": self.right, "was": self.color}
        return self._frame(), self.turn >= self.max_turns, info

    def format_observation(self, observation: dict) -> dict:
        content: list[dict[str, Any]] = [
            {"type": "image", "image": im}
            for ims in (observation.get("multi_modal_data") or {}).values()
            for im in ims
        ]
        content.append({"type": "text", "text": observation.get("obs_str", "")})
        return {"role": observation.get("role", "user"), "content": content}

    def close(self) -> None:
        pass


def build_env(sample: Any = None, args: Any = None, **_: Any) -> ColorTurnsEnv:
    return ColorTurnsEnv(args.max_turns or 3)
