"""``vlm-envs play``: a person plays an env in the terminal; typed lines go through the real ``step``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, TextIO

from vlm_envs.imaging import lossless_png
from vlm_envs.protocol import Env, Observation

HELP = "Type your response and press Enter (:q quits, :help shows this)."


@dataclasses.dataclass
class PlaySession:
    """One terminal episode: reads responses from ``stdin``, writes the env's side to ``stdout``."""

    env: Env
    stdin: TextIO
    stdout: TextIO
    frames_dir: Path | None = None
    wrap: str | None = None  # wrap each typed line in <wrap>...</wrap>

    def _say(self, text: str = "") -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def _show(self, obs: Observation, turn: int) -> None:
        names = []
        for i, image in enumerate(obs.images):
            if self.frames_dir is not None:
                path = self.frames_dir / f"turn{turn:03d}_{i}.png"
                path.write_bytes(lossless_png(image))
                names.append(f"[image {i + 1}: {path}]")
            else:
                names.append(f"[image {i + 1}: {image.width}x{image.height}, --save-frames DIR keeps it]")
        shown = iter(names)
        pieces = [p["text"].strip("\n") if p["type"] == "text" else next(shown) for p in obs.parts()]
        text = "\n".join(piece for piece in pieces if piece)
        self._say(f"--- {obs.role} ---\n{text}")
        view = getattr(self.env, "ascii", None)
        if obs.images and callable(view):  # a text view of what the picture shows
            self._say(f"(text view)\n{view()}")

    def _read(self) -> str | None:
        while True:
            self.stdout.write("> ")
            self.stdout.flush()
            line = self.stdin.readline()
            if not line or line.strip() in (":q", ":quit"):
                return None
            line = line.rstrip("\n")
            if line.strip() == ":help":
                self._say(HELP)
                continue
            return f"<{self.wrap}>{line}</{self.wrap}>" if self.wrap else line

    def run(self, seed: int | None) -> dict[str, Any]:
        """Play until the episode ends or the player quits; returns the outcome."""
        if self.frames_dir is not None:
            self.frames_dir.mkdir(parents=True, exist_ok=True)
        obs, _ = self.env.reset(seed=seed)
        self._say(HELP)
        self._show(obs, 0)
        turn, done = 0, False
        while not done:
            response = self._read()
            if response is None:
                break
            turn += 1
            obs, done, step = self.env.step(response)
            metrics = ", ".join(f"{k}={v}" for k, v in step.metrics.items())
            self._say(f"reward {step.reward:g}; {metrics}")
            self._show(obs, turn)
        reward = float(self.env.episode_reward())
        self._say(f"Episode {'over' if done else 'stopped'} after {turn} turn(s): episode reward {reward:g}")
        return {"turns": turn, "done": done, "reward": reward}
