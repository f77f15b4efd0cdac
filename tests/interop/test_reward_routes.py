"""One reward check on the client routes: an env whose reward is NaN, inf, None, 1e308 or raises (or a
step reward NaN) never hands a number to TRL's environment route, the verifiers taskset, or through
RemoteEnv; each refuses the episode's reward with the reason in one line, and the run goes on."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")
pytest.importorskip("verifiers")

import datasets
import torch
import trl_helpers
from hostile_ws_server import HostileServer, Session, frame, well_behaved
from oracle_server import Episode, OracleServer
from reward_fault_helpers import REASONS
from seeded_reward_faults import FAULTS
from trl import GRPOTrainer
from trl.chat_template_utils import qwen3_vl_chat_template

from vlm_envs import build_env
from vlm_envs.interop.trl_environment import TrlEnvironment, environment_factory
from vlm_envs.remote import RemoteEnv
from vlm_envs.rewards import RewardError
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.contract import EngineOutput
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.trajectory import Status
from vlm_envs.serve.config import ServeConfig
from vlm_envs.testing import build_tiny_processor, build_tiny_qwen3_vl

sys.path.insert(0, str(Path(__file__).parents[1] / "serve"))
from serve_support import ServerThread

SEEDED_FAULTS = str(Path(__file__).parents[1] / "support" / "seeded_reward_faults.py")
#: The faults every route is tried with, and the seed that plays each.
FAULT_SEEDS = {fault: seed for seed, fault in enumerate(FAULTS) if fault}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def play_oracle(env: TrlEnvironment, reference: Any) -> None:
    """The oracle's replies through ``env``'s ``reply`` tool until the episode ends."""
    for _ in range(50):
        answer = reference.oracle_response()
        if answer is None or env.last_info.get("done") or env.reward_error:
            return
        reference.step(answer)
        env.reply(answer)


@pytest.mark.parametrize("fault", list(FAULT_SEEDS))
def test_trls_environment_route_leaves_a_broken_reward_unscored(fault: str, caplog) -> None:
    cls = environment_factory(SEEDED_FAULTS, grid_size=[5, 5], num_boxes=1)
    env, reference = cls(), build_env("sokoban", grid_size=[5, 5], num_boxes=1)
    env.reset(seed=FAULT_SEEDS[fault])
    reference.reset(seed=FAULT_SEEDS[fault])
    play_oracle(env, reference)
    assert env.get_reward() is None and env.reward_error == REASONS[fault]
    assert env.reply("more") == "The episode is over: do not call any more tools."
    assert [r.getMessage().count("\n") for r in caplog.records] == [0] and REASONS[fault] in caplog.text
    env.reset(seed=0)  # the next episode is scored again
    reference.reset(seed=0)
    play_oracle(env, reference)
    assert env.get_reward() == 1.0 and env.reward_error is None


def test_trl_trains_on_with_broken_rewards_left_out(tmp_path: Path) -> None:
    """A real GRPO step on TRL's environment route: seed 0's rollouts score, those of the seed whose
    reward is 1e308 are left unscored; TRL's logged reward is the scored ones', every parameter finite."""
    huge = FAULT_SEEDS["huge"]
    processor = build_tiny_processor("qwen3_vl")
    processor.chat_template = qwen3_vl_chat_template
    model = build_tiny_qwen3_vl(processor).train()
    data = datasets.Dataset.from_list(
        [{"prompt": [{"role": "user", "content": "Play."}], "seed": seed} for seed in (0, huge)]
    )
    args = trl_helpers.config(tmp_path, max_steps=1, max_tool_calling_iterations=1)
    factory = environment_factory(SEEDED_FAULTS, processor, fault_env="image_probe", questions=2)
    trainer = GRPOTrainer(
        model=model, args=args, train_dataset=data, processing_class=processor, environment_factory=factory
    )
    trainer.train()
    played = [env for env in trainer.environments if isinstance(env, TrlEnvironment)]
    refused = [env for env in played if env.reward_error]
    assert len(played) == 4 and len(refused) == 2
    assert all(env.reward_error == REASONS["huge"] and env.get_reward() is None for env in refused)
    scored = [env.get_reward() for env in played if not env.reward_error]
    logged = trainer.state.log_history[0]
    assert logged[f"rewards/{type(played[0]).__name__}/mean"] == pytest.approx(sum(scored) / 2)
    assert math.isfinite(logged["loss"]) and all(torch.isfinite(p).all() for p in model.parameters())


def test_the_verifiers_taskset_fails_the_trace_with_the_reason(tmp_path: Path) -> None:
    """verifiers' own runner (vf-eval): seed 0 scores 1.0; each broken reward's trace is not ok, holds
    no episode reward and names the reason (a TaskError); the run exits 0."""
    episodes = [Episode(SEEDED_FAULTS, seed, {}) for seed in range(len(FAULTS))]
    out = tmp_path / "out"
    command = [
        str(Path(sys.executable).parent / "vf-eval"),
        "--env.taskset.id", "vlm-envs-verifiers",
        "--env.taskset.env", SEEDED_FAULTS,
        "--env.taskset.num-examples", str(len(FAULTS)),
        "-m", "oracle",
        "--no-push", "--no-rich",
        "-o", str(out),
    ]  # fmt: skip
    with OracleServer(episodes) as server:
        done = subprocess.run(
            [*command, "--client.base-url", server.url],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PRIME_API_KEY": "unused"},
            cwd=tmp_path,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    (traces_file,) = out.glob("*/traces.jsonl")
    traces = {
        trace["task"]["data"]["info"]["seed"]: trace
        for line in traces_file.read_text().splitlines()
        for trace in json.loads(line)["traces"]
    }
    assert traces[0]["ok"] and traces[0]["rewards"]["episode_reward"]["score"] == 1.0
    for fault, seed in FAULT_SEEDS.items():
        trace = traces[seed]
        assert not trace["ok"] and "episode_reward" not in trace["rewards"], fault
        (error,) = trace["errors"]
        assert error["type"] == "TaskError" and error["message"].endswith(REASONS[fault]), error


# ---- RemoteEnv, against a server speaking the wire contract: reward_error, null rewards ------------


def refusing(episode_reward: Any, reward_error: str | None, step_reward: Any = 0.5, has_reward: bool = True):
    """A script whose replies carry these rewards (the server's refusal in ``reward_error``)."""

    def script(request: dict[str, Any], session: Session) -> list[str | bytes]:
        meta = {"episode_reward": episode_reward, "reward_error": reward_error}
        if request["type"] == "reset":
            body = session.reset_reply(request, has_episode_reward=has_reward, **meta)
        elif request["type"] == "step":
            body = session.step_reply(done=True, reward=step_reward, **meta)
        else:
            return well_behaved(request, session)
        return [frame("observation", body)]

    return script


def test_remote_env_raises_the_servers_reason_for_a_refused_reward() -> None:
    reason = "the episode reward is nan, not a finite number"
    with HostileServer(refusing(None, reason)) as url:
        env = RemoteEnv(url, "probe", timeout_s=10)
        env.reset(seed=1)
        with pytest.raises(RewardError, match=f"^the server refused a reward of this episode: {reason}$"):
            env.episode_reward()
        env.close()
    with HostileServer(refusing(None, reason, step_reward=None)) as url:
        env = RemoteEnv(url, "probe", timeout_s=10)
        env.reset(seed=1)
        with pytest.raises(RewardError, match=f"^the server refused the step reward: {reason}$"):
            env.step("go")
        env.close()


@pytest.mark.parametrize(
    ("episode_reward", "has_reward", "expected"),
    [
        (None, True, "the server sent no episode reward"),  # null is never read as 0.0
        (1e308, True, "the served episode reward is 1e\\+308, beyond the accepted magnitude"),
        (None, False, 0.0),  # an env without an episode reward: the trainer's reward model scores
        (0.75, True, 0.75),
    ],
)
def test_remote_env_reads_a_null_reward_as_none_of_its_own(episode_reward, has_reward, expected) -> None:
    with HostileServer(refusing(episode_reward, None, has_reward=has_reward)) as url:
        env = RemoteEnv(url, "probe", timeout_s=10)
        env.reset(seed=1)
        env.step("go")
        if isinstance(expected, str):
            with pytest.raises(RewardError, match=expected):
                env.episode_reward()
        else:
            assert env.episode_reward() == expected
        env.close()


class OneReply:
    """An engine answering every turn with "go"."""

    def __init__(self, codec: ChatCodec) -> None:
        self.ids = [*codec.tokenize("go"), codec.end_of_turn_id]

    async def generate(self, input_ids: Any, images: Any, params: Any) -> EngineOutput:
        return EngineOutput(token_ids=self.ids, log_probs=[-0.5] * len(self.ids), finish_reason="stop")


def test_a_refused_served_reward_fails_the_episode_and_leaves_trl_unscored(tiny_engine) -> None:
    reason = "the episode reward raised RuntimeError: the reward model is down"
    codec = ChatCodec(tiny_engine.processor)
    with HostileServer(refusing(None, reason)) as url:
        env = RemoteEnv(url, "probe", timeout_s=10)
        config = EpisodeConfig(max_turns=2, max_new_tokens=8)
        traj = asyncio.run(run_episode(env, OneReply(codec), codec, seed=1, config=config))
        assert traj.status is Status.FAILED and traj.error.endswith(
            f"refused a reward of this episode: {reason}"
        )
        trl_env = environment_factory("probe", url=url)()
        trl_env.reset(seed=1)
        trl_env.reply("go")
        assert trl_env.get_reward() is None and trl_env.reward_error.endswith(reason)


# ---- RemoteEnv and TRL's route over a real `vlm-envs serve` --------------------------------------------


@pytest.fixture(scope="module")
def fault_server() -> Any:
    with ServerThread(ServeConfig(envs=(SEEDED_FAULTS,), workers=1)) as running:
        yield running


@pytest.mark.parametrize("fault", ["", *FAULT_SEEDS])
def test_a_served_broken_reward_is_refused_with_the_servers_reason(fault: str, fault_server: Any) -> None:
    """Each fault's episode played on the server: RemoteEnv raises the server's reason (a refused
    step reward from ``step``), TRL's route over ``url`` leaves it unscored; seed 0 scores 1.0."""
    seed, config = FAULT_SEEDS.get(fault, 0), {"grid_size": [5, 5], "num_boxes": 1}
    kind = "step" if fault == "step_nan" else "episode"
    reason = "the step reward is nan, not a finite number" if kind == "step" else REASONS.get(fault)
    refusal = (
        f"the server refused {'the step reward' if kind == 'step' else 'a reward of this episode'}: {reason}"
    )
    remote, reference = RemoteEnv(fault_server.url, SEEDED_FAULTS, **config), build_env("sokoban", **config)
    remote.reset(seed=seed)
    reference.reset(seed=seed)
    done = False
    while not done:
        answer = reference.oracle_response()
        reference.step(answer)
        if kind == "step":
            with pytest.raises(RewardError, match=f"^{re.escape(refusal)}$"):
                remote.step(answer)
            break
        _, done, _ = remote.step(answer)
    if reason is None:
        assert remote.episode_reward() == 1.0
    else:
        with pytest.raises(
            RewardError, match=f"^the server refused a reward of this episode: {re.escape(reason)}$"
        ):
            remote.episode_reward()
    remote.close()
    trl_env = environment_factory(SEEDED_FAULTS, url=fault_server.url, **config)()
    trl_env.reset(seed=seed)
    reference.reset(seed=seed)
    play_oracle(trl_env, reference)
    if reason is None:
        assert trl_env.get_reward() == 1.0 and trl_env.reward_error is None
    else:
        assert trl_env.get_reward() is None and trl_env.reward_error.endswith(refusal)
    trl_env._env.close()
