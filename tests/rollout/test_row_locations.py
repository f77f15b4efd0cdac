"""Rows choose episodes, not files: config keys an env marks as naming a file, folder or hub id
(Geo3k's ``dataset``, Jigsaw's ``image_dir``) are refused in a dataset row's ``env_config``, with the
key named, by the slime hook, verl's agent loop and TRL's rollout; nothing is read from where they
point. The same keys still work where the env is configured (its registration, a direct build). So
are ``vlm_envs.remote``'s server, token and deadline: a row never points the trainer (and its token)
at a host; the trainer's own config names the servers (slime's YAML, verl's agent-loop YAML)."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("verl.experimental.agent_loop.agent_loop")

import hydra
import torch
import trl_helpers
from hostile_ws_server import HostileServer
from omegaconf import OmegaConf
from PIL import Image
from rollout_helpers import script, slime_args
from slime.rollout.sglang_rollout import GenerateState
from slime.utils.types import Sample
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl_support import SAMPLING, RaisingServerManager, verl_config

import vlm_envs.envs.geo3k as geo3k
import vlm_envs.envs.jigsaw as jigsaw
import vlm_envs.envs.jigsaw.env as jigsaw_env
from vlm_envs import build_env, registry
from vlm_envs.cli import main
from vlm_envs.envs.config import location_keys
from vlm_envs.envs.jigsaw import JigsawConfig, JigsawEnv
from vlm_envs.episode_carrier import EpisodeSpec, attach
from vlm_envs.remote import LOCATION_KEYS
from vlm_envs.rollout import slime as hook
from vlm_envs.rollout import verl as loop_module
from vlm_envs.rollout.record import RECORD_KEY
from vlm_envs.rollout.rows import RowError, check_row_config
from vlm_envs.rollout.trl import VlmEnvsGRPOTrainer, episode_reward, rollout_func
from vlm_envs.serve.config import TOKEN_ENV
from vlm_envs.testing import build_tiny_processor

#: Rows that point somewhere, and the key each must be refused for.
POINTING = [
    ("geo3k", {"dataset": "/"}, "dataset"),
    ("geo3k", {"dataset": "hf-internal/some-hub-dataset", "limit": 2}, "dataset"),
    ("jigsaw", {"image_dir": "/etc", "n": 2}, "image_dir"),
]
REMOTE = "vlm_envs.remote"


def remote_pointing(evil: str) -> list[tuple[dict, str]]:
    """Rows of vlm_envs.remote choosing the server (``evil``), its token or its deadline, and the key."""
    return [
        ({"env": "sokoban", "url": evil}, "url"),
        ({"env": "sokoban", "url": [evil]}, "url"),
        ({"env": "sokoban", "token": "row-token"}, "token"),
        ({"env": "sokoban", "timeout_s": math.inf}, "timeout_s"),
    ]


@pytest.fixture
def nothing_is_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records any attempt to load a Geo3k dataset or list a Jigsaw picture folder."""
    reads: list[str] = []
    monkeypatch.setattr(geo3k, "load_problems", lambda source, **kw: reads.append(str(source)) or [])
    monkeypatch.setattr(jigsaw_env, "image_files", lambda folder: reads.append(str(folder)) or [])
    return reads


def test_each_env_marks_its_location_keys_once() -> None:
    assert location_keys(geo3k) == {"dataset"}
    assert location_keys(jigsaw) == location_keys(JigsawEnv) == location_keys(JigsawConfig) == {"image_dir"}
    assert location_keys(build_env("sokoban").__class__) == frozenset()
    assert location_keys(registry.get_spec(REMOTE).load()) == LOCATION_KEYS == {"url", "token", "timeout_s"}


@pytest.mark.parametrize(("env", "config", "key"), POINTING)
def test_a_row_setting_a_location_key_is_refused_with_the_key_named(env, config, key) -> None:
    with pytest.raises(
        RowError, match=rf"env_config: config key '{key}' is refused.*rows choose episodes, not files"
    ):
        check_row_config(env, config)
    check_row_config(env, {k: v for k, v in config.items() if k != key})  # the rest is a row's to choose
    check_row_config(env, {})


def test_the_env_itself_may_be_configured_with_one(tmp_path: Path) -> None:
    """A registration's config is set where the episodes play: its rows need not (and may not) set it."""
    Image.new("RGB", (64, 64), "red").save(tmp_path / "red.png")
    registry.register("my-jigsaw", "vlm_envs.envs.jigsaw", image_dir=str(tmp_path), n=2)
    try:
        check_row_config("my-jigsaw", {"n": 3})
        env = build_env("my-jigsaw")
        obs, _ = env.reset(seed=0)
        assert env.config.image_dir == str(tmp_path) and obs.images
        with pytest.raises(RowError, match="'image_dir'"):
            check_row_config("my-jigsaw", {"image_dir": "/"})
    finally:
        registry._registered.pop("my-jigsaw")


@pytest.mark.parametrize(("env", "config", "key"), POINTING)
def test_the_slime_hook_refuses_the_row(env, config, key, nothing_is_read) -> None:
    """Seeded rows, a task row (no seed) and a row under the YAML's env path: FAILED, the key named."""
    args = type("Args", (), {"max_turns": 1, "rollout_interaction_env_path": env, "hf_checkpoint": "x"})()
    rows = [
        {"env": env, "seed": 1, "env_config": config},
        {"env": env, "env_config": config},
        {"seed": 1, "env_config": config},
    ]
    GenerateState.forget()
    try:
        for metadata in rows:
            sample = Sample(index=0, metadata=dict(metadata))
            asyncio.run(hook.generate(args, sample, {"max_new_tokens": 8}))
            record = sample.metadata["vlm_envs"]
            assert sample.status is Sample.Status.FAILED and sample.reward == 0.0
            assert f"env_config: config key '{key}' is refused" in record["error"], record["error"]
    finally:
        GenerateState.forget()
    assert nothing_is_read == []


@pytest.mark.parametrize(("env", "config", "key"), POINTING)
def test_verls_agent_loop_refuses_the_row(env, config, key, nothing_is_read) -> None:
    config_ = verl_config()
    processor = build_tiny_processor("qwen2_vl")
    loop = loop_module.VlmEnvsAgentLoop(
        trainer_config=DictConfigWrap(config_),
        server_manager=RaisingServerManager(),
        tokenizer=processor.tokenizer,
        processor=processor,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config_.data),
    )
    out = asyncio.run(loop.run(dict(SAMPLING), extra_info={"env": env, "seed": 1, "env_config": config}))
    record = out.extra_fields["vlm_envs"]
    assert record["status"] == "failed" and f"env_config: config key '{key}' is refused" in record["error"]
    assert out.reward_score == 0.0 and nothing_is_read == []


def test_trls_rollout_refuses_the_carrier(tmp_path: Path, nothing_is_read) -> None:
    torch.set_num_threads(1)
    args = trl_helpers.config(tmp_path)
    trainer = trl_helpers.trainer(
        trl_helpers.dataset("sokoban", 2, max_turns=1), args, cls=VlmEnvsGRPOTrainer
    )
    message = [{"role": "user", "content": [{"type": "text", "text": "play"}]}]
    prompts = [attach(message, EpisodeSpec(env, 1, config, max_turns=1)) for env, config, _ in POINTING]
    records = rollout_func(prompts, trainer)[RECORD_KEY]
    for record, (_, _, key) in zip(records, POINTING, strict=True):
        assert (
            record["status"] == "failed" and f"env_config: config key '{key}' is refused" in record["error"]
        ), record["error"]
    assert episode_reward([None] * 3, [None] * 3, **{RECORD_KEY: records}) == [None] * 3
    assert nothing_is_read == []


def test_make_dataset_refuses_to_write_rows_every_trainer_would_refuse(tmp_path: Path, capsys) -> None:
    Image.new("RGB", (64, 64), "red").save(tmp_path / "red.png")
    out = tmp_path / "rows.parquet"
    argv = ["make-dataset", "jigsaw", "-n", "2", "--out", str(out), "--config", f"image_dir={tmp_path}"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--config image_dir=... names a file, folder or hub id" in err
    assert "vlm_envs.register('my_env', 'vlm_envs.envs.jigsaw', image_dir=...)" in err
    assert not out.exists() and not out.with_suffix(".yaml").exists()


def test_the_slime_hook_refuses_a_row_naming_the_server_and_plays_the_yamls(served, monkeypatch) -> None:
    """Under slime's documented setup (``rollout_interaction_env_path: vlm_envs.remote``) a row naming a
    server, token or timeout fails, and the row's server hears nothing; the YAML's server is played,
    with the token from the environment."""
    sglang_server, codec = served
    monkeypatch.setenv(TOKEN_ENV, "trainer-token")
    evil, configured = HostileServer(), HostileServer()
    with evil as evil_url, configured as url:
        args = slime_args(
            sglang_server, rollout_interaction_env_path=REMOTE, vlm_envs_remote_url=[url], max_turns=1
        )
        script(sglang_server, codec, "<answer>Up</answer>")
        GenerateState.forget()
        try:
            for config, key in remote_pointing(evil_url):
                for metadata in ({"seed": 1, "env_config": config}, {"env_config": config}):
                    sample = Sample(index=0, metadata=metadata)
                    asyncio.run(hook.generate(args, sample, {"max_new_tokens": 8}))
                    error = sample.metadata["vlm_envs"]["error"]
                    assert sample.status is Sample.Status.FAILED, error
                    assert f"env_config: config key '{key}' is refused" in error, error
            sample = Sample(
                index=0, metadata={"seed": 1, "env_config": {"env": "sokoban", "grid_size": [5, 5]}}
            )
            asyncio.run(hook.generate(args, sample, {"max_new_tokens": 8}))
        finally:
            asyncio.run(hook.close())
            GenerateState.forget()
        assert sample.metadata["vlm_envs"]["error"] is None  # one turn played (the turn cap ends it)
        assert evil.connections == 0 and evil.requests == []
    assert configured.authorizations == ["Bearer trainer-token"]
    assert [r["type"] for r in configured.requests] == ["reset", "step", "close"]
    assert configured.requests[0]["data"]["config"] == {"grid_size": [5, 5], "max_turns": 1}


def test_verls_agent_loop_refuses_a_row_naming_the_server_and_plays_the_yamls(monkeypatch) -> None:
    """verl: the loop built as verl builds it (``hydra.utils.instantiate`` of its agent-loop YAML entry),
    the servers in the entry's ``remote_url``; a row naming one is refused, and nothing reaches it."""
    monkeypatch.setenv(TOKEN_ENV, "trainer-token")
    config_ = verl_config()
    processor = build_tiny_processor("qwen2_vl")
    evil, configured = HostileServer(), HostileServer()
    with evil as evil_url, configured as url:
        entry = OmegaConf.create(
            {
                "name": "vlm_envs",
                "_target_": loop_module.LOOP_TARGET,
                "allowed_envs": [REMOTE],
                "remote_url": [url],
                "remote_timeout_s": 30,
            }
        )
        loop = hydra.utils.instantiate(
            config=entry,
            trainer_config=DictConfigWrap(config_),
            server_manager=RaisingServerManager(),
            tokenizer=processor.tokenizer,
            processor=processor,
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(config_.data),
        )
        for config, key in remote_pointing(evil_url):
            out = asyncio.run(
                loop.run(dict(SAMPLING), extra_info={"env": REMOTE, "seed": 1, "env_config": config})
            )
            record = out.extra_fields["vlm_envs"]
            assert (
                record["status"] == "failed"
                and f"env_config: config key '{key}' is refused" in record["error"]
            )
        row = {"env": REMOTE, "seed": 1, "env_config": {"env": "sokoban"}}
        out = asyncio.run(loop.run(dict(SAMPLING), extra_info=row))
        assert (
            "the inference server went away" in out.extra_fields["vlm_envs"]["error"]
        )  # played up to the engine
        assert evil.connections == 0
    assert configured.authorizations == ["Bearer trainer-token"]
    assert [r["data"]["env"] for r in configured.requests if r["type"] == "reset"] == ["sokoban"]


@pytest.mark.parametrize("key", ["sample", "args"])
def test_make_dataset_refuses_the_trainers_own_arguments_in_a_row(tmp_path: Path, capsys, key: str) -> None:
    out = tmp_path / "rows.parquet"
    argv = ["make-dataset", "sokoban", "-n", "2", "--out", str(out), "--config", f"{key}=1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"config key {key!r} is refused" in err, err
    assert not out.exists() and not out.with_suffix(".yaml").exists()
