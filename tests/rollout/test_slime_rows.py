"""What a slime row (``sample.metadata``) may name: registered envs, module paths only where the YAML
lists them; fields never coerced. A refused row fails its sample, saying why; nothing is run."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from rollout_helpers import assert_sample_invariants, script, slime_args
from slime.rollout.sglang_rollout import GenerateState
from slime.utils.types import Sample

from vlm_envs.rollout import slime as hook

SOKOBAN = {"grid_size": [6, 6], "num_boxes": 1}
#: An env class by its import path: no entry point names it, so a row may name it only where the YAML does.
CLASS_PATH = "vlm_envs.envs.sokoban.env:SokobanEnv"


@pytest.fixture(autouse=True)
def fresh_state():
    GenerateState.forget()
    yield
    GenerateState.forget()


def run(args, sample: Sample) -> Sample:
    async def one() -> Sample:
        try:
            return await hook.generate(args, sample, {"temperature": 1.0, "max_new_tokens": 64})
        finally:
            await hook.close()

    return asyncio.run(one())


def hostile_module(tmp_path) -> tuple[str, object]:
    """A module file that leaves a marker when imported (a row must never make it import)."""
    marker = tmp_path / "imported"
    module = tmp_path / "row_chosen_env.py"
    module.write_text(f"open({str(marker)!r}, 'w').close()\ndef build_env(**kw):\n    raise SystemExit\n")
    return str(module), marker


@pytest.mark.parametrize("env", ["builtins:print", "os:system", "FILE", "vlm_envs.registry:build_env"])
def test_a_row_never_chooses_code_to_run(served, env, tmp_path, monkeypatch, capsys):
    server, codec = served
    path, marker = hostile_module(tmp_path)
    calls = []
    monkeypatch.setattr("os.system", lambda *a: calls.append(a))
    args = slime_args(server, rollout_interaction_env_path="sokoban", max_turns=2)
    sample = Sample(index=0, metadata={"env": path if env == "FILE" else env, "seed": 1})
    out = run(args, sample)
    error = out.metadata["vlm_envs"]["error"]
    assert out.status is Sample.Status.FAILED and out.reward == 0.0
    assert "refused" in error and "registered env" in error and "vlm_envs_allowed_envs" in error
    assert not marker.exists() and calls == [] and capsys.readouterr().out == ""
    assert_sample_invariants(out, codec)


@pytest.mark.parametrize(
    "yaml", [{"rollout_interaction_env_path": CLASS_PATH}, {"vlm_envs_allowed_envs": [CLASS_PATH]}]
)
def test_a_row_names_a_module_path_the_yaml_lists(served, yaml):
    server, codec = served
    args = slime_args(server, max_turns=2, **yaml)
    script(server, codec, "<answer>Up</answer>", "<answer>Down</answer>")
    out = run(args, Sample(index=0, metadata={"env": CLASS_PATH, "seed": 1, "env_config": SOKOBAN}))
    assert out.status is not Sample.Status.FAILED, out.metadata["vlm_envs"]["error"]
    assert out.metadata["vlm_envs"]["env"] == CLASS_PATH
    assert_sample_invariants(out, codec)


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ({"seed": 3.7}, "seed must be None or an int"),
        ({"seed": True}, "seed must be None or an int"),
        ({"seed": 2**64}, "seed must be an int in [0, 2**64)"),
        ({"max_turns": 0}, "a row's max_turns must be an int >= 1, got 0"),
        ({"max_turns": True}, "a row's max_turns must be an int >= 1, got True"),
        ({"max_turns": 2.5}, "a row's max_turns must be an int >= 1, got 2.5"),
        ({"env": ""}, "a row's env must be a non-empty string"),
        ({"env_config": ["grid_size", 6]}, "a row's env_config must be a mapping"),
    ],
)
def test_a_row_is_never_coerced(served, metadata, error):
    server, codec = served
    args = slime_args(server, rollout_interaction_env_path="sokoban", max_turns=2)
    out = run(args, Sample(index=0, metadata={"seed": 1, "env_config": SOKOBAN, **metadata}))
    assert out.status is Sample.Status.FAILED and error in out.metadata["vlm_envs"]["error"]
    assert_sample_invariants(out, codec)


@pytest.mark.parametrize(
    ("yaml", "error"),
    [
        ({"max_turns": 0}, "max_turns in the --custom-config-path YAML must be an int >= 1, got 0"),
        ({"vlm_envs_allowed_envs": "my_env"}, "vlm_envs_allowed_envs must be a list"),
        ({"vlm_envs_allowed_envs": [""]}, "vlm_envs_allowed_envs must hold non-empty strings"),
    ],
)
def test_a_bad_yaml_key_fails_the_sample_and_names_it(served, yaml, error):
    server, _ = served
    args = slime_args(server, rollout_interaction_env_path="sokoban", **yaml)
    out = run(args, Sample(index=0, metadata={"seed": 1, "env_config": SOKOBAN}))
    assert out.status is Sample.Status.FAILED and error in out.metadata["vlm_envs"]["error"]


def test_a_rows_seed_and_turn_cap_are_honoured_exactly(served):
    """A numpy seed plays that seed (the episode of the int); a row's max_turns 1 plays one turn,
    over the YAML's 3."""
    server, codec = served
    args = slime_args(server, rollout_interaction_env_path="sokoban", max_turns=3)
    outs = []
    for seed in (np.int64(5), 5):
        server.clear_faults()
        script(server, codec, "<answer>Up</answer>", "<answer>Down</answer>")
        outs.append(
            run(args, Sample(index=0, metadata={"seed": seed, "max_turns": 1, "env_config": SOKOBAN}))
        )
    for out in outs:
        assert out.metadata["vlm_envs"]["num_turns"] == 1 and out.status is not Sample.Status.FAILED
        assert_sample_invariants(out, codec)
    assert outs[0].tokens == outs[1].tokens
