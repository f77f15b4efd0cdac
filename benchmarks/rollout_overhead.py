"""Rollout adapter overhead: CPU per turn, the image-observation path, and 1,000 concurrent episodes.

Prints three tables:

1. CPU time of the adapter per turn with an instant engine, at turn 1 and turn 20 (it must stay
   flat: no re-encoding of history), for text and image observations, split into its parts.
2. An image observation through our path (frames at the processor's size, processor outputs and
   engine payloads cached by frame) next to the straightforward path (render, PNG, processor every
   turn), both measured here.
3. 1,000 concurrent Sokoban episodes against an engine with 50 ms latency, next to the latency-bound
   ideal (episodes / 50 ms per turn) and the CPU-bound ideal (cores / CPU time per turn), with the
   event loop's longest stall (largest gap between ticks of a 10 ms heartbeat).

Run: ``.venv/bin/python benchmarks/rollout_overhead.py`` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import io
import itertools
import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

from vlm_envs import build_env
from vlm_envs.imaging import png_data_uri
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines import EngineOutput, image_data_uri
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.testing import build_tiny_processor

# Qwen2.5-VL's default processor limits (preprocessor_config.json of the released checkpoints).
QWEN_MIN_PIXELS = 56 * 56
QWEN_MAX_PIXELS = 28 * 28 * 1280
MOVES = ("Up", "Down")  # back and forth: Sokoban revisits states, as policies often do


class InstantEngine:
    """Answers at once (or after ``latency`` s) with a fixed move, alternating; records CPU stamps."""

    def __init__(self, codec: ChatCodec, latency: float = 0.0) -> None:
        self.latency = latency
        self.answers = [[*codec.tokenize(f"<answer>{m}</answer>"), codec.end_of_turn_id] for m in MOVES]
        self.cpu_stamps: list[float] = []
        self.calls = 0

    async def generate(
        self, input_ids: Sequence[int], images: Sequence[Any], sampling_params: Any
    ) -> EngineOutput:
        self.cpu_stamps.append(time.process_time())
        if self.latency:
            await asyncio.sleep(self.latency)
        ids = self.answers[self.calls % len(self.answers)]
        self.calls += 1
        return EngineOutput(token_ids=ids, log_probs=[-0.5] * len(ids), finish_reason="stop")


def sokoban(render_mode: str) -> Any:
    return build_env("sokoban", grid_size=(6, 6), num_boxes=1, render_mode=render_mode, max_steps=1000)


def per_turn_cpu(codec: ChatCodec, render_mode: str, episodes: int, turns: int) -> dict[str, Any]:
    """CPU ms between consecutive engine calls (one turn of adapter work) and the parts' wall ms."""
    by_turn: list[list[float]] = [[] for _ in range(turns - 1)]
    parts: dict[str, list[float]] = {"env_s": [], "encode_s": []}
    for seed in range(episodes):
        engine = InstantEngine(codec)
        config = EpisodeConfig(max_turns=turns, max_new_tokens=32)
        traj = asyncio.run(run_episode(sokoban(render_mode), engine, codec, seed=seed, config=config))
        stamps = engine.cpu_stamps
        for i in range(len(stamps) - 1):
            by_turn[i].append((stamps[i + 1] - stamps[i]) * 1e3)
        for turn in traj.turns[:-1]:
            for key in parts:
                parts[key].append(turn.timings.get(key, 0.0) * 1e3)
    return {
        "turn 1": statistics.median(by_turn[0]),
        "turn 20": statistics.median(by_turn[min(19, len(by_turn) - 1)]),
        "mean": statistics.fmean(v for row in by_turn for v in row),
        **{k: statistics.median(v) for k, v in parts.items()},
    }


def encode_split(codec: ChatCodec) -> dict[str, float]:
    """Median ms of the observation encoding's parts: template + tokenize, and the image processor."""
    env = sokoban("vision")
    obs, _ = env.reset(seed=0)
    obs, _, _ = env.step("<answer>Up</answer>")
    message = env.format_observation(obs)
    text_only = {"role": "user", "content": [p for p in message["content"] if p["type"] == "text"]}
    counter = itertools.count()

    def new_text() -> dict[str, Any]:  # a text the delta cache has not seen
        extra = {"type": "text", "text": f" {next(counter)}"}
        return {"role": "user", "content": [*text_only["content"], extra]}

    image = obs.images[0]

    def timed(fn: Any, n: int = 200) -> float:
        samples = []
        for _ in range(n):
            t = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t) * 1e3)
        return statistics.median(samples)

    fresh = ChatCodec(codec.processor, cache_bytes=0)  # no cache: every call runs the processor
    resized = codec.process_image(image)
    return {
        "template + tokenize": timed(lambda: codec.encode_observation(new_text(), ended_with_eos=True)),
        "same text (delta cache)": timed(lambda: codec.encode_observation(text_only, ended_with_eos=True)),
        "image processor (cache miss)": timed(lambda: fresh.process_image(image), n=50),
        "image processor (cache hit)": timed(lambda: codec.process_image(image)),
        "PNG data URI (new frame)": timed(lambda: png_data_uri(resized.image), n=50),
        "PNG data URI (cached)": timed(lambda: image_data_uri(resized.image, resized.key)),
    }


def straightforward_image_turn(codec: ChatCodec, turns: int = 40) -> float:
    """Median ms per turn of the naive path: default-size render, PNG + base64, processor, no caches."""
    env = build_env("sokoban", grid_size=(6, 6), num_boxes=1, cell_size=64, max_steps=1000)
    env.reset(seed=0)
    samples = []
    for i in range(turns):
        t = time.perf_counter()
        obs, _, _ = env.step(f"<answer>{MOVES[i % 2]}</answer>")
        image = obs.images[0].copy()  # as if drawn anew
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        _ = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
        codec.processor.image_processor(images=[image], return_tensors="pt")
        message = env.format_observation(obs)
        codec.render([message])
        samples.append((time.perf_counter() - t) * 1e3)
    return statistics.median(samples)


def sequential_cpu_per_turn(codec: ChatCodec, episodes: int, turns: int, first_seed: int) -> float:
    """CPU seconds per turn of the same workload played one episode at a time, instant engine."""
    config = EpisodeConfig(max_turns=turns, max_new_tokens=32)
    cpu, played = time.process_time(), 0

    async def play_all() -> None:
        nonlocal played
        for seed in range(first_seed, first_seed + episodes):
            traj = await run_episode(sokoban("vision"), InstantEngine(codec), codec, seed=seed, config=config)
            played += len(traj.turns)

    asyncio.run(play_all())
    return (time.process_time() - cpu) / played


async def concurrent_run(codec: ChatCodec, episodes: int, turns: int, latency: float) -> dict[str, float]:
    engine = InstantEngine(codec, latency=latency)
    config = EpisodeConfig(max_turns=turns, max_new_tokens=32)
    envs = [sokoban("vision") for _ in range(episodes)]
    gc.collect()
    gc.freeze()  # long-lived objects (model code, processor) out of the collector's way, as a trainer would
    loop = asyncio.get_running_loop()
    gaps: list[float] = []
    done = asyncio.Event()

    async def heartbeat() -> None:
        last = loop.time()
        while not done.is_set():
            await asyncio.sleep(0.01)
            now = loop.time()
            gaps.append(now - last - 0.01)
            last = now

    beat = asyncio.create_task(heartbeat())
    wall, cpu = time.perf_counter(), time.process_time()
    trajs = await asyncio.gather(
        *(run_episode(e, engine, codec, seed=i, config=config) for i, e in enumerate(envs))
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    done.set()
    await beat
    turns_done = sum(len(t.turns) for t in trajs)
    return {"turns": turns_done, "wall": wall, "cpu": cpu, "max_stall_ms": max(gaps) * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    codec = ChatCodec(build_tiny_processor(min_pixels=QWEN_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS))

    print("## 1. Adapter CPU per turn, instant engine (ms, median over episodes)\n")
    print("| observations | turn 1 | turn 20 | env step | encode: template, image, payload |")
    print("|---|---|---|---|---|")
    rows = {mode: per_turn_cpu(codec, mode, episodes=8, turns=21) for mode in ("text", "vision")}
    for mode, r in rows.items():
        print(f"| {mode} | {r['turn 1']:.2f} | {r['turn 20']:.2f} | {r['env_s']:.2f} | {r['encode_s']:.2f} |")
    split = encode_split(codec)
    print("\nEncoding split (ms, median): " + ", ".join(f"{k} {v:.2f}" for k, v in split.items()))

    print("\n## 2. Image observation per turn (ms)\n")
    naive = straightforward_image_turn(codec)
    ours = rows["vision"]["mean"]
    print("| path | ms per turn |")
    print("|---|---|")
    print(f"| straightforward: render, PNG, processor every turn | {naive:.2f} |")
    print(f"| vlm-envs: processor-sized frames, cached processor outputs and payloads | {ours:.2f} |")
    print(f"| ratio (target <= 0.33) | {ours / naive:.2f} |")

    print(
        f"\n## 3. {args.episodes} concurrent Sokoban episodes, {args.latency * 1e3:.0f} ms engine latency\n"
    )
    # distinct levels (seeds) in both runs, so both pay the processor on each new frame
    cpu_per_turn = sequential_cpu_per_turn(codec, 50, args.turns, first_seed=10_000)
    result = asyncio.run(concurrent_run(codec, args.episodes, args.turns, args.latency))
    rate = result["turns"] / result["wall"]
    latency_ideal = args.episodes / args.latency
    cpu_ideal = cores / cpu_per_turn
    smaller = min(latency_ideal, cpu_ideal)
    print("| measure | turns/s |")
    print("|---|---|")
    print(f"| measured ({result['cpu'] / result['turns'] * 1e3:.2f} ms CPU per turn) | {rate:.0f} |")
    print(f"| one Python process, one core (1 / {cpu_per_turn * 1e3:.2f} ms) | {1 / cpu_per_turn:.0f} |")
    latency_row = f"latency-bound ideal ({args.episodes} episodes / {args.latency * 1e3:.0f} ms)"
    print(f"| {latency_row} | {latency_ideal:.0f} |")
    cpu_row = f"CPU-bound ideal ({cores} cores / {cpu_per_turn * 1e3:.2f} ms CPU per turn played alone)"
    print(f"| {cpu_row} | {cpu_ideal:.0f} |")
    print(f"| measured / smaller ideal (target >= 0.80) | {rate / smaller:.2f} |")
    print(f"\nLongest event-loop stall: {result['max_stall_ms']:.1f} ms (target <= 50 ms)")
    print(f"Turns: {result['turns']}, wall {result['wall']:.1f} s, CPU {result['cpu']:.1f} s")


if __name__ == "__main__":
    main()
