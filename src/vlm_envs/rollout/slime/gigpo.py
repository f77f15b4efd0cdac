"""GiGPO for slime: ``--custom-reward-post-process-path vlm_envs.rollout.slime.gigpo.post_process_rewards``.

slime calls :func:`post_process_rewards` once per rollout, with its args and the flat list of the rollout's
samples, in place of its own per-group normalisation (``RolloutManager._post_process_rewards`` in
``slime/ray/rollout.py``), and trains on the second list it returns: with ``--advantage-estimator grpo``
(or ``gspo``, ``cispo``) each sample's value becomes the advantage of every one of its tokens
(``get_grpo_returns`` in ``slime/utils/ppo_utils.py``). These values are GiGPO's advantages
(:mod:`vlm_envs.credit.gigpo`), final: slime's own normalisation is not run on them (no flag needed;
``--disable-rewards-normalization`` and ``--disable-grpo-std-normalization`` change nothing here), and
``--normalize-advantages`` (off by default) would whiten them again over the whole batch.

Settings, from the ``--custom-config-path`` YAML (slime's args), checked at the first batch:
``vlm_envs_gigpo_step_weight`` (the step-level term's weight, a number >= 0; default 1),
``vlm_envs_gigpo_gamma`` (the discount of the returns from a turn on, in [0, 1]; default 0.95) and
``vlm_envs_gigpo_scale`` (``std``: divide by the group's standard deviation, ``mean``: only centre; default
``std``, or ``mean`` under ``--disable-grpo-std-normalization``, as slime's GRPO does).

A *group* is slime's ``Sample.group_index``: the ``--n-samples-per-prompt`` samples of one prompt, which the
hook plays on one seed (a row's own seed, else the group index). How each sample counts:

- a *turn sample* (a windowed history's, :mod:`vlm_envs.rollout.slime`): one turn of the episode
  ``metadata["vlm_envs"]["episode_id"]``, acting from its ``state_key``, with the episode's return (the
  record's ``reward``, the env's; where the env has none, slime's reward model scored the samples: the
  reward of the episode's latest turn's sample that has one) and the discounted return from its ``turn``
  on of ``reward_breakdown.step_rewards`` (the env's step rewards, never shaped). A turn without a state
  key (an env that does not say) joins no anchor state: episode level only.
- any other sample with a reward (a full-history episode, another hook's sample, a turn sample whose record
  does not read: a missing key, a wrong type, NaN): an episode of its own in its group, with its reward as
  the return: episode level only (GRPO's advantage).
- a sample that FAILED or was ABORTED (its status or its record's says so), or without a reward: advantage
  0, in no group, as the other trainers leave them out (:mod:`vlm_envs.rewards`).

A reward, from a sample or a record, is one :func:`~vlm_envs.rewards.check_reward` accepts (a finite
number within ``1e6``, so no statistic overflows); anything else is no reward.

A sample with no ``group_index`` is a group with its own episode's samples alone. ``raw_rewards`` are the
samples' own rewards (0.0 where there is none), for slime's logs. Nothing here raises on a sample; a bad
setting raises ``ValueError`` naming its key.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Hashable, Sequence
from typing import Any

from vlm_envs.credit.gigpo import (
    GAMMA,
    SCALES,
    STEP_WEIGHT,
    CreditTurn,
    Scale,
    discounted_returns,
    gigpo_advantages,
)
from vlm_envs.rewards import RewardError, check_reward
from vlm_envs.rollout.history import check_gamma
from vlm_envs.rollout.record import RECORD_KEY
from vlm_envs.rollout.trajectory import Status

#: slime's estimators that train on the returned values as advantages (slime/backends/megatron_utils/loss.py,
#: ``compute_advantages_and_returns``); the others (``ppo``, ``reinforce_plus_plus*``) treat them as rewards.
ADVANTAGE_ESTIMATORS = ("grpo", "gspo", "cispo")
#: An episode's statuses (the values of slime's ``Sample.Status``), and those left out of the advantage.
STATUSES = tuple(status.value for status in Status)
LEFT_OUT = (Status.FAILED.value, Status.ABORTED.value)


@dataclasses.dataclass(frozen=True)
class GigpoSettings:
    """GiGPO's parameters (:func:`~vlm_envs.credit.gigpo.gigpo_advantages`) for slime."""

    step_weight: float = STEP_WEIGHT
    gamma: float = GAMMA
    scale: Scale = "std"

    @classmethod
    def from_args(cls, args: Any) -> GigpoSettings:
        """Read ``vlm_envs_gigpo_*`` from slime's args; ``ValueError`` naming the key for a bad value, or
        for an ``advantage_estimator`` that does not take the values as advantages."""
        estimator = getattr(args, "advantage_estimator", "grpo")
        if estimator not in ADVANTAGE_ESTIMATORS:
            raise ValueError(
                f"GiGPO's values are advantages: --advantage-estimator must be one of "
                f"{', '.join(ADVANTAGE_ESTIMATORS)}, got {estimator!r:.80}"
            )
        weight = getattr(args, "vlm_envs_gigpo_step_weight", None)
        weight = STEP_WEIGHT if weight is None else weight
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not 0 <= weight < math.inf:
            raise ValueError(f"vlm_envs_gigpo_step_weight must be a finite number >= 0, got {weight!r:.80}")
        gamma = getattr(args, "vlm_envs_gigpo_gamma", None)
        gamma = GAMMA if gamma is None else check_gamma(gamma, "vlm_envs_gigpo_gamma")
        scale = getattr(args, "vlm_envs_gigpo_scale", None)
        if scale is None:
            scale = "std" if getattr(args, "grpo_std_normalization", True) else "mean"
        if scale not in SCALES:
            raise ValueError(f"vlm_envs_gigpo_scale must be one of {', '.join(SCALES)}, got {scale!r:.80}")
        return cls(step_weight=float(weight), gamma=gamma, scale=scale)


@dataclasses.dataclass(frozen=True)
class TurnRead:
    """What a turn sample's record says, read and checked (:func:`read_turn`)."""

    episode: str
    turn: int
    state_key: str | None
    step_return: float
    #: The env's episode reward (``None``: the env has none; slime's reward model scored the samples).
    episode_reward: float | None


def post_process_rewards(args: Any, samples: Sequence[Any]) -> tuple[list[float], list[float]]:
    """``(raw_rewards, advantages)``, one each per sample in order: what slime's
    ``--custom-reward-post-process-path`` returns (see the module for how each sample counts)."""
    settings = GigpoSettings.from_args(args)
    rewards = [sample_reward(args, sample) for sample in samples]
    members: list[tuple[int, Hashable, Hashable, str | None, float]] = []
    returns: dict[tuple[Hashable, Hashable], tuple[int, float]] = {}  # the return of its latest turn
    for i, (sample, reward) in enumerate(zip(samples, rewards, strict=True)):
        if left_out(sample):
            continue
        read = read_turn(getattr(sample, "metadata", None), settings.gamma)
        if read is None:
            episode, turn, state_key, step_return, value = ("sample", i), 0, None, 0.0, reward
        else:
            episode, turn, state_key, step_return = read.episode, read.turn, read.state_key, read.step_return
            value = reward if read.episode_reward is None else read.episode_reward
        group_index = getattr(sample, "group_index", None)
        grouped = isinstance(group_index, int) and not isinstance(group_index, bool)
        group = ("group", group_index) if grouped else ("alone", episode)
        if value is not None and returns.get((group, episode), (-1, 0.0))[0] < turn:
            returns[group, episode] = (turn, value)
        members.append((i, group, episode, state_key, step_return))
    members = [m for m in members if (m[1], m[2]) in returns]  # an episode without a reward counts nowhere
    turns = [CreditTurn(g, e, key, returns[g, e][1], step) for _, g, e, key, step in members]
    advantages = [0.0] * len(samples)
    values = gigpo_advantages(turns, step_weight=settings.step_weight, scale=settings.scale)
    for (i, *_), value in zip(members, values, strict=True):
        advantages[i] = value
    return [0.0 if r is None else r for r in rewards], advantages


def sample_reward(args: Any, sample: Any) -> float | None:
    """The sample's reward as slime reads it (``args.reward_key`` picks from a dict), where
    :func:`~vlm_envs.rewards.check_reward` accepts it; ``None`` otherwise."""
    reward = getattr(sample, "reward", None)
    key = getattr(args, "reward_key", None)
    if key and isinstance(reward, dict):
        reward = reward.get(key)
    return _reward(reward)


def left_out(sample: Any) -> bool:
    """Whether the sample FAILED or was ABORTED: its own status says so, or its record's."""
    metadata = getattr(sample, "metadata", None)
    record = metadata.get(RECORD_KEY) if isinstance(metadata, dict) else None
    status = record.get("status") if isinstance(record, dict) else None
    own = getattr(getattr(sample, "status", None), "value", None)
    return any(isinstance(value, str) and value in LEFT_OUT for value in (own, status))


def read_turn(metadata: Any, gamma: float) -> TurnRead | None:
    """The turn a sample's ``metadata[RECORD_KEY]`` says it is (a windowed history's turn sample), its
    return from that turn on discounted by ``gamma``; ``None`` where the record does not read as one
    (any missing key, wrong type, or reward :func:`~vlm_envs.rewards.check_reward` refuses)."""
    record = metadata.get(RECORD_KEY) if isinstance(metadata, dict) else None
    if not isinstance(record, dict):
        return None
    episode, turn, key = record.get("episode_id"), record.get("turn"), record.get("state_key")
    breakdown = record.get("reward_breakdown")
    steps = breakdown.get("step_rewards") if isinstance(breakdown, dict) else None
    if not isinstance(episode, str) or not episode or type(turn) is not int or not isinstance(steps, list):
        return None
    if not isinstance(status := record.get("status"), str) or status not in STATUSES:
        return None
    steps = [_reward(step) for step in steps]
    if not 0 <= turn < len(steps) or None in steps or (key is not None and not isinstance(key, str)):
        return None
    episode_reward = record.get("reward")
    if episode_reward is not None and (episode_reward := _reward(episode_reward)) is None:
        return None
    return TurnRead(episode, turn, key, discounted_returns(steps[turn:], gamma)[0], episode_reward)


def _reward(value: Any) -> float | None:
    try:
        return check_reward(value, "a reward")
    except RewardError:
        return None
