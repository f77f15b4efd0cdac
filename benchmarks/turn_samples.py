"""Windowed history against the full one on 30-turn Sokoban vision episodes.

For ``full`` and ``window:0/1/2/4``, with an instant scripted engine (the model's work is not
measured, only what the engine is asked for and what the adapter spends): the largest context sent
(tokens), the prefill tokens sent over the episode, the share of them that repeat the previous
request's prefix (what an engine's prefix cache can reuse), images per request, and the adapter's CPU
per turn: the episode loop alone, and with the training tensors of what the trainer gets (one sample
for ``full``, one per turn for a window). Targets for ``window:2``: the largest context at most the
third turn's context + 10%, flat in the episode length; the adapter's CPU per turn within 1.2x of
``full``. The training tensors are printed apart: a windowed episode hands the trainer each frame in
K + 1 samples, so their bytes (and the memory they are written to) grow with K by construction.

Run: ``.venv/bin/python benchmarks/turn_samples.py`` (about half a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence
from typing import Any

from vlm_envs import build_env
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.history import History
from vlm_envs.rollout.offload import INLINE
from vlm_envs.rollout.turns import make_train_inputs
from vlm_envs.testing import ScriptedEngine, build_tiny_processor

TURNS = 30
HISTORIES = ("full", "window:0", "window:1", "window:2", "window:4")
SOKOBAN = {"grid_size": (7, 7), "num_boxes": 1, "render_mode": "vision", "max_steps": 200}
# Qwen2.5-VL's default processor limits (preprocessor_config.json of the released checkpoints).
QWEN_MIN_PIXELS, QWEN_MAX_PIXELS = 56 * 56, 28 * 28 * 1280


class RecordingEngine(ScriptedEngine):
    """Answers Up and Down in turn (never solving), recording every request's ids and image count."""

    def __init__(self, codec: ChatCodec) -> None:
        answers = [[*codec.tokenize(f"<answer>{m}</answer>"), codec.end_of_turn_id] for m in ("Up", "Down")]
        super().__init__(answers)
        self.requests: list[tuple[Sequence[int], int]] = []

    async def generate(self, input_ids: Sequence[int], images: Sequence[Any], sampling_params: Any) -> Any:
        self.requests.append((tuple(input_ids), len(images)))
        return await super().generate(input_ids, images, sampling_params)


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def measure(codec: ChatCodec, history: str, seeds: range) -> dict[str, float]:
    """Play one 30-turn episode per seed; what the engine was asked and what the adapter spent."""
    loop_cpu = tensor_cpu = 0.0
    turns = largest = prefill = reused = 0
    third: list[int] = []
    images: list[int] = []
    for seed in seeds:
        engine = RecordingEngine(codec)
        env = build_env("sokoban", **SOKOBAN)
        config = EpisodeConfig(max_turns=TURNS, max_new_tokens=32, history=History.parse(history))
        t0 = time.process_time()
        traj = asyncio.run(run_episode(env, engine, codec, seed=seed, config=config, executor=INLINE))
        t1 = time.process_time()
        if traj.history.full:
            traj.train_inputs()
        else:
            make_train_inputs(traj.turn_samples())
        tensor_cpu += time.process_time() - t1
        loop_cpu += t1 - t0
        assert len(traj.turns) == TURNS, (traj.status, traj.error)
        turns += len(traj.turns)
        sizes = [len(ids) for ids, _ in engine.requests]
        largest, prefill = max(largest, *sizes), prefill + sum(sizes)
        third.append(sizes[2])
        reused += sum(
            shared_prefix(a, b) for (a, _), (b, _) in zip(engine.requests, engine.requests[1:], strict=False)
        )
        images += [n for _, n in engine.requests]
    return {
        "largest": largest,
        "third": max(third),
        "prefill": prefill / len(seeds),
        "reused": reused / prefill,
        "images": statistics.mean(images),
        "max_images": max(images),
        "loop_ms": 1000 * loop_cpu / turns,
        "all_ms": 1000 * (loop_cpu + tensor_cpu) / turns,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=4, help="episodes per history (default 4)")
    parser.add_argument(
        "--rounds", type=int, default=2, help="alternating rounds over the histories (default 2)"
    )
    args = parser.parse_args()
    codec = ChatCodec(
        build_tiny_processor("qwen2_vl", min_pixels=QWEN_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS)
    )
    measure(codec, "full", range(1))  # warm the caches and the allocator
    rows: dict[str, list[dict[str, float]]] = {h: [] for h in HISTORIES}
    for _ in range(args.rounds):  # alternate, so a drift of the machine's speed hits every history alike
        for history in HISTORIES:
            rows[history].append(measure(codec, history, range(args.episodes)))
    best = {
        h: {k: min(r[k] for r in runs) if k.endswith("_ms") else runs[0][k] for k in runs[0]}
        for h, runs in rows.items()
    }
    full = best["full"]
    print(f"{args.episodes} Sokoban vision episodes of {TURNS} turns per history (tiny Qwen2-VL processor)")
    print(
        "| history | largest context (tokens) | vs 3rd turn's | prefill tokens / episode | reused prefix "
        "| images / request (max) | CPU / turn, loop (ms) | + training tensors (ms) | vs full |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for history, r in best.items():
        print(
            f"| {history} | {r['largest']:,.0f} | {r['largest'] / r['third']:.2f}x | {r['prefill']:,.0f} | "
            f"{r['reused']:.0%} | {r['images']:.1f} ({r['max_images']:.0f}) | {r['loop_ms']:.2f} | "
            f"{r['all_ms']:.2f} | {r['all_ms'] / full['all_ms']:.2f}x |"
        )
    w2 = best["window:2"]
    flat = w2["largest"] <= 1.1 * w2["third"]
    loop = w2["loop_ms"] / full["loop_ms"]
    print(
        f"\nwindow:2 targets: largest context <= 3rd turn's + 10%: {'met' if flat else 'MISSED'} "
        f"({w2['largest'] / w2['third']:.2f}x); the adapter's CPU per turn (the loop) <= 1.2x full: "
        f"{'met' if loop <= 1.2 else 'MISSED'} ({loop:.2f}x). With the training tensors "
        f"{w2['all_ms'] / full['all_ms']:.2f}x: each frame is in K + 1 samples, so the trainer gets "
        "K + 1 times its pixel rows"
    )


if __name__ == "__main__":
    main()
