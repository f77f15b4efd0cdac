"""Generated tokens/s of the TRL rollout (``use_vllm=False``) against TRL's own batched ``generate``.

The same tiny Qwen2-VL, batch and lengths on CPU: ``--batch`` episodes of ``benchmarks/cue_env.py``
(``--turns`` turns, an image each; every reply exactly ``--tokens`` tokens: ``min_new_tokens`` holds
off the stop ids, ``bad_words_ids`` the image tokens) played by ``VlmEnvsRollout`` through
``VlmEnvsGRPOTrainer``, next to TRL's own generation path (``GRPOTrainer._generate_single_turn``:
prompts left padded with their images, one ``generate``), run twice: on the contexts the episodes
had at each turn, one call per turn (the rollout's model calls without the env: the baseline), and
on the first prompts alone with ``turns x tokens`` new tokens each (one long generation, no
multi-turn context). "One episode at a time" is the rollout before it batched turns (one
``generate`` per turn). Best of ``--repeats`` runs each.

Run: ``.venv/bin/python benchmarks/trl_generate.py [--batch 32] [--turns 3] [--tokens 16] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import datasets
import torch
from trl import GRPOConfig

import vlm_envs
from vlm_envs.datasets.trl import trl_rows
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.trl import EpisodeRow, VlmEnvsGRPOTrainer, rollout_func
from vlm_envs.testing import build_tiny_processor, build_tiny_qwen2_vl

# TRL rows name registered envs only; cue_env sits beside this script (on sys.path when it runs)
ENV = vlm_envs.register("cue", "cue_env").name


def build_trainer(batch: int, turns: int, tokens: int, work: Path) -> VlmEnvsGRPOTrainer:
    processor = build_tiny_processor()
    model = build_tiny_qwen2_vl(processor).eval()
    # a random model may emit an image token, which ends its episode: neither path samples one
    special = sorted(ChatCodec(processor).special_image_ids)
    config = GRPOConfig(
        output_dir=str(work),
        use_cpu=True,
        bf16=False,
        num_generations=2,
        per_device_train_batch_size=batch,
        max_completion_length=turns * (tokens + 200),
        generation_kwargs={
            "max_new_tokens": tokens,
            "min_new_tokens": tokens,
            "bad_words_ids": [[t] for t in special],
        },
        report_to=[],
        save_strategy="no",
        seed=0,
    )
    data = datasets.Dataset.from_list(trl_rows(ENV, batch, 0, turns, {}))
    return VlmEnvsGRPOTrainer(model=model, args=config, train_dataset=data, processing_class=processor)


def rollout_tokens(trainer: VlmEnvsGRPOTrainer, prompts: list[Any], together: bool) -> int:
    """Play ``prompts`` (all at once, or one episode at a time); the generated tokens."""
    outs = [rollout_func(prompts, trainer)] if together else [rollout_func([p], trainer) for p in prompts]
    records = [r for out in outs for r in out["vlm_envs"]]
    failed = [r["error"] for r in records if r["status"] == "failed"]
    if failed:
        raise RuntimeError(f"{len(failed)} episodes failed; first: {failed[0]}")
    return sum(sum(mask) for out in outs for mask in out["env_mask"])


def trl_generate(trainer: VlmEnvsGRPOTrainer, contexts: list[Context], new_tokens: int) -> int:
    """TRL's own generation path on ``contexts``, ``new_tokens`` each; the generated tokens."""
    image_token = trainer._image_token_id
    with_images = [c.vision for c in contexts if c.vision]
    fields = {
        "pixel_values": torch.cat([v["pixel_values"] for v in with_images]),
        "image_grid_thw": torch.cat([v["image_grid_thw"] for v in with_images]),
        "mm_token_type_ids": [[int(t == image_token) for t in c.ids] for c in contexts],
    }
    own = trainer.generation_config
    trainer.generation_config = own.__class__(**{**own.to_dict(), "max_new_tokens": new_tokens})
    trainer.generation_config.min_new_tokens = new_tokens
    try:
        completions, _ = trainer._generate_single_turn([c.ids for c in contexts], None, fields, 1)
    finally:
        trainer.generation_config = own
    return sum(len(c) for c in completions)


@dataclasses.dataclass(frozen=True)
class Context:
    """What the model read before one turn of an episode: token ids and their images' inputs."""

    ids: list[int]
    vision: dict[str, torch.Tensor]


def turn_contexts(row: EpisodeRow, image_token: int) -> list[Context]:
    """The context of each turn of ``row``: the prompt and the completion up to the turn's reply."""
    tokens, mask = row.prompt_ids + row.completion_ids, [0] * len(row.prompt_ids) + row.env_mask
    starts = [i for i in range(len(tokens)) if mask[i] and not mask[i - 1]]
    grid = row.vision.get("image_grid_thw", torch.zeros(0, 3, dtype=torch.long))
    pads = (grid.prod(dim=1) // 4).tolist()  # each image's pad tokens (merge size 2)
    contexts = []
    for start in starts:
        ids = tokens[:start]
        n, seen = 0, sum(t == image_token for t in ids)
        while seen > 0:
            seen, n = seen - pads[n], n + 1
        rows = int(grid[:n].prod(dim=1).sum())
        vision = {"pixel_values": row.vision["pixel_values"][:rows], "image_grid_thw": grid[:n]} if n else {}
        contexts.append(Context(ids, vision))
    return contexts


def best(repeats: int, run: Callable[[], int]) -> tuple[int, float]:
    """Generated tokens and the best wall time of ``repeats`` runs."""
    walls, tokens = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        tokens = run()
        walls.append(time.perf_counter() - start)
    return tokens, min(walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32, help="episodes (prompts) generated together")
    parser.add_argument("--turns", type=int, default=3, help="turns of each episode")
    parser.add_argument("--tokens", type=int, default=16, help="generated tokens of each turn")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each path (best kept)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix="trl-generate-") as tmp:
        trainer = build_trainer(args.batch, args.turns, args.tokens, Path(tmp))
        prompts = [row["prompt"] for row in trl_rows(ENV, args.batch, 0, args.turns, {})]
        rollout_tokens(trainer, prompts, together=True)  # warm up; the episodes' contexts, turn by turn
        episodes = trainer._vlm_envs_rows
        by_turn = [turn_contexts(row, trainer._image_token_id) for row in episodes]
        firsts = [contexts[0] for contexts in by_turn]
        turns = [[contexts[k] for contexts in by_turn] for k in range(args.turns)]
        results = {
            "TRL's own generate, one call (first prompts, turns x tokens each)": best(
                args.repeats, lambda: trl_generate(trainer, firsts, args.turns * args.tokens)
            ),
            "TRL's own generate, one call per turn (the episodes' contexts)": best(
                args.repeats, lambda: sum(trl_generate(trainer, c, args.tokens) for c in turns)
            ),
            "vlm-envs rollout, turns batched": best(
                args.repeats, lambda: rollout_tokens(trainer, prompts, together=True)
            ),
            "vlm-envs rollout, one episode at a time": best(
                1, lambda: rollout_tokens(trainer, prompts, together=False)
            ),
        }
    baseline = results["TRL's own generate, one call per turn (the episodes' contexts)"]
    base_rate = baseline[0] / baseline[1]
    print(
        f"\ntiny Qwen2-VL, CPU, {args.threads} torch thread(s); {args.batch} episodes of cue "
        f"({args.turns} turns, an image each), {args.tokens} generated tokens per turn; best of "
        f"{args.repeats}\n"
    )
    print("| path | generated tokens | wall (s) | tokens/s | TRL per turn's tokens/s over this |")
    print("|---|---|---|---|---|")
    for name, (tokens, wall) in results.items():
        rate = tokens / wall
        print(f"| {name} | {tokens} | {wall:.2f} | {rate:.0f} | {base_rate / rate:.2f}x |")


if __name__ == "__main__":
    main()
