"""``vlm_envs_gigpo`` on real outputs of our agent loop: one prompt's group of Sokoban episodes with scripted
replies that come back to states other episodes acted from, played by ``VlmEnvsAgentLoop`` (full history
and ``window:1``), put into a batch as verl does, and run through verl's own ``compute_advantage``. Each
turn's generated tokens must carry the GiGPO advantage worked out apart, from the env played directly."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip(
    "verl.experimental.agent_loop.agent_loop",
    reason="verl is not installed (pip install 'vlm-envs[verl]'; verl requires transformers<5.11)",
)

import torch
from sft_helpers import ReplyEngine
from verl import DataProto
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl_support import SAMPLING, ScriptedServerManager, agent_loop_worker, verl_config

from vlm_envs import build_env
from vlm_envs.credit.gigpo import CreditTurn, discounted_returns, gigpo_advantages
from vlm_envs.rollout import verl as loop_module
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.verl_gigpo import ADV_ESTIMATOR, records_for_rows, records_of
from vlm_envs.testing import build_tiny_processor

SOKOBAN = {"grid_size": [5, 5], "num_boxes": 1, "cell_size": 16}
SEED, MAX_TURNS, GAMMA, UID = 4, 4, 0.9, "prompt-0"
PROMPT_LENGTH, RESPONSE_LENGTH = 1024, 768


def move(name: str) -> str:
    return f"<answer>{name}</answer>"


def scripts() -> dict[str, list[str]]:
    """Seed 4 starts in s0, two turns from the goal. ``solve`` plays the oracle (s0 -> s1 -> solved);
    ``detour`` goes Up and back Down to s0 first, then solves (s0, s0', s0, s1); ``stuck`` pushes Down
    into a wall for four turns. ``solve`` and ``detour`` both act from s0 and from s1."""
    env = build_env("sokoban", **SOKOBAN)
    env.reset(seed=SEED)
    first = env.oracle_response()
    env.step(first)
    second = env.oracle_response()
    return {
        "solve": [first, second],
        "detour": [move("Up"), move("Down"), first, second],
        "stuck": [move("Down")] * MAX_TURNS,
    }


def played(replies: list[str]) -> tuple[list[str | None], list[float], float]:
    """The env played directly: the state key before each reply, the step rewards, the episode reward."""
    env = build_env("sokoban", args=SimpleNamespace(max_turns=MAX_TURNS), **SOKOBAN)
    env.reset(seed=SEED)
    keys, rewards = [], []
    for reply in replies:
        keys.append(env.state_key())
        _, done, info = env.step(reply)
        rewards.append(info.reward)
        if done:
            break
    return keys, rewards, env.episode_reward()


def expected() -> dict[tuple[str, int], float]:
    """GiGPO's advantage of each (episode, turn), from the direct play (std scale, step weight 1)."""
    turns, names = [], []
    for name, replies in scripts().items():
        keys, rewards, reward = played(replies)
        for t, (key, ret) in enumerate(zip(keys, discounted_returns(rewards, GAMMA), strict=True)):
            turns.append(CreditTurn(UID, name, key, reward, ret))
            names.append((name, t))
    return dict(zip(names, gigpo_advantages(turns), strict=True))


@pytest.fixture(scope="module")
def config():
    return verl_config(
        [
            f"data.max_prompt_length={PROMPT_LENGTH}",
            f"data.max_response_length={RESPONSE_LENGTH}",
            f"algorithm.adv_estimator={ADV_ESTIMATOR}",
            f"+algorithm.vlm_envs_gigpo.gamma={GAMMA}",
        ]
    )


@pytest.fixture(scope="module")
def processor():
    return build_tiny_processor("qwen2_vl")


def play(config, processor, replies: list[str], history: str) -> Any:
    """One row of the group, played by our loop against verl's (scripted) server manager."""
    codec = ChatCodec(processor)
    loop = loop_module.VlmEnvsAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=ScriptedServerManager(ReplyEngine(codec, replies)),
        tokenizer=processor.tokenizer,
        processor=processor,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
    )
    extra = {
        "env": "sokoban",
        "seed": SEED,
        "env_config": SOKOBAN,
        "max_turns": MAX_TURNS,
        "history": history,
    }
    return asyncio.run(loop.run(dict(SAMPLING), extra_info=extra, raw_prompt=[]))


def mask_runs(mask: list[int]) -> list[range]:
    """The runs of 1s in a response mask: in a full-history response, one per turn's reply."""
    runs, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append(range(start, i))
            start = None
    return runs


def test_full_history_outputs_carry_each_turns_advantage_on_its_tokens(config, processor):
    """verl's legacy worker path assembles the batch: ``_agent_loop_postprocess`` pads each output and
    ``_postprocess`` stacks them, the outputs' extra fields becoming ``non_tensor_batch`` columns."""
    names = list(scripts())
    outs = [play(config, processor, scripts()[name], "full") for name in names]
    assert [o.reward_score for o in outs] == [1.0, 1.0, 0.0]
    worker = agent_loop_worker(
        config, ScriptedServerManager(ReplyEngine(ChatCodec(processor), [])), processor
    )
    padded = [asyncio.run(worker._agent_loop_postprocess(out, False, raw_prompt=[])) for out in outs]
    data = worker._postprocess(padded, input_non_tensor_batch={"uid": np.array([UID] * 3, dtype=object)})
    data.batch["token_level_rewards"] = data.batch["rm_scores"]  # the trainer's step without a KL penalty
    with records_for_rows(list(data.non_tensor_batch["vlm_envs"])):
        data = compute_advantage(data, adv_estimator=ADV_ESTIMATOR, config=config.algorithm)

    want = expected()
    for row, name in enumerate(names):
        mask = data.batch["response_mask"][row].tolist()
        runs = mask_runs(mask)
        assert len(runs) == len(played(scripts()[name])[0])
        got = data.batch["advantages"][row]
        for turn, run in enumerate(runs):
            assert got[run.start : run.stop].tolist() == pytest.approx(
                [want[name, turn]] * len(run), abs=1e-5
            )
        assert not got[torch.tensor(mask) == 0].any()  # observations and padding: 0
    # the detour's two turns from s0 are told apart by their returns; s1 (solved from there both times) not
    assert want["detour", 2] > want["detour", 0]
    assert want["solve", 1] == pytest.approx(want["detour", 3])


def test_windowed_outputs_each_carry_their_turns_advantage(config, processor):
    """The V1 trainer's layout (``AgentLoopWorkerTQ._agent_loop_postprocess``): every output of an episode
    gets its last output's ``reward_score``, then ``as_dict()``; TransferQueue pads the rows with 0. The
    rows are shuffled: the batch's order carries no meaning."""
    rows, turns = [], []
    for name, replies in scripts().items():
        outs = play(config, processor, replies, "window:1")
        assert isinstance(outs, list) and len(outs) == len(played(replies)[0])
        for out in outs[:-1]:
            out.reward_score = outs[-1].reward_score
        rows += [out.as_dict() for out in outs]
        turns += [(name, t) for t in range(len(outs))]
    order = np.random.default_rng(0).permutation(len(rows))
    rows, turns = [rows[i] for i in order], [turns[i] for i in order]

    def stacked(key: str) -> torch.Tensor:
        return torch.nn.utils.rnn.pad_sequence([r[key] for r in rows], batch_first=True, padding_value=0)

    mask = stacked("response_mask")
    data = DataProto.from_dict(
        tensors={"token_level_rewards": stacked("rm_scores"), "response_mask": mask},
        non_tensors={"uid": np.array([UID] * len(rows), dtype=object)},
    )
    with records_for_rows(records_of([r["extra_fields"] for r in rows])):
        data = compute_advantage(data, adv_estimator=ADV_ESTIMATOR, config=config.algorithm)
    want = expected()
    for row, key in enumerate(turns):
        n = int(mask[row].sum())
        got = data.batch["advantages"][row].tolist()
        assert got == pytest.approx([want[key]] * n + [0.0] * (mask.shape[1] - n), abs=1e-5)
