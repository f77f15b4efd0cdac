"""Does GRPO learn the later turns when their images reach the loss, and not when they are dropped?

A tiny Qwen2-VL built in code plays ``image_probe`` (each turn a colour; the reply its letter, A or B;
3 turns, an image each) with GRPO through ``VlmEnvsGRPOTrainer``. The control run is the same run
with the images after the first turn dropped (the env's later observations keep their text, lose
their image: what a pipeline that drops later images trains on, as prime-rl #2786 measured). Replies
are one token, sampled with a bias toward the two letters (``sequence_bias``; the log probs trained
on are the model's own). Accuracy is measured on held-out seeds with the policy's own sampling
(temperature 1), through the same rollout: on turn 1 (its image kept in both runs) and on the later
turns (``later_accuracy``; chance is 50%).

Run: ``.venv/bin/python benchmarks/image_probe_learning.py [--steps 60] [--threads 2]`` (about 12 min on
2 shared cores).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import tempfile

import datasets
import torch
from trl import GRPOConfig

import vlm_envs
from vlm_envs import Observation, StepInfo
from vlm_envs.datasets.trl import trl_rows
from vlm_envs.envs.image_probe import ImageProbeEnv
from vlm_envs.rollout.trl import VlmEnvsGRPOTrainer, rollout_func
from vlm_envs.testing import build_tiny_processor, build_tiny_qwen2_vl

QUESTIONS = 3
EVAL_SEED = 1_000_000  # held-out seeds start here (training uses 0..)
LETTERS = ("A", "B")


class LaterImagesDropped(ImageProbeEnv):
    """image_probe as a pipeline that drops later-turn images shows it: turn 1's image only."""

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        obs, done, info = super().step(response_text)
        return Observation(text=obs.text, role=obs.role), done, info


def rows(env: str, first: int, n: int) -> datasets.Dataset:
    table = datasets.Dataset.from_list(trl_rows(env, n, first, QUESTIONS, {"questions": QUESTIONS}))
    return table.cast_column("images", datasets.Sequence(datasets.Image()))


def accuracy(trainer: VlmEnvsGRPOTrainer, env: str, episodes: int) -> tuple[float, float]:
    """Turn 1's accuracy and the later turns' over ``episodes`` held-out episodes."""
    prompts = [
        row["prompt"] for row in trl_rows(env, episodes, EVAL_SEED, QUESTIONS, {"questions": QUESTIONS})
    ]
    records = rollout_func(prompts, trainer)["vlm_envs"]
    failed = [r for r in records if r["status"] == "failed"]
    if failed:
        raise RuntimeError(f"{len(failed)} of {episodes} episodes failed; first: {failed[0]['error']}")
    first = sum(bool(r["turns"][0]["metrics"]["correct"]) for r in records) / episodes
    later = sum(r["metrics"]["later_accuracy"] for r in records) / episodes
    return first, later


def run(env: str, steps: int, episodes: int, work: str) -> dict[str, Any]:
    processor = build_tiny_processor()
    torch.manual_seed(0)
    model = build_tiny_qwen2_vl(processor).train()
    letters = [processor.tokenizer.convert_tokens_to_ids(letter) for letter in LETTERS]
    config = GRPOConfig(
        output_dir=f"{work}/{env}",
        use_cpu=True,
        bf16=False,
        num_generations=8,
        per_device_train_batch_size=32,  # 4 seeds x 8 episodes per step
        max_completion_length=256,
        generation_kwargs={"max_new_tokens": 1, "sequence_bias": [[[t], 20.0] for t in letters]},
        learning_rate=1e-2,
        beta=0.0,
        max_steps=steps,
        report_to=[],
        save_strategy="no",
        logging_steps=10,
        disable_tqdm=True,
        seed=0,
    )
    trainer = VlmEnvsGRPOTrainer(
        model=model, args=config, train_dataset=rows(env, 0, 4 * steps), processing_class=processor
    )
    before = accuracy(trainer, env, episodes)
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    after = accuracy(trainer, env, episodes)
    return {"steps": trainer.state.global_step, "wall": wall, "before": before, "after": after}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="GRPO steps of each run")
    parser.add_argument("--episodes", type=int, default=128, help="held-out episodes per measurement")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    datasets.disable_progress_bars()
    # TRL rows name registered envs only: the control is registered from this file
    blind = vlm_envs.register("image_probe_blind", "image_probe_learning:LaterImagesDropped").name
    with tempfile.TemporaryDirectory(prefix="image-probe-learning-") as work:
        results = {
            "every turn's image": run("image_probe", args.steps, args.episodes, work),
            "images after turn 1 dropped": run(blind, args.steps, args.episodes, work),
        }
    print(
        f"\nimage_probe ({QUESTIONS} turns, 2 colours), tiny Qwen2-VL, GRPO through VlmEnvsGRPOTrainer, CPU, "
        f"{args.threads} torch threads; accuracy over {args.episodes} held-out episodes at temperature 1 "
        "(chance 50%)\n"
    )
    print("| run | GRPO steps | wall (s) | turn 1 before | turn 1 after | later before | later after |")
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        (f0, l0), (f1, l1) = r["before"], r["after"]
        print(
            f"| {name} | {r['steps']} | {r['wall']:.0f} | {100 * f0:.1f}% | {100 * f1:.1f}% | "
            f"{100 * l0:.1f}% | {100 * l1:.1f}% |"
        )


if __name__ == "__main__":
    main()
