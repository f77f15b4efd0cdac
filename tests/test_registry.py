import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import gymnasium
import pytest
from toyenvs.colors import ColorsEnv

import vlm_envs
from vlm_envs import build_env, list_envs, register, registry
from vlm_envs.checker import check_env
from vlm_envs.compat import SlimeEnvAdapter
from vlm_envs.registry import EnvLoadError, UnknownEnvError, get_spec


def test_builtin_envs_come_from_entry_points():
    specs = {spec.name: spec for spec in list_envs()}
    assert {"sokoban", "geo3k"} <= set(specs)
    assert specs["sokoban"].distribution == "vlm-envs"
    assert specs["sokoban"].target == "vlm_envs.envs.sokoban"


def test_third_party_distribution_is_discovered_built_and_checked(third_party):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        specs = {spec.name: spec for spec in list_envs()}
    assert specs["colors"].distribution == "colorful-envs"
    assert specs["colors-class"].target == "colorful_envs:ColorsEnv"
    # the malformed entry point is reported with its distribution and skipped; the others still load
    assert "malformed" not in specs
    assert any("broken-envs" in str(w.message) and "malformed" in str(w.message) for w in caught)
    env = build_env("colors", size=28)
    assert type(env).__module__ == "colorful_envs"
    assert env.spec.name == "colors" and env.spec.kwargs == {"size": 28}
    check_env(env)
    check_env(build_env("colors-class"))


def test_broken_entry_point_names_its_distribution(third_party):
    with pytest.raises(EnvLoadError, match=r"'broken'.*broken-envs.*not installed"):
        build_env("broken")
    assert build_env("colors").reset(seed=0)[0].images


def test_unknown_name_lists_known_envs():
    with pytest.raises(UnknownEnvError) as err:
        build_env("sokobam")
    assert "sokobam" in str(err.value) and "sokoban" in str(err.value) and "geo3k" in str(err.value)


def test_module_path_and_class_path_work_like_slime_loads_them():
    env = build_env("toyenvs.colors", size=28)
    assert isinstance(env, ColorsEnv) and env.size == 28
    env = build_env("toyenvs.colors:ColorsEnv", sample={"metadata": {"env_config": {"max_turns": 1}}})
    assert env.max_turns == 1
    with pytest.raises(EnvLoadError, match="no build_env"):
        build_env("toyenvs.__init__")
    with pytest.raises(EnvLoadError, match="ModuleNotFoundError"):
        build_env("toyenvs.missing")


def test_sample_and_args_reach_the_module_factory():
    class Args:
        max_turns = 7

    env = build_env("toyenvs.colors", sample={"metadata": {"env_config": {"size": 28}}}, args=Args())
    assert (env.size, env.max_turns) == (28, 7)


def test_register_at_run_time_adds_name_and_gym_id():
    spec = register("colors-runtime", "toyenvs.colors:ColorsEnv", size=28)
    assert spec.gym_id == "vlm_envs/Colors-runtime-v0"
    assert gymnasium.make(spec.gym_id).unwrapped.vlm_env.size == 28
    assert get_spec("colors-runtime") == spec
    env = build_env("colors-runtime")
    assert env.size == 28
    with pytest.raises(ValueError):
        register("bad name!", "toyenvs.colors")
    with pytest.raises(ValueError):
        register("ok", "not a path")
    check_env(env)


def test_core_import_does_not_pull_torch():
    code = "import sys, vlm_envs, vlm_envs.checker, vlm_envs.gym; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert vlm_envs.__version__


SUPPORT = Path(__file__).parent / "support"


def test_every_path_form_slime_takes_builds_a_slime_shaped_env(monkeypatch):
    bare = build_env("slime_image_env")  # a top-level module on sys.path
    absolute = build_env(str(SUPPORT / "slime_image_env.py"))
    monkeypatch.chdir(SUPPORT)
    relative = build_env("slime_image_env.py")  # relative to the working directory
    assert all(isinstance(e, SlimeEnvAdapter) for e in (bare, absolute, relative))
    # a file loads once, under one stable name, whichever way its path is written
    assert type(absolute.inner) is type(relative.inner)
    assert relative.spec.target == str(SUPPORT / "slime_image_env.py")
    assert [e.reset(seed=3)[1] for e in (bare, absolute)] == [relative.reset(seed=3)[1]] * 2


def test_a_registered_name_wins_over_a_module_of_the_same_name():
    register("slime_image_env", "toyenvs.colors:ColorsEnv")
    try:
        assert isinstance(build_env("slime_image_env"), ColorsEnv)
    finally:
        registry._registered.pop("slime_image_env")
    assert isinstance(build_env("slime_image_env"), SlimeEnvAdapter)


def test_an_unknown_module_or_file_lists_what_was_tried():
    with pytest.raises(UnknownEnvError) as err:
        build_env("no_such_env_module")
    assert "registered envs (" in str(err.value) and "sokoban" in str(err.value)
    assert "no module 'no_such_env_module' on sys.path" in str(err.value)
    with pytest.raises(UnknownEnvError, match=r"no file '.*envs/missing_env\.py'"):
        build_env("envs/missing_env.py")


def test_a_slime_shaped_env_is_adapted_and_passes_check_env():
    class Args:
        max_turns = 2

    sample = SimpleNamespace(label="9", metadata={})
    env = build_env("slime_geo3k_env", sample=sample, args=Args())
    obs, info = env.reset(seed=5)  # its reset takes no seed: it is not passed
    assert (obs.text, obs.images, info) == ("", [], {"has_label": True})
    obs, done, step = env.step("\\boxed{9}")
    assert done and obs.role == "tool" and obs.text == "Correct."
    assert step.metrics == {"correct": True, "answer_found": True, "turn": 1} and step.info == {"answer": "9"}
    assert env.has_episode_reward is False and env.episode_reward() == 0.0
    check_env(build_env("slime_geo3k_env"))  # no sample, no args: eval and play build it this way
    check_env(build_env("slime_image_env"))
