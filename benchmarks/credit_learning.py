"""Does turn-level credit learn faster than the episode's? Episode-only credit (GRPO's) against GiGPO and
potential shaping on CPU, over the same steps, training seeds and starting weights.

The env: ``benchmarks/line_walk_env.py`` (named by its module path): the walker starts DISTANCE cells
from a goal it cannot see, each turn's picture is a lamp pointing the way, the reply moves it Left or
Right; success: the goal within TURNS replies (the rollout's cap: a walk that runs out ends TRUNCATED).
Only the goal scores, so an episode's return says little about which of its replies helped, and the
cells recur across a group's episodes (GiGPO's anchor states).

The policy: a tiny Qwen2-VL built in code, warm-started on oracle demonstrations as ``trl_learning.py``
does (``sft_warm_start.py``), then trained by each method from those weights. A step plays ``--groups``
training seeds x ``--group-size`` episodes through our rollout (``run_episode``, history ``window:0``: a
turn's context is the task and the current lamp, so each turn is a sample of its own), the model
generating in process (the TRL room's ``PolicyEngine``: batched ``generate`` at temperature 1, the
sampled tokens' log probs). Each turn sample gets one advantage:

- episode-only (GRPO): the episode's return against its group's, ``(R - mean) / std``, on every turn
  (``gigpo_advantages`` with ``step_weight=0``);
- GiGPO: ``gigpo_advantages`` (step weight 1, gamma 0.95), adding the turn's discounted return against
  those of the group's turns taken from the same cell;
- potential shaping: ``Trajectory.turn_samples("return", 0.95, shaping=PotentialShaping(...))``, each
  turn's discounted return with ``gamma * phi(s') - phi(s)`` added (``phi = -distance``), against the
  group's turn samples (GRPO's normalisation over per-turn samples, as slime groups them).

The update is verl's PPO policy loss (``verl.trainer.ppo.core_algos.get_policy_loss_fn("vanilla")``, with
verl's ``ActorConfig`` defaults: clip 0.2, ``token-mean``) on the step's turn samples in one batch: one
forward over every context + reply gives the reply tokens' log probs (replies right-aligned in a
samples x tokens tensor); ``advantages`` is that shape, every token of a reply holding its turn's
advantage; ``old_log_prob`` is the rollout's own log probs (one update per rollout: on policy); then
AdamW. The header prints the largest gap between the trainer's log probs and the rollout's on the first
batch (fp32: about 1e-6 when every token sits where it should). Success and the share of optimal moves
(``action_optimal``) are measured on held-out seeds, sampled at temperature 1, through the same rollout.

Run: ``.venv/bin/python benchmarks/credit_learning.py [--minutes 3] [--threads 1]``: the episode-only run
trains for ``--minutes`` and the others take as many steps (``--steps N`` fixes the count instead); the
smallest setting (seconds, what the tests run): ``--steps 1 --sft-steps 1 --episodes 8 --groups 2``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import datasets
import torch
from transformers import GenerationConfig
from verl.trainer.ppo.core_algos import get_policy_loss_fn
from verl.workers.config.actor import ActorConfig

import vlm_envs
from sft_warm_start import warm_start
from vlm_envs.credit.gigpo import (
    GAMMA,
    STEP_WEIGHT,
    CreditTurn,
    discounted_returns,
    gigpo_advantages,
    relative,
)
from vlm_envs.credit.shaping import PotentialShaping
from vlm_envs.rollout import ChatCodec, EpisodeConfig, Status, Trajectory, run_episode
from vlm_envs.rollout.engines.hf_model import batch_inputs
from vlm_envs.rollout.trl import PolicyEngine
from vlm_envs.rollout.turns import TurnSample, make_train_inputs
from vlm_envs.testing import build_tiny_processor, build_tiny_qwen2_vl

#: The env by module path: line_walk_env sits beside this script (on sys.path when it runs).
ENV = "line_walk_env"
DISTANCE, TURNS = 3, 5  # start 3 cells away, 5 replies: room for 1 wrong move
EVAL_SEED = 1_000_000  # held-out seeds start here (training uses 0..)
HISTORY = "window:0"
EPISODE = EpisodeConfig(max_turns=TURNS, max_new_tokens=4, history=HISTORY, engine_images="pil")
#: The potential of a state the goal cannot be reached from (none here): the turn cap.
SHAPING = PotentialShaping(unreachable=TURNS)
#: Each method's key and the name the table gives it; the first is the baseline.
METHODS = {"episode": "episode-only (GRPO)", "gigpo": "GiGPO", "shaping": "potential shaping"}
#: verl's actor defaults (clip 0.2, token-mean); rollout_n and the micro batch only satisfy its checks.
ACTOR = ActorConfig(strategy="fsdp", rollout_n=8, ppo_micro_batch_size_per_gpu=8)
POLICY_LOSS = get_policy_loss_fn("vanilla")


@dataclasses.dataclass(frozen=True)
class Settings:
    """What every method's run shares."""

    groups: int  # training seeds a step
    group_size: int  # episodes of each seed
    episodes: int  # held-out episodes a measurement plays
    learning_rate: float
    threads: int


@dataclasses.dataclass(frozen=True)
class Measure:
    """Held-out success, overall and by the side the goal lies on, and the share of optimal moves."""

    success: float
    left: float
    right: float
    optimal: float


@dataclasses.dataclass(frozen=True)
class Run:
    """One method's run: its steps and wall time, what it measured after, and the first batch's largest
    gap between the trainer's log probs and the rollout's (``None``: no step)."""

    steps: int
    wall: float
    after: Measure
    gap: float | None


class Player:
    """The model walking the line through the rollout, generating in process."""

    def __init__(self, model: Any, processor: Any, threads: int) -> None:
        self.codec = ChatCodec(processor)
        sampling = GenerationConfig(
            do_sample=True, temperature=1.0, top_k=0, top_p=1.0, pad_token_id=processor.tokenizer.pad_token_id
        )
        # the model's thread gets the torch threads of the main one (OpenMP settings are per thread)
        thread = ThreadPoolExecutor(1, initializer=torch.set_num_threads, initargs=(threads,))
        self.engine = PolicyEngine(model, self.codec, sampling, thread)

    async def _episode(self, seed: int) -> Trajectory:
        env = vlm_envs.build_env(ENV, distance=DISTANCE)
        try:
            with self.engine.playing():
                return await run_episode(env, self.engine, self.codec, seed=seed, config=EPISODE)
        finally:
            env.close()

    def play(self, seeds: Sequence[int]) -> list[Trajectory]:
        """One episode per seed, all in play at once; a failed one stops the benchmark."""

        async def every() -> list[Trajectory]:
            return list(await asyncio.gather(*(self._episode(seed) for seed in seeds)))

        trajectories = asyncio.run(every())
        failed = [t for t in trajectories if t.status is Status.FAILED]
        if failed:
            raise RuntimeError(f"{len(failed)} of {len(seeds)} episodes failed; first: {failed[0].error}")
        return trajectories

    def measure(self, episodes: int) -> Measure:
        """Success (overall, and where the goal lies left and right) and the share of optimal moves, over
        ``episodes`` held-out seeds."""
        torch.manual_seed(EVAL_SEED)
        trajectories = self.play(range(EVAL_SEED, EVAL_SEED + episodes))
        optimal = [r.action_optimal for t in trajectories for r in t.turns if r.action_optimal is not None]

        def success(walks: list[Trajectory]) -> float:
            return sum(t.reward == 1.0 for t in walks) / max(1, len(walks))

        left = [t for t in trajectories if t.reset_info["goal"] < t.reset_info["start"]]
        right = [t for t in trajectories if t.reset_info["goal"] > t.reset_info["start"]]
        share = sum(optimal) / max(1, len(optimal))
        return Measure(success(trajectories), success(left), success(right), share)


def credit(method: str, groups: Sequence[Sequence[Trajectory]]) -> tuple[list[TurnSample], list[float]]:
    """Every turn sample of the step's ``groups`` (episodes of one seed each) and its advantage."""
    if method == "shaping":
        samples, advantages = [], []
        for group in groups:
            shaped = [s for traj in group for s in traj.turn_samples("return", GAMMA, shaping=SHAPING)]
            samples += shaped
            advantages += relative([s.reward for s in shaped])
        return samples, advantages
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    samples, turns = [], []
    for g, group in enumerate(groups):
        for e, traj in enumerate(group):
            step = traj.turn_samples("step")  # each sample's reward: its turn's own
            keys = {record.index: record.state_key for record in traj.turns}
            returns = discounted_returns([s.reward for s in step], GAMMA)
            samples += step
            turns += [
                CreditTurn(g, e, keys[s.turn], traj.reward, r) for s, r in zip(step, returns, strict=True)
            ]
    weight = 0.0 if method == "episode" else STEP_WEIGHT
    return samples, gigpo_advantages(turns, step_weight=weight)


def reply_log_probs(
    model: Any, codec: ChatCodec, samples: Sequence[TurnSample]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The model's log probs of each reply token, the rollout's, and the mask: samples x the longest
    reply, replies right-aligned (the batch is left padded, so every reply ends the row)."""
    make_train_inputs(samples)
    width = max(s.response_length for s in samples)
    pad = codec.tokenizer.pad_token_id
    kwargs = batch_inputs(
        [s.tokens for s in samples], [s.train_inputs() for s in samples], codec.image_token_id, pad
    )
    logits = model(**kwargs, logits_to_keep=width + 1).logits[:, :-1].float()
    ids, old, mask = (
        torch.zeros(len(samples), width, dtype=dtype) for dtype in (torch.long, torch.float, torch.float)
    )
    for i, sample in enumerate(samples):
        n = sample.response_length
        ids[i, width - n :] = torch.tensor(sample.response_ids)
        old[i, width - n :] = torch.tensor(sample.log_probs)
        mask[i, width - n :] = 1.0
    log_probs = torch.log_softmax(logits, dim=-1).gather(2, ids.unsqueeze(2)).squeeze(2)
    return log_probs * mask, old, mask


def update(
    model: Any,
    optimizer: torch.optim.Optimizer,
    codec: ChatCodec,
    samples: list[TurnSample],
    advantages: list[float],
) -> float:
    """One step of verl's policy loss on ``samples``; returns the largest gap between the trainer's log
    probs and the rollout's."""
    log_probs, old, mask = reply_log_probs(model, codec, samples)
    per_token = torch.tensor(advantages).unsqueeze(1) * mask  # each reply token: its turn's advantage
    loss, _ = POLICY_LOSS(
        old_log_prob=old,
        log_prob=log_probs,
        advantages=per_token,
        response_mask=mask,
        loss_agg_mode=ACTOR.loss_agg_mode,
        config=ACTOR,
    )
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return float(((log_probs.detach() - old).abs() * mask).max())


def train(
    method: str, weights: dict[str, torch.Tensor], steps: int | None, seconds: float, settings: Settings
) -> Run:
    """``method``'s run from ``weights``: ``steps`` steps (``None``: as many as ``seconds`` allow)."""
    processor = build_tiny_processor()
    model = build_tiny_qwen2_vl(processor)
    model.load_state_dict(weights)
    model.train()
    player = Player(model, processor, settings.threads)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, weight_decay=0.0)
    torch.manual_seed(0)
    start, done, gaps = time.perf_counter(), 0, []
    while (done < steps) if steps is not None else (time.perf_counter() - start < seconds):
        seeds = [done * settings.groups + g for g in range(settings.groups)]
        played = player.play([seed for seed in seeds for _ in range(settings.group_size)])
        size = settings.group_size
        groups = [played[g * size : (g + 1) * size] for g in range(settings.groups)]
        gaps.append(update(model, optimizer, player.codec, *credit(method, groups)))
        done += 1
    wall = time.perf_counter() - start
    return Run(done, wall, player.measure(settings.episodes), gaps[0] if gaps else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="the baseline's training budget")
    parser.add_argument("--steps", type=int, default=None, help="steps of every run (instead of --minutes)")
    parser.add_argument("--sft-steps", type=int, default=45, help="warm-start SFT steps (0: none)")
    parser.add_argument("--groups", type=int, default=4, help="training seeds a step")
    parser.add_argument("--group-size", type=int, default=8, help="episodes of each training seed")
    parser.add_argument("--episodes", type=int, default=256, help="held-out episodes per measurement")
    parser.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate")
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    datasets.disable_progress_bars()
    settings = Settings(args.groups, args.group_size, args.episodes, args.lr, args.threads)
    with tempfile.TemporaryDirectory(prefix="credit-learning-") as tmp:
        start = time.perf_counter()
        processor = build_tiny_processor()
        weights = warm_start(processor, ENV, TURNS, HISTORY, args.sft_steps, Path(tmp))
        sft_wall = time.perf_counter() - start
    model = build_tiny_qwen2_vl(processor)
    model.load_state_dict(weights)
    before = Player(model, processor, args.threads).measure(args.episodes)
    steps, runs = args.steps, {}
    for method in args.methods:
        runs[method] = train(method, weights, steps, 60 * args.minutes, settings)
        steps = runs[method].steps  # the first run's count is every later run's
    gaps = [run.gap for run in runs.values() if run.gap is not None]
    gap = f"{max(gaps):.1e}" if gaps else "none (no step)"
    print(
        f"\nline walk (start {DISTANCE} cells from the goal, {TURNS} replies, a lamp picture each turn), "
        f"tiny Qwen2-VL, CPU, {args.threads} torch threads; warm start: {args.sft_steps} SFT steps on "
        f"oracle demonstrations ({sft_wall:.0f} s), success before by the goal's side: left "
        f"{100 * before.left:.0f}% / right {100 * before.right:.0f}%; a step: {args.groups} seeds x "
        f"{args.group_size} episodes, verl's vanilla PPO loss, AdamW lr {args.lr:g}; success over "
        f"{args.episodes} held-out episodes, sampled at temperature 1; trainer vs rollout log probs, first "
        f"batch: max |diff| {gap}\n"
    )
    print(
        "| method | steps | wall (s) | success before | success after | change (points) "
        "| success after, goal left / right | optimal moves before | optimal moves after |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for method, run in runs.items():
        after = run.after
        print(
            f"| {METHODS[method]} | {run.steps} | {run.wall:.0f} | {100 * before.success:.1f}% | "
            f"{100 * after.success:.1f}% | {100 * (after.success - before.success):+.1f} | "
            f"{100 * after.left:.0f}% / {100 * after.right:.0f}% | {100 * before.optimal:.1f}% | "
            f"{100 * after.optimal:.1f}% |"
        )


if __name__ == "__main__":
    main()
