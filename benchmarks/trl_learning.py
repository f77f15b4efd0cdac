"""Does GRPO through ``VlmEnvsGRPOTrainer`` learn? Success rate before and after, on CPU.

A tiny Qwen2-VL built in code plays ``benchmarks/cue_env.py`` (each turn a colour, the reply the
direction it stands for; 2 turns, an image each; success: both right, 1 in 16 for a guesser). It is
first warm-started on the env's oracle demonstrations (``make-sft``'s per-reply rows, trained on the
replies only, with TRL's ``SFTTrainer``), then trained with GRPO for a wall-clock budget. The
control run starts from the same weights and takes the same steps with the advantages' sign
flipped: it must not rise. Success is measured on held-out seeds with the policy's own sampling
(temperature 1), through the same rollout. The env is registered as ``cue``
(``vlm_envs.register``), as a TRL row may name only a registered env; an episode that fails stops
the benchmark with its reason.

Run: ``.venv/bin/python benchmarks/trl_learning.py [--minutes 10] [--threads 2]``; the smallest
setting (seconds, what the tests run): ``--minutes 0 --sft-steps 1 --episodes 8``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import datasets
import torch
from transformers import TrainerCallback
from trl import GRPOConfig

import vlm_envs
from sft_warm_start import warm_start
from vlm_envs.datasets.trl import trl_rows
from vlm_envs.rollout.trl import VlmEnvsGRPOTrainer, rollout_func
from vlm_envs.testing import build_tiny_processor, build_tiny_qwen2_vl

# TRL rows name registered envs only; cue_env sits beside this script (on sys.path when it runs)
ENV = vlm_envs.register("cue", "cue_env").name
TURNS = 2
EVAL_SEED = 1_000_000  # held-out seeds start here (training uses 0..)


class FlippedGRPOTrainer(VlmEnvsGRPOTrainer):
    """The control: every advantage's sign flipped (the policy is pushed away from what scored)."""

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        output["advantages"] = -output["advantages"]
        return output


class WallClock(TrainerCallback):
    """Stops training once ``seconds`` have passed."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.start = seconds, time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if time.perf_counter() - self.start > self.seconds:
            control.should_training_stop = True
        return control


def rows(first: int, n: int) -> datasets.Dataset:
    table = datasets.Dataset.from_list(trl_rows(ENV, n, first, TURNS, {}))
    return table.cast_column("images", datasets.Sequence(datasets.Image()))


def success_rate(trainer: VlmEnvsGRPOTrainer, episodes: int) -> float:
    prompts = [row["prompt"] for row in trl_rows(ENV, episodes, EVAL_SEED, TURNS, {})]
    records = rollout_func(prompts, trainer)["vlm_envs"]
    failed = [r for r in records if r["status"] == "failed"]
    if failed:
        raise RuntimeError(f"{len(failed)} of {episodes} episodes failed; first: {failed[0]['error']}")
    return sum(bool(r["metrics"].get("success")) for r in records) / episodes


def run(
    cls: type[VlmEnvsGRPOTrainer], weights: dict[str, torch.Tensor], minutes: float, work: Path, episodes: int
) -> dict[str, Any]:
    processor = build_tiny_processor()
    model = build_tiny_qwen2_vl(processor)
    model.load_state_dict(weights)
    model.train()
    config = GRPOConfig(
        output_dir=str(work / cls.__name__),
        use_cpu=True,
        bf16=False,
        num_generations=8,
        per_device_train_batch_size=32,  # 4 seeds x 8 episodes per step
        max_completion_length=64,
        generation_kwargs={"max_new_tokens": 4},
        learning_rate=1e-3,
        beta=0.0,
        max_steps=100_000,  # the wall clock stops it
        report_to=[],
        save_strategy="no",
        logging_steps=10,
        disable_tqdm=True,
        seed=0,
    )
    torch.manual_seed(0)
    trainer = cls(model=model, args=config, train_dataset=rows(0, 4096), processing_class=processor)
    before = success_rate(trainer, episodes)
    clock = WallClock(minutes * 60)
    trainer.add_callback(clock)
    trainer.train()
    wall = time.perf_counter() - clock.start
    after = success_rate(trainer, episodes)
    return {"steps": trainer.state.global_step, "wall": wall, "before": before, "after": after}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="GRPO wall-clock budget of each run")
    parser.add_argument("--sft-steps", type=int, default=60, help="warm-start SFT steps (0: none)")
    parser.add_argument("--episodes", type=int, default=256, help="held-out episodes per success measurement")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix="trl-learning-") as tmp:
        work = Path(tmp)
        start = time.perf_counter()
        # each demonstration row's context: the whole episode so far (a window of TURNS - 1 turns)
        weights = warm_start(build_tiny_processor(), ENV, TURNS, f"window:{TURNS - 1}", args.sft_steps, work)
        sft_wall = time.perf_counter() - start
        results = {
            "GRPO": run(VlmEnvsGRPOTrainer, weights, args.minutes, work, args.episodes),
            "GRPO, advantages' sign flipped": run(
                FlippedGRPOTrainer, weights, args.minutes, work, args.episodes
            ),
        }
    print(
        f"\ncue env ({TURNS} turns, an image each), tiny Qwen2-VL, CPU, {args.threads} torch threads; "
        f"warm start: {args.sft_steps} SFT steps on oracle demonstrations ({sft_wall:.0f} s); "
        f"success over {args.episodes} held-out episodes, sampled at temperature 1\n"
    )
    print("| run | GRPO steps | GRPO wall (s) | success before | success after | change (points) |")
    print("|---|---|---|---|---|---|")
    for name, r in results.items():
        change = 100 * (r["after"] - r["before"])
        print(
            f"| {name} | {r['steps']} | {r['wall']:.0f} | {100 * r['before']:.1f}% | "
            f"{100 * r['after']:.1f}% | {change:+.1f} |"
        )


if __name__ == "__main__":
    main()
