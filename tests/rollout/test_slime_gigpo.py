"""GiGPO through slime's ``--custom-reward-post-process-path``: hand-built groups with hand-worked answers,
the hook's own turn samples of three Sokoban episodes that meet in common states, and hostile metadata."""

from __future__ import annotations

import asyncio
import functools
import math
from types import SimpleNamespace
from typing import Any

import pytest
from rollout_helpers import script, slime_args
from row_helpers import oracle_replies
from slime.rollout.sglang_rollout import GenerateState, generate_and_rm
from slime.utils.types import Sample

from vlm_envs import build_env
from vlm_envs.credit.gigpo import CreditTurn, discounted_returns, gigpo_advantages
from vlm_envs.rollout import slime as hook
from vlm_envs.rollout.slime.gigpo import post_process_rewards


@pytest.fixture(autouse=True)
def fresh_state():
    GenerateState.forget()
    yield
    GenerateState.forget()


def settings(**yaml: Any) -> SimpleNamespace:
    """slime's args as the post-process reads them: its estimator and std switch, and the YAML's keys."""
    return SimpleNamespace(
        **{"advantage_estimator": "grpo", "grpo_std_normalization": True, "reward_key": None, **yaml}
    )


def turn(group: int, episode: str, t: int, key: str | None, steps: list[float], value: float, **record: Any):
    """A turn sample of reward ``value`` as the hook makes it: its record says which episode and turn, where
    it stood, and the env's rewards (the episode's: ``value`` unless ``record`` says otherwise)."""
    fields = {
        "status": "completed",
        "reward": value,
        "reward_breakdown": {"step_rewards": steps},
        "episode_id": episode,
        "turn": t,
        "state_key": key,
    }
    metadata = {"vlm_envs": {**fields, **record}}
    return Sample(group_index=group, reward=value, status=Sample.Status.COMPLETED, metadata=metadata)


def plain(group: int | None, reward: Any) -> Sample:
    """A sample without a turn record (a full-history episode, another hook's sample)."""
    return Sample(group_index=group, reward=reward, status=Sample.Status.COMPLETED)


def hand_batch() -> list[Sample]:
    """Group 0: episode a goes s0 -> s1 -> goal (steps 0, 1; return 1), episode b s0 -> s2 -> s2 (steps 0, 0,
    0; return 0), and c is a full-history episode of reward 1. Group 1 also has a state "s0": e (step 1,
    return 1) and g (step 0, return 0) act from it, and f, which FAILED after one turn, did too."""
    return [
        turn(0, "a", 0, "s0", [0.0, 1.0], 1.0),
        turn(0, "a", 1, "s1", [0.0, 1.0], 1.0),
        turn(0, "b", 0, "s0", [0.0, 0.0, 0.0], 0.0),
        turn(0, "b", 1, "s2", [0.0, 0.0, 0.0], 0.0),
        turn(0, "b", 2, "s2", [0.0, 0.0, 0.0], 0.0),
        plain(0, 1.0),
        turn(1, "e", 0, "s0", [1.0], 1.0),
        turn(1, "g", 0, "s0", [0.0], 0.0),
        turn(1, "f", 0, "s0", [0.0], 0.0, status="failed"),
    ]


def test_hand_built_groups_with_the_mean_scale():
    """gamma 0.5, scale mean, step weight 1. Episode level, group 0: returns a 1, b 0, c 1, mean 2/3 ->
    a +1/3, b -2/3, c +1/3; group 1: e +1/2, g -1/2 (f FAILED: left out, 0). Step level: the returns from
    each turn are a [0.5, 1], b [0, 0, 0]; group 0's s0 holds a0 (0.5) and b0 (0): +0.25 and -0.25; s1 is
    seen once: 0; s2 twice with equal returns: 0. Group 1's s0 is another anchor state: e 1, g 0 -> +-0.5."""
    args = settings(vlm_envs_gigpo_gamma=0.5, vlm_envs_gigpo_scale="mean")
    raw, advantages = post_process_rewards(args, hand_batch())
    third = 1 / 3
    expected = [third + 0.25, third, -2 * third - 0.25, -2 * third, -2 * third, third, 1.0, -1.0, 0.0]
    assert advantages == pytest.approx(expected, abs=1e-12)
    assert raw == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]


def test_hand_built_groups_with_the_std_scale_and_a_step_weight():
    """Scale std (Bessel's, plus 1e-6), step weight 2: group 0's episode returns [1, 0, 1] have std
    sqrt(1/3), s0's step returns [0.5, 0] std sqrt(0.125); group 1's returns [1, 0], episode and step
    alike, std sqrt(0.5): e and g get +-(1 + 2) * 0.5 / (sqrt(0.5) + 1e-6)."""
    args = settings(vlm_envs_gigpo_gamma=0.5, vlm_envs_gigpo_step_weight=2)
    _, advantages = post_process_rewards(args, hand_batch())
    up, down = (v / (math.sqrt(1 / 3) + 1e-6) for v in (1 / 3, -2 / 3))
    step = 0.25 / (math.sqrt(0.125) + 1e-6)
    pair = 3 * 0.5 / (math.sqrt(0.5) + 1e-6)
    expected = [up + 2 * step, up, down - 2 * step, down, down, up, pair, -pair, 0.0]
    assert advantages == pytest.approx(expected, abs=1e-12)
    # slime's --disable-grpo-std-normalization makes the mean scale the default; the YAML's key wins
    mean = post_process_rewards(settings(vlm_envs_gigpo_gamma=0.5, vlm_envs_gigpo_scale="mean"), hand_batch())
    args = settings(vlm_envs_gigpo_gamma=0.5, grpo_std_normalization=False)
    assert post_process_rewards(args, hand_batch()) == mean
    args.vlm_envs_gigpo_scale = "std"
    assert post_process_rewards(args, hand_batch()) == post_process_rewards(
        settings(vlm_envs_gigpo_gamma=0.5), hand_batch()
    )


def test_an_episode_whose_env_has_no_reward_takes_its_last_turns_reward_and_a_lone_sample_gets_nothing():
    """Turn records of reward None (slime's RM scored the samples: 0 on turn 0, 1 on turn 1): the episode's
    return is 1, against a plain sample's 0 (mean scale: +-0.5). A sample without a group is alone: 0."""
    a0 = turn(3, "a", 0, "s", [0.0, 0.0], 0.0, reward=None)
    a1 = turn(3, "a", 1, "t", [0.0, 0.0], 1.0, reward=None)
    _, advantages = post_process_rewards(
        settings(vlm_envs_gigpo_scale="mean"), [a1, a0, plain(3, 0.0), plain(None, 5.0)]
    )
    assert advantages == [0.5, 0.5, -0.5, 0.0]


# ---- the hook's own turn samples --------------------------------------------------------------------------

SOKOBAN = {"grid_size": [6, 6], "num_boxes": 1}
#: Sokoban seed 2 (6x6, one box; the player starts on the target), at most 5 turns. A plays the oracle: s0 ->
#: s1 -> s2 -> solved. B steps off the target ("Up": state u) and back to s0, then plays the oracle's three
#: replies from there. C walks into a wall (s0 again), steps off to u, pushes the box against the top wall
#: and walks on in two states seen once, unsolved.
ORACLE = oracle_replies("sokoban", 2, **SOKOBAN)
EPISODES = {
    "A": ORACLE,
    "B": ["<answer>Up</answer>", "<answer>Down</answer>", *ORACLE],
    "C": [
        "<answer>Down</answer>",
        "<answer>Up</answer>",
        "<answer>Up</answer>",
        *["<answer>Down</answer>"] * 2,
    ],
}

make_args = functools.partial(
    slime_args,
    rollout_max_response_len=64,
    vlm_envs_check_template=False,
    custom_generate_function_path="vlm_envs.rollout.slime.generate",
    rollout_interaction_env_path="sokoban",
    max_turns=5,
    vlm_envs_history="window:1",
    advantage_estimator="grpo",
    grpo_std_normalization=True,
    reward_key=None,
    vlm_envs_gigpo_gamma=0.5,
)


def play_group(server, codec) -> list[list[Sample]]:
    """The three episodes of one prompt group (slime's group index 0), one after the other, through slime's
    generate_and_rm and the hook: each a list of turn samples."""
    args = make_args(server)

    async def main() -> list[list[Sample]]:
        try:
            out = []
            for index, replies in enumerate(EPISODES.values()):
                script(server, codec, *replies)
                sample = Sample(group_index=0, index=index, metadata={"seed": 2, "env_config": SOKOBAN})
                out.append(await generate_and_rm(args, sample, {"temperature": 1.0, "max_new_tokens": 64}))
            return out
        finally:
            await hook.close()

    return asyncio.run(main())


def direct_turns(gamma: float) -> list[CreditTurn]:
    """The same episodes played on the env alone: each turn's state key and return from it on."""
    turns = []
    for name, replies in EPISODES.items():
        env = build_env("sokoban", args=SimpleNamespace(max_turns=5), **SOKOBAN)
        env.reset(seed=2)
        keys, steps = [], []
        for reply in replies:
            keys.append(env.state_key())
            steps.append(env.step(reply)[2].reward)
        returns = discounted_returns(steps, gamma)
        turns += [
            CreditTurn(0, name, key, env.episode_reward(), r) for key, r in zip(keys, returns, strict=True)
        ]
    return turns


def test_the_hooks_turn_samples_get_gigpos_advantages_of_the_states_they_met(served):
    server, codec = served
    episodes = play_group(server, codec)
    assert [len(e) for e in episodes] == [3, 5, 5]
    samples = [s for episode in episodes for s in episode]  # slime flattens the rollout
    args = make_args(server)
    _, advantages = post_process_rewards(args, samples)
    expected = gigpo_advantages(direct_turns(0.5))
    assert advantages == pytest.approx(expected, abs=1e-12)
    # the step-level part alone: the same with weight 1 minus weight 0
    args.vlm_envs_gigpo_step_weight = 0
    step = [a - b for a, b in zip(advantages, post_process_rewards(args, samples)[1], strict=True)]
    a, b, c = step[:3], step[3:8], step[8:]
    # u (B's turn 1, C's turn 2): returns 0.5^3 and 0 -> opposite advantages, +-1/sqrt(2) less eps
    assert b[1] > 0 > c[2] and b[1] == pytest.approx(-c[2]) == pytest.approx(1 / math.sqrt(2), abs=1e-5)
    # s0 (A0, B0, B2, C0, C1): returns 0.25, 0.0625, 0.25, 0, 0 (mean 0.1125): the oracle's turns from s0
    # above it, B's detour (its goal two turns later) below, C's turns lower still
    assert a[0] == b[2] > 0 > b[0] > c[0] == c[1]
    # s1 and s2 each seen by A and B with equal returns, and C's last two states seen once: nothing
    assert a[1] == a[2] == b[3] == b[4] == c[3] == c[4] == 0.0
    keys = [s.metadata["vlm_envs"]["state_key"] for s in samples]
    assert keys == [t.state_key for t in direct_turns(0.5)]
    # s0 (A0, B0, B2, C0, C1) and u (B1, C2)
    assert keys[0] == keys[3] == keys[5] == keys[8] == keys[9] != keys[4] == keys[10]
    # the batch's order does not matter
    args.vlm_envs_gigpo_step_weight = 1
    assert post_process_rewards(args, samples[::-1])[1] == pytest.approx(advantages[::-1], abs=1e-12)


# ---- hostile metadata and bad settings --------------------------------------------------------------------


def hostile(record: dict[str, Any] | None = None, drop: str | None = None, metadata: Any = None) -> Sample:
    """A group-0 turn sample of reward 1 whose record has ``record``'s values and lacks ``drop``."""
    sample = turn(0, "h", 0, "s0", [1.0], 1.0, **(record or {}))
    if drop is not None:
        del sample.metadata["vlm_envs"][drop]
    if metadata is not None:
        sample.metadata = metadata
    return sample


BIG = 1.7e308  # two of them overflow a sum; math.fsum raises
HOSTILE = {
    "metadata is a string": hostile(metadata="vlm_envs"),
    "the record is a list": hostile(metadata={"vlm_envs": [1]}),
    "no turn": hostile(drop="turn"),
    "no episode id": hostile(drop="episode_id"),
    "no step rewards": hostile(drop="reward_breakdown"),
    "turn as a string": hostile({"turn": "0"}),
    "turn as a bool": hostile({"turn": False}),
    "turn past the steps": hostile({"turn": 1}),
    "a negative turn": hostile({"turn": -1}),
    "an int episode id": hostile({"episode_id": 7}),
    "an int state key": hostile({"state_key": 3}),
    "step rewards as a dict": hostile({"reward_breakdown": {"step_rewards": {"0": 1.0}}}),
    "a NaN step reward": hostile({"reward_breakdown": {"step_rewards": [math.nan]}}),
    "a string step reward": hostile({"reward_breakdown": {"step_rewards": ["1"]}}),
    "a step reward beyond 1e6": hostile({"reward_breakdown": {"step_rewards": [2e6]}}),
    "an overflowing return": hostile({"reward_breakdown": {"step_rewards": [BIG, BIG]}}),
    "a status as a list": hostile({"status": ["failed"]}),
    "an infinite episode reward": hostile({"reward": math.inf}),
    "a NaN episode reward": hostile({"reward": math.nan}),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_record_counts_as_a_sample_without_one_and_the_batch_stays_intact(name):
    args = settings(vlm_envs_gigpo_gamma=0.5)
    got = post_process_rewards(args, [*hand_batch(), HOSTILE[name]])
    assert got == post_process_rewards(args, [*hand_batch(), plain(0, 1.0)])


@pytest.mark.parametrize("reward", [None, math.nan, math.inf, "1", {"score": 1.0}, 2e6, -BIG])
def test_a_sample_without_a_reward_gets_nothing_and_changes_nothing(reward):
    """No reward: none, not a number, or one :func:`vlm_envs.rewards.check_reward` refuses (beyond 1e6)."""
    args = settings(vlm_envs_gigpo_gamma=0.5)
    raw, advantages = post_process_rewards(args, [*hand_batch(), plain(0, reward)])
    assert (raw[-1], advantages[-1]) == (0.0, 0.0)
    assert (raw[:-1], advantages[:-1]) == post_process_rewards(args, hand_batch())


@pytest.mark.parametrize("status", [Sample.Status.FAILED, Sample.Status.ABORTED])
def test_a_failed_or_aborted_sample_is_left_out_whatever_its_reward(status):
    args = settings(vlm_envs_gigpo_gamma=0.5)
    failed = turn(0, "h", 0, "s0", [1.0], 1.0)
    failed.status = status
    raw, advantages = post_process_rewards(args, [*hand_batch(), failed, plain(0, 1.0)])
    assert advantages[-2] == 0.0 and raw[-2] == 1.0
    expected = post_process_rewards(args, [*hand_batch(), plain(0, 1.0)])[1]
    assert advantages[:-2] + advantages[-1:] == expected


def test_a_reward_key_picks_from_a_dict_reward():
    args = settings(reward_key="score", vlm_envs_gigpo_scale="mean")
    raw, advantages = post_process_rewards(args, [plain(0, {"score": 2.0}), plain(0, {"score": 0.0})])
    assert (raw, advantages) == ([2.0, 0.0], [1.0, -1.0])


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("vlm_envs_gigpo_step_weight", -1, "vlm_envs_gigpo_step_weight must be a finite number >= 0, got -1"),
        (
            "vlm_envs_gigpo_step_weight",
            math.nan,
            "vlm_envs_gigpo_step_weight must be a finite number >= 0, got nan",
        ),
        (
            "vlm_envs_gigpo_step_weight",
            math.inf,
            "vlm_envs_gigpo_step_weight must be a finite number >= 0, got inf",
        ),
        (
            "vlm_envs_gigpo_step_weight",
            True,
            "vlm_envs_gigpo_step_weight must be a finite number >= 0, got True",
        ),
        (
            "vlm_envs_gigpo_step_weight",
            "1",
            "vlm_envs_gigpo_step_weight must be a finite number >= 0, got '1'",
        ),
        ("vlm_envs_gigpo_gamma", 1.5, "vlm_envs_gigpo_gamma must be a number in [0, 1], got 1.5"),
        ("vlm_envs_gigpo_gamma", math.nan, "vlm_envs_gigpo_gamma must be a number in [0, 1], got nan"),
        ("vlm_envs_gigpo_gamma", "0.9", "vlm_envs_gigpo_gamma must be a number in [0, 1], got '0.9'"),
        ("vlm_envs_gigpo_scale", "max", "vlm_envs_gigpo_scale must be one of std, mean, got 'max'"),
        ("advantage_estimator", "ppo", "--advantage-estimator must be one of grpo, gspo, cispo, got 'ppo'"),
        ("advantage_estimator", "reinforce_plus_plus", "got 'reinforce_plus_plus'"),
    ],
)
def test_a_bad_setting_stops_the_first_batch_with_one_line_naming_it(key, value, message):
    args = settings()
    setattr(args, key, value)
    with pytest.raises(ValueError) as caught:
        post_process_rewards(args, hand_batch())
    assert message in str(caught.value) and "\n" not in str(caught.value)
