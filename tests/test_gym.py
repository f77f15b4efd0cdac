import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from vlm_envs import list_envs
from vlm_envs.gym import MAX_EPISODE_STEPS, GymEnv, ImageListSpace, TextSpace
from vlm_envs.registry import EnvSpec


def spec_named(name: str) -> EnvSpec:
    return next(spec for spec in list_envs() if spec.name == name)


def test_registered_ids_exist_for_builtin_envs():
    import vlm_envs  # noqa: F401  (importing registers the ids)

    assert "vlm_envs/Sokoban-v0" in gymnasium.registry
    assert "vlm_envs/Geo3k-v0" in gymnasium.registry


def test_registering_an_env_again_keeps_its_id_quietly():
    import vlm_envs
    from vlm_envs import registry

    first = vlm_envs.register("sokoban-again", "vlm_envs.envs.sokoban")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            again = vlm_envs.register("sokoban-again", "vlm_envs.envs.sokoban")
        assert again.gym_id == first.gym_id
        assert gymnasium.registry[again.gym_id].kwargs == {"env": "sokoban-again"}
    finally:  # the registries are the process's: leave them as they were
        registry._registered.pop("sokoban-again")
        gymnasium.registry.pop(first.gym_id)
    assert [str(w.message) for w in caught] == []  # gymnasium warns when an id is overridden


def test_every_id_has_a_step_limit_that_ends_an_endless_episode():
    import vlm_envs
    from vlm_envs import registry

    limits = {gymnasium.registry[s.gym_id].max_episode_steps for s in vlm_envs.list_envs()}
    assert limits == {MAX_EPISODE_STEPS}
    spec = vlm_envs.register("colors-endless", "toyenvs.colors")
    try:
        env = gymnasium.make(spec.gym_id, max_turns=10**9)
        env.reset(seed=0)
        steps, terminated, truncated = 0, False, False
        while not (terminated or truncated) and steps <= MAX_EPISODE_STEPS:
            *_, terminated, truncated, _ = env.step("no answer")
            steps += 1
        assert (steps, terminated, truncated) == (MAX_EPISODE_STEPS, False, True)
        assert gymnasium.make(spec.gym_id, max_episode_steps=2).spec.max_episode_steps == 2
    finally:  # the registries are the process's: leave them as they were
        registry._registered.pop("colors-endless")
        gymnasium.registry.pop(spec.gym_id)


def test_third_party_env_through_gymnasium_make(third_party):
    from vlm_envs.gym import register_gym_envs

    register_gym_envs()
    env = gymnasium.make("vlm_envs/Colors-v0", size=28, render_mode="rgb_array")
    obs, info = env.reset(seed=5)
    assert env.observation_space.contains(obs)
    assert obs["images"][0].shape == (28, 28, 3) and obs["images"][0].dtype == np.uint8
    assert env.action_space.contains("<answer>red</answer>")
    assert env.render().shape == (28, 28, 3)
    _, reward, terminated, truncated, step_info = env.step(f"<answer>{info['color']}</answer>")
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert step_info["metrics"]["success"] is True
    again, _ = env.reset(seed=5)
    assert np.array_equal(again["images"][0], obs["images"][0])
    env.close()


def test_truncation_is_reported_as_truncated():
    env = GymEnv("toyenvs.colors", max_turns=1)
    env.reset(seed=0)
    _, reward, terminated, truncated, _ = env.step("no answer")
    assert (reward, terminated, truncated) == (0.0, False, True)


def test_spaces():
    text = TextSpace(max_length=4)
    assert text.contains("abcd") and not text.contains("abcde") and not text.contains(3)
    assert isinstance(text.sample(), str)
    images = ImageListSpace(seed=1)
    assert images.contains(images.sample())
    assert not images.contains((np.zeros((2, 2), dtype=np.uint8),))
    with pytest.raises(gymnasium.error.NameNotFound):
        gymnasium.make("vlm_envs/Nope-v0")


def test_reset_options_reach_the_env():
    env = gymnasium.make("vlm_envs/Sokoban-v0", grid_size=(6, 6))
    _, info = env.reset(seed=1, options={"grid_size": (5, 5)})
    assert info["grid_size"] == [5, 5]
    assert env.reset(seed=1)[1]["grid_size"] == [6, 6]


@pytest.mark.parametrize("name", [spec.name for spec in list_envs()])
def test_gymnasium_own_checker_passes_on_every_id(name):
    """gymnasium's ``check_env``: among its checks, ``reset(seed=123)`` then ``reset()`` twice over gives the
    same observations (an unseeded reset continues from the last seed)."""
    env = gymnasium.make(spec_named(name).gym_id)
    assert env.spec is not None and not env.spec.nondeterministic  # so the checker compares observations
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("name", [spec.name for spec in list_envs()])
def test_the_episodes_after_one_seed_are_the_same_in_a_fresh_env(name):
    def episodes(env: gymnasium.Env) -> list[tuple[str, list[bytes]]]:
        played = [env.reset(seed=11)[0]] + [env.reset()[0] for _ in range(2)]
        return [(obs["text"], [im.tobytes() for im in obs["images"]]) for obs in played]

    a, b = gymnasium.make(spec_named(name).gym_id), gymnasium.make(spec_named(name).gym_id)
    b.reset()  # an unseeded episode before the seed changes nothing after it
    first = episodes(a)
    assert first == episodes(b)
    assert len({text for text, _ in first} | {im[0] for _, im in first if im}) > 3  # three episodes, not one


@pytest.mark.parametrize("name", [spec.name for spec in list_envs()])
def test_info_says_where_the_episode_stands(name):
    """``reset`` and ``step`` info carry ``state_key`` and ``distance_to_goal``, the env's own after the
    call, beside the env's info; the oracle's episode ends at distance 0 (where the env gives one)."""
    env = gymnasium.make(spec_named(name).gym_id)
    vlm_env = env.unwrapped.vlm_env
    _, info = env.reset(seed=3)
    assert info["state_key"] == vlm_env.state_key() and info["distance_to_goal"] == vlm_env.distance_to_goal()
    assert isinstance(info["state_key"], str)  # every bundled env keys its states (minesweeper: no distance)
    terminated = truncated = False
    while not (terminated or truncated):
        _, _, terminated, truncated, info = env.step(vlm_env.oracle_response())
        assert "metrics" in info and info["state_key"] == vlm_env.state_key()
        assert info["distance_to_goal"] == vlm_env.distance_to_goal()
    assert terminated and info["distance_to_goal"] in (0, None)


def test_info_of_an_env_that_does_not_say_holds_none():
    env = GymEnv("toyenvs.colors")
    _, info = env.reset(seed=0)
    assert (info["state_key"], info["distance_to_goal"], info["color"]) == (None, None, info["color"])
    assert env.step("no answer")[-1]["state_key"] is None
