"""Caller CPU per episode: the verl agent loop next to the slime hook, same episodes, same engine.

Both play the same Sokoban episodes (same seeds, image observations, the same scripted replies from
:class:`~vlm_envs.testing.ScriptedEngine`, no latency) through the same episode core, one at a time,
and the table prints the process CPU time (all threads) per episode and per turn:

- the slime hook (``vlm_envs.rollout.slime.generate`` on the slime stand-in of tests/support, its
  engine the scripted one): the episode plus slime's ``pixel_values``;
- the verl loop (``VlmEnvsAgentLoop.run`` against a scripted verl server manager): the episode;
  verl makes ``pixel_values`` itself, after the loop;
- the verl loop plus verl's own post-processing of its output (``AgentLoopWorker._agent_loop_postprocess``:
  padding, its processor call on our images, positions), which runs in the same worker process.

Needs verl (``pip install 'vlm-envs[verl]'``). Run: ``python benchmarks/verl_overhead.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))  # the stand-ins

from slime.rollout.sglang_rollout import GenerateState
from slime.utils.types import Sample
from verl.experimental.agent_loop import agent_loop
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl_support import ScriptedServerManager, agent_loop_worker, no_rollout_trace, verl_config

from vlm_envs.rollout import slime as hook
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.verl import VlmEnvsAgentLoop
from vlm_envs.testing import ScriptedEngine

SOKOBAN = {"grid_size": [6, 6], "num_boxes": 1}
PROMPT_LENGTH, RESPONSE_LENGTH = 2048, 4096
SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1}
URL_HOST, URL_PORT = "127.0.0.1", 1  # never contacted (see Paths)


def answers(codec: ChatCodec) -> list[list[int]]:
    """Back-and-forth moves (Sokoban revisits states, as policies often do)."""
    return [[*codec.tokenize(f"<answer>{m}</answer>"), codec.end_of_turn_id] for m in ("Up", "Down")]


def row(seed: int, max_turns: int) -> dict[str, Any]:
    return {"env": "sokoban", "seed": seed, "env_config": SOKOBAN, "max_turns": max_turns}


class Paths:
    """The three callers, set up once, each playing an episode by seed."""

    def __init__(self, max_turns: int) -> None:
        self.max_turns = max_turns
        self.args = SimpleNamespace(
            rollout_temperature=1.0,
            rollout_max_response_len=RESPONSE_LENGTH,
            rollout_max_context_len=None,
            sglang_router_ip=URL_HOST,
            sglang_router_port=URL_PORT,
        )
        processor = GenerateState(self.args).processor
        script = answers(ChatCodec(processor))
        scripted = ScriptedEngine(script)
        hook._runtime.engine = lambda url, settings: scripted  # the hook's engine: the scripted one
        self.config = verl_config(
            [f"data.max_prompt_length={PROMPT_LENGTH}", f"data.max_response_length={RESPONSE_LENGTH}"]
        )
        self.server = ScriptedServerManager(ScriptedEngine(script))
        self.worker = agent_loop_worker(self.config, self.server, processor)
        self.processor = processor
        agent_loop.rollout_trace_attr = no_rollout_trace

    async def slime(self, seed: int) -> int:
        sample = Sample(index=seed, metadata=row(seed, self.max_turns))
        await hook.generate(self.args, sample, {**SAMPLING, "max_new_tokens": RESPONSE_LENGTH})
        return sample.metadata["vlm_envs"]["num_turns"]

    async def verl(self, seed: int) -> Any:
        loop = VlmEnvsAgentLoop(
            trainer_config=DictConfigWrap(self.config),
            server_manager=self.server,
            tokenizer=self.processor.tokenizer,
            processor=self.processor,
        )
        return await loop.run(dict(SAMPLING), extra_info=row(seed, self.max_turns), raw_prompt=[])

    async def verl_loop(self, seed: int) -> int:
        return (await self.verl(seed)).extra_fields["vlm_envs"]["num_turns"]

    async def verl_with_postprocess(self, seed: int) -> int:
        out = await self.verl(seed)
        await self.worker._agent_loop_postprocess(out, False, raw_prompt=[])
        return out.extra_fields["vlm_envs"]["num_turns"]


async def measure(play: Callable[[int], Awaitable[int]], seeds: range) -> tuple[float, float]:
    """CPU seconds per episode and per turn over ``seeds``, one episode at a time."""
    turns, start = 0, time.process_time()
    for seed in seeds:
        turns += await play(seed)
    cpu = time.process_time() - start
    return cpu / len(seeds), cpu / max(turns, 1)


async def main_async(args: argparse.Namespace) -> list[str]:
    paths = Paths(args.max_turns)
    callers = [
        ("slime hook (episode + pixel_values)", paths.slime),
        ("verl loop (episode)", paths.verl_loop),
        ("verl loop + verl's postprocess", paths.verl_with_postprocess),
    ]
    warm, seeds = range(10_000, 10_000 + args.warmup), range(args.episodes)
    for _, play in callers:  # codec caches, imports, first processor calls
        await measure(play, warm)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in callers}
    for _ in range(args.repeats):  # alternate the callers: the machine drifts within a run
        for name, play in callers:
            results[name].append(await measure(play, seeds))
    lines = [
        f"Sokoban {SOKOBAN['grid_size'][0]}x{SOKOBAN['grid_size'][1]}, image observations, {args.max_turns} "
        f"turns, {args.episodes} episodes x {args.repeats} repeats (best), scripted engine, tiny Qwen2-VL",
        f"{'caller':<40} {'CPU ms / episode':>17} {'CPU ms / turn':>14}",
    ]
    for name, runs in results.items():
        per_episode, per_turn = min(runs)
        lines.append(f"{name:<40} {per_episode * 1e3:>17.2f} {per_turn * 1e3:>14.3f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    print("\n".join(asyncio.run(main_async(parser.parse_args()))))


if __name__ == "__main__":
    main()
