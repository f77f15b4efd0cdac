"""What a dataset row may name, read without importing anything: registered envs (entry points,
run-time registrations, their targets), module paths only where a trainer's config lists them; seeds,
turn caps and env configs of the right type only."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from vlm_envs import registry
from vlm_envs.rollout.rows import RowError, RowSpec, allowed_envs, check_row_env, turn_cap


def test_a_row_names_registered_envs_by_name_or_target_and_nothing_is_imported(third_party):
    for name in ("sokoban", "vlm_envs.envs.sokoban", "colors", "colorful_envs", "colors-class"):
        assert check_row_env(name) == name
    assert "colorful_envs" not in sys.modules  # deciding imported nothing
    for name in (
        "builtins:print",
        "os:system",
        "colorful_envs:ColorsEnv.__init__",
        "envs/x.py",
        "subprocess",
    ):
        with pytest.raises(RowError, match=r"refused: a row may name a registered env \(.*colors"):
            check_row_env(name)
    assert check_row_env("envs/x.py", allowed={"envs/x.py"}) == "envs/x.py"


def test_a_run_time_registration_lets_rows_name_it():
    with pytest.raises(RowError):
        check_row_env("my-colors")
    registry.register("my-colors", "slime_image_env")
    try:
        assert check_row_env("my-colors") == "my-colors" and check_row_env("slime_image_env")
    finally:
        registry._registered.pop("my-colors")


def test_the_allow_list_is_a_list_of_non_empty_strings():
    assert allowed_envs(None, "key") == frozenset()
    assert allowed_envs(["a.b", "c.py"], "key") == {"a.b", "c.py"}
    for bad, message in (
        ("a.b", "must be a list"),
        ({"a": 1}, "must be a list"),
        ([""], "must hold non-empty strings"),
    ):
        with pytest.raises(RowError, match=f"key {message}"):
            allowed_envs(bad, "key")
    omegaconf = pytest.importorskip("omegaconf")  # verl hands the agent-loop YAML's list as a ListConfig
    assert allowed_envs(omegaconf.OmegaConf.create(["a.b"]), "key") == {"a.b"}


def test_a_seeded_row_builds_from_its_config_and_a_seedless_row_from_its_sample():
    sample = SimpleNamespace(label="5")
    generated = RowSpec.of({"env": "geo3k", "seed": np.int64(4), "env_config": {"max_turns": 2}})
    assert generated.seed == 4 and type(generated.seed) is int and generated.generated
    assert generated.build_inputs(sample) == (None, {"max_turns": 2})
    task = RowSpec.of({"env": "geo3k", "env_config": {"max_turns": 2}})
    assert not task.generated and task.build_inputs(sample) == (sample, {})
    assert RowSpec.of(None) == RowSpec() and RowSpec.of({}) == RowSpec()


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ("sokoban", "metadata must be a mapping"),
        ({"seed": 3.7}, "seed must be None or an int"),
        ({"seed": 3.0}, "seed must be None or an int"),
        ({"seed": True}, "seed must be None or an int"),
        ({"seed": np.bool_(True)}, "seed must be None or an int"),
        ({"seed": -1}, r"seed must be an int in \[0, 2\*\*64\)"),
        ({"max_turns": 0}, "max_turns must be an int >= 1, got 0"),
        ({"max_turns": False}, "max_turns must be an int >= 1, got False"),
        ({"max_turns": "8"}, "max_turns must be an int >= 1, got '8'"),
        ({"env": ["sokoban"]}, "env must be a non-empty string"),
        ({"env_config": [1]}, "env_config must be a mapping"),
    ],
)
def test_a_row_is_never_coerced(metadata, message):
    with pytest.raises(RowError, match=message):
        RowSpec.of(metadata)


def test_a_turn_cap_is_kept_exactly():
    assert turn_cap(None, "x") is None and turn_cap(1, "x") == 1 and turn_cap(np.int32(3), "x") == 3
    with pytest.raises(RowError, match=r"x must be an int >= 1, got 2\.0"):
        turn_cap(2.0, "x")
