"""RemoteEnv: the Env protocol over ``vlm-envs serve``, through ``run_episode``, slime's hook, ``vlm-envs
eval --env-url`` and a round robin over two servers; each equals the same episode in process."""

from __future__ import annotations

import asyncio
import json
import math
import random
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from rollout_helpers import SAMPLING, SOKOBAN, assert_trainer_invariants, script, slime_args
from slime.rollout.sglang_rollout import GenerateState
from slime.utils.types import Sample

from vlm_envs import build_env
from vlm_envs.cli import main
from vlm_envs.remote import RemoteEnv
from vlm_envs.remote_location import next_url, ws_url
from vlm_envs.remote_wire import MalformedReply, parse_random
from vlm_envs.rollout import slime as hook
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.serve.config import ServeConfig

sys.path.insert(0, str(Path(__file__).parent / "serve"))
from serve_support import ServerThread

SEED = 4


@pytest.fixture(scope="module")
def sokoban_server():
    config = ServeConfig(envs=("sokoban",), workers=1, oracle=True)  # eval --policy oracle asks it
    with ServerThread(config) as running:
        yield running


def oracle_replies(seed: int) -> list[str]:
    env = build_env("sokoban", **SOKOBAN)
    env.reset(seed)
    replies, done = [], False
    while not done:
        replies.append(env.oracle_response())
        _, done, _ = env.step(replies[-1])
    return replies


def test_remote_env_through_run_episode_equals_the_in_process_episode(
    sokoban_server, sglang_server, tiny_engine
):
    codec = ChatCodec(tiny_engine.processor)
    config = EpisodeConfig(max_turns=6, max_new_tokens=64, check_template=True)
    replies = oracle_replies(SEED)

    async def play(env):
        async with SGLangEngine(sglang_server.url) as engine:
            return await run_episode(env, engine, codec, seed=SEED, config=config, sampling_params=SAMPLING)

    script(sglang_server, codec, *replies)
    remote = asyncio.run(play(RemoteEnv(sokoban_server.url, "sokoban", **SOKOBAN)))
    script(sglang_server, codec, *replies)
    local = asyncio.run(play(build_env("sokoban", **SOKOBAN)))
    assert remote.reward == local.reward == 1.0 and remote.status is local.status
    assert remote.tokens == local.tokens and remote.loss_mask == local.loss_mask
    assert [t.metrics for t in remote.turns] == [t.metrics for t in local.turns]

    def stood(turns):  # where each turn stood, as the rollout records it
        return [(t.state_key, t.distance_to_goal, t.next_distance_to_goal) for t in turns]

    assert stood(remote.turns) == stood(local.turns) and remote.turns[0].state_key is not None
    a, b = remote.train_inputs(), local.train_inputs()
    assert torch.equal(a["pixel_values"], b["pixel_values"]) and torch.equal(
        a["image_grid_thw"], b["image_grid_thw"]
    )
    assert_trainer_invariants(remote, codec)


def test_slime_hook_plays_a_remote_env_from_its_yaml_path(sokoban_server, sglang_server, tiny_engine):
    codec = ChatCodec(tiny_engine.processor)
    replies = oracle_replies(SEED)
    samples = {}
    for path, extra, yaml in (  # the servers are named in the YAML, never in a row
        ("vlm_envs.remote", {"env": "sokoban"}, {"vlm_envs_remote_url": [sokoban_server.url]}),
        ("vlm_envs.envs.sokoban", {}, {}),
    ):
        GenerateState.forget()
        sglang_server.clear_faults()
        args = slime_args(sglang_server, rollout_interaction_env_path=path, max_turns=6, **yaml)
        sample = Sample(index=0, metadata={"seed": SEED, "env_config": {**SOKOBAN, **extra}})
        script(sglang_server, codec, *replies)

        async def one(args=args, sample=sample):
            try:
                return await hook.generate(args, sample, {"temperature": 1.0, "max_new_tokens": 1024})
            finally:
                await hook.close()

        samples[path] = asyncio.run(one())
    GenerateState.forget()
    remote, local = samples["vlm_envs.remote"], samples["vlm_envs.envs.sokoban"]
    assert remote.status == local.status == Sample.Status.COMPLETED, remote.metadata["vlm_envs"]["error"]
    assert remote.reward == local.reward == 1.0
    assert remote.tokens == local.tokens and remote.loss_mask == local.loss_mask
    assert torch.equal(
        remote.multimodal_train_inputs["pixel_values"], local.multimodal_train_inputs["pixel_values"]
    )


def test_eval_env_url_equals_the_in_process_eval(sokoban_server, tmp_path, capsys):
    common = ["--policy", "oracle", "-n", "3", "--seed", "7", "--quiet", "--max-turns", "10"]
    assert (
        main(["eval", "sokoban", "--env-url", sokoban_server.url, "--out", str(tmp_path / "remote"), *common])
        == 0
    )
    assert main(["eval", "sokoban", "--out", str(tmp_path / "local"), *common]) == 0
    capsys.readouterr()

    def results(folder):  # in episode order: results.jsonl is written as episodes finish
        lines = (tmp_path / folder / "results.jsonl").read_text().splitlines()
        return sorted((json.loads(line) for line in lines), key=lambda row: row["episode"])

    assert results("remote") == results("local")  # turns, observations, metrics, reset info, rewards
    assert [row["reward"] for row in results("remote")] == [1.0, 1.0, 1.0]
    frames = sorted(p.relative_to(tmp_path / "local") for p in (tmp_path / "local").rglob("*.png"))
    assert frames and all(
        (tmp_path / "remote" / f).read_bytes() == (tmp_path / "local" / f).read_bytes() for f in frames
    )


def test_eval_env_url_random_plays_the_served_envs_own_random_replies(sokoban_server, tmp_path, capsys):
    """``--policy random`` draws the served env's own replies from the policy's generator (the server
    draws, the generator's state travels), so a remote run is the in-process run, success rate included."""
    common = ["--policy", "random", "-n", "16", "--seed", "0", "--quiet", "--max-turns", "8"]
    remote_out, local_out = str(tmp_path / "remote"), str(tmp_path / "local")
    assert main(["eval", "sokoban", "--env-url", sokoban_server.url, "--out", remote_out, *common]) == 0
    assert main(["eval", "sokoban", "--out", local_out, *common]) == 0
    capsys.readouterr()

    def results(folder):
        lines = (tmp_path / folder / "results.jsonl").read_text().splitlines()
        return sorted((json.loads(line) for line in lines), key=lambda row: row["episode"])

    assert results("remote") == results("local")  # the same replies, turns, metrics and rewards
    assert sum(row["success"] for row in results("remote")) == 1  # seed 7: one lucky move
    replies = [t["model_text"] for row in results("remote") for t in row["turns"] if "model_text" in t]
    assert replies and "" not in replies


def test_random_state_is_checked_both_ways(sokoban_server):
    """A server answers a bad generator state with 422; a client refuses a reply whose state is bad."""
    env = RemoteEnv(sokoban_server.url, "sokoban")
    env.reset(1)
    rng = random.Random(5)
    first = env.random_response(rng)
    assert "<answer>" in first and rng.getstate() != random.Random(5).getstate()
    ws = env._ws
    ws.send(json.dumps({"type": "random", "data": {"words": [0] * 624 + [625]}}))
    assert '"status":422' in ws.recv(timeout=10)
    ws.send(json.dumps({"type": "random", "data": {"words": [-1] * 625}}))
    assert '"status":422' in ws.recv(timeout=10)
    with pytest.raises(MalformedReply, match="state"):
        parse_random({"text": "x", "state": {"words": [0] * 624 + [625]}})
    with pytest.raises(MalformedReply, match="words"):
        parse_random({"text": "x", "state": {"words": [1, 2]}})
    env.close()


def test_several_urls_take_sessions_in_turn():
    with (
        ServerThread(ServeConfig(envs=("sokoban",), workers=1)) as a,
        ServerThread(ServeConfig(envs=("sokoban",), workers=1)) as b,
    ):
        envs = [RemoteEnv([a.url, b.url], "sokoban") for _ in range(4)]
        for env in envs:
            env.reset(1)
        assert len(a.service.sessions) == len(b.service.sessions) == 2
        first = [env.reset(1)[0] for env in envs]
        assert len({o.text for o in first}) == 1 and len({o.images[0].tobytes() for o in first}) == 1
        for env in envs:
            env.close()
    assert (
        next_url(["x"]) == "x"
        and ws_url("http://h:1/") == "ws://h:1/ws"
        and ws_url("https://h") == "wss://h/ws"
    )


def test_remote_build_env_names_what_it_needs():
    with pytest.raises(ValueError, match=r"needs 'url'.*vlm_envs_remote_url"):
        build_env("vlm_envs.remote", env="sokoban")
    with pytest.raises(ValueError, match="needs 'env'"):
        build_env("vlm_envs.remote", url="http://127.0.0.1:1")
    with pytest.raises(ValueError, match="url must be"):
        RemoteEnv([], "sokoban")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("host-a:8000", "must be http"),
        ("file:///etc/passwd", "must be http"),
        ("http://", "name a host"),
        ("http://user:secret@host-a:8000", "may not carry credentials"),
        ("http://host-a:8000/?next=http://elsewhere", "a query"),
        ("http://host-a:port", "is not a URL"),
        (b"http://host-a", "url must be"),
        ([None], "url must be"),
    ],
)
def test_a_url_must_name_a_server(url, reason):
    with pytest.raises(ValueError, match=reason):
        RemoteEnv(url, "sokoban")


@pytest.mark.parametrize("timeout", [math.inf, math.nan, 0, -1, 3601, True, "60"])
def test_a_timeout_must_be_finite_positive_and_bounded(timeout):
    with pytest.raises(ValueError, match="timeout_s must be"):
        RemoteEnv("http://host-a:8000", "sokoban", timeout_s=timeout)


def test_build_env_takes_the_servers_from_the_trainers_args():
    """slime's YAML keys (verl's loop sets the same args from its agent-loop YAML); a config's own
    ``url`` (a Python caller's, or ``vlm-envs eval --env-url``) comes first."""
    args = SimpleNamespace(
        vlm_envs_remote_url=["http://host-a:8000"], vlm_envs_remote_timeout_s=5, max_turns=3
    )
    env = build_env("vlm_envs.remote", args=args, env="sokoban", grid_size=[6, 6])
    assert (env.url, env.timeout_s, env.env) == ("http://host-a:8000", 5.0, "sokoban")
    assert env.config == {"grid_size": [6, 6], "max_turns": 3}
    mine = build_env("vlm_envs.remote", args=args, url="http://host-b:8000", env="sokoban", timeout_s=9)
    assert (mine.url, mine.timeout_s) == ("http://host-b:8000", 9.0)
