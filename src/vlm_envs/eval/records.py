"""What one evaluated episode holds, in memory and as one line of ``results.jsonl``.

Turn 0 is the env's first observation; turn ``k >= 1`` is the model's ``k``-th reply, the env's
verdict on it and the observation that followed. Images are written as PNG files under
``frames/`` and the record names them by path relative to the output folder.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from vlm_envs.imaging import lossless_png
from vlm_envs.plain_json import json_safe
from vlm_envs.protocol import Observation
from vlm_envs.state_signals import action_optimal

FRAMES_DIR = "frames"


@dataclasses.dataclass
class TurnResult:
    """One turn: the model's reply (``None`` for turn 0), the env's answer and the observation."""

    observation: Observation | None
    model_text: str | None = None
    reward: float = 0.0
    done: bool = False
    metrics: dict[str, float | int | bool] = dataclasses.field(default_factory=dict)
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    generated_tokens: int | None = None
    finish_reason: str | None = None
    #: The past turns (0-based) the model's context held under a windowed history; ``None``: all.
    context_turns: tuple[int, ...] | None = None
    #: Where the reply stood (:mod:`vlm_envs.state_signals`): the key and distance to the goal of the
    #: state it acted on, and the distance after it; ``None`` where the env does not say.
    state_key: str | None = None
    distance_to_goal: int | None = None
    next_distance_to_goal: int | None = None

    @property
    def action_optimal(self) -> bool | None:
        """Whether the reply lowered the distance to the goal by one."""
        return action_optimal(self.distance_to_goal, self.next_distance_to_goal)


@dataclasses.dataclass
class EpisodeResult:
    """A finished episode as a policy played it."""

    seed: int
    status: str  # completed, truncated, aborted or failed (the rollout's ``Status`` values)
    reward: float
    turns: list[TurnResult]
    error: str | None = None
    reset_info: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: Prompt + response tokens where the policy knows them (model policies), else ``None``.
    tokens: int | None = None
    generated_tokens: int | None = None

    @property
    def replies(self) -> list[TurnResult]:
        """The turns that hold a model reply (all but turn 0)."""
        return [t for t in self.turns if t.model_text is not None]

    def non_finite_metrics(self) -> dict[str, float]:
        """The metrics some reply reported as NaN or infinite (first value per name)."""
        found: dict[str, float] = {}
        for turn in self.replies:
            for name, value in turn.metrics.items():
                if isinstance(value, float) and not math.isfinite(value):
                    found.setdefault(name, value)
        return found

    @property
    def final_metrics(self) -> dict[str, float | int | bool]:
        """The metrics of the last reply (the env reports episode-level ones there)."""
        replies = self.replies
        return dict(replies[-1].metrics) if replies else {}

    @property
    def success(self) -> bool:
        """The env's ``success`` metric where it reports one, else a positive episode reward."""
        final = self.final_metrics
        return bool(final["success"]) if "success" in final else self.reward > 0


def frame_path(episode: int, turn: int, image: int) -> str:
    """Where image ``image`` of turn ``turn`` of episode ``episode`` goes, relative to the output folder."""
    return f"{FRAMES_DIR}/ep{episode:05d}/turn{turn:03d}_{image}.png"


def _observation_record(obs: Observation | None, episode: int, turn: int, out_dir: Path | None) -> Any:
    if obs is None:
        return None
    paths = []
    for i, image in enumerate(obs.images):
        rel = frame_path(episode, turn, i)
        if out_dir is not None:
            target = out_dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(lossless_png(image))
        paths.append(rel)
    return {"text": obs.text, "role": obs.role, "images": paths, "image_slots": list(obs.image_slots)}


def frame_files(result: EpisodeResult, episode: int) -> dict[str, bytes]:
    """The PNG bytes of every observation image of an episode, by path relative to the output folder."""
    files = {}
    for k, turn in enumerate(result.turns):
        for i, image in enumerate(turn.observation.images if turn.observation is not None else ()):
            files[frame_path(episode, k, i)] = lossless_png(image)
    return files


def write_frames(out_dir: Path, files: dict[str, bytes]) -> None:
    """Write :func:`frame_files` under ``out_dir``."""
    for rel, data in files.items():
        target = out_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def to_record(
    result: EpisodeResult, episode: int, out_dir: Path | None, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The ``results.jsonl`` line of an episode; saves its frames under ``out_dir`` (if given)."""
    turns = []
    for k, turn in enumerate(result.turns):
        item: dict[str, Any] = {"turn": k}
        if turn.model_text is not None:
            item.update(
                model_text=turn.model_text,
                reward=turn.reward,
                done=turn.done,
                metrics=turn.metrics,
                info=turn.info,
                generated_tokens=turn.generated_tokens,
                finish_reason=turn.finish_reason,
            )
            if turn.context_turns is not None:  # numbered as the record's turns: reply j is turn j + 1
                item["context_turns"] = [j + 1 for j in turn.context_turns]
            item.update(
                state_key=turn.state_key,
                distance_to_goal=turn.distance_to_goal,
                next_distance_to_goal=turn.next_distance_to_goal,
                action_optimal=turn.action_optimal,
            )
        item["observation"] = _observation_record(turn.observation, episode, k, out_dir)
        turns.append(item)
    record = {
        "episode": episode,
        "seed": result.seed,
        "status": result.status,
        "error": result.error,
        "reward": result.reward,
        "success": result.success,
        "num_turns": len(result.replies),
        "tokens": result.tokens,
        "generated_tokens": result.generated_tokens,
        "metrics": result.final_metrics,
        "reset_info": result.reset_info,
        "turns": turns,
        **(extra or {}),
    }
    return json_safe(record)
