"""Difficulty presets: the shared mechanism (a level fills in knobs, an explicit knob wins, a bad level is a
ValueError) and every registered env's own presets."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

from vlm_envs import Env, build_env, list_envs
from vlm_envs.envs.config import LEVELS, EnvConfig, TurnCap, overridden
from vlm_envs.envs.episodic import EpisodicEnv


class Toy(EnvConfig):
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"size": (5, 5)},
        "medium": {"size": (7, 7)},
        "hard": {"size": (9, 9), "turns": 6},
    }
    size: tuple[int, int] = (7, 7)
    turns: TurnCap = 8


class Plain(EnvConfig):
    turns: TurnCap = 8


def test_a_level_fills_in_its_knobs_and_is_recorded():
    assert Toy() == Toy(difficulty=None) and Toy().difficulty is None
    assert (Toy(difficulty="easy").size, Toy(difficulty="easy").turns) == ((5, 5), 8)
    hard = Toy(difficulty="hard")
    assert (hard.difficulty, hard.size, hard.turns) == ("hard", (9, 9), 6)
    assert Toy.model_validate({"difficulty": np.str_("hard")}) == hard  # as a parquet row delivers it


def test_an_explicit_knob_wins_over_the_preset_and_survives_a_change_of_level():
    mine = Toy(difficulty="hard", size=(6, 6))
    assert (mine.size, mine.turns) == ((6, 6), 6)
    easier = overridden(mine, {"difficulty": "easy"})
    assert (easier.difficulty, easier.size, easier.turns) == ("easy", (6, 6), 8)
    # the preset's own values count as defaults: a new level replaces them all
    assert overridden(Toy(difficulty="hard"), {"difficulty": "easy"}) == Toy(difficulty="easy")
    assert overridden(Toy(difficulty="hard"), {"difficulty": None}) == Toy()


@pytest.mark.parametrize("level", ["extreme", "EASY", "", 1, True, b"easy", [1], {"easy": 1}, 2.5])
def test_a_bad_level_is_a_value_error_naming_the_levels(level):
    with pytest.raises(ValueError, match=r"difficulty must be one of \['easy', 'medium', 'hard'\] or None"):
        Toy(difficulty=level)


def test_a_config_without_presets_refuses_every_level():
    for level in LEVELS:
        with pytest.raises(ValueError, match="Plain has no difficulty presets"):
            Plain(difficulty=level)
    assert Plain(difficulty=None).turns == 8


def test_a_preset_value_is_validated_like_any_other():
    class Broken(EnvConfig):
        PRESETS: ClassVar[dict[str, dict[str, Any]]] = {"easy": {"turns": 0}, "hard": {"nope": 1}}
        turns: TurnCap = 8

    with pytest.raises(ValueError, match="greater than or equal to 1"):
        Broken(difficulty="easy")
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        Broken(difficulty="hard")
    with pytest.raises(ValueError, match=r"one of \['easy', 'hard'\]"):
        Broken(difficulty="medium")


# -- every registered env ---------------------------------------------------------------------------

ENV_NAMES = [spec.name for spec in list_envs()]


def presets_of(env: Env) -> dict[str, dict[str, Any]]:
    """An env's presets: its config class's, or (an env without an EnvConfig, as Geo3k) its own."""
    return env.config_class.PRESETS if isinstance(env, EpisodicEnv) else getattr(type(env), "PRESETS", {})


def knob(env: Env, key: str) -> Any:
    value = getattr(env.config if isinstance(env, EpisodicEnv) else env, key)
    return tuple(value) if isinstance(value, list) else value


@pytest.mark.parametrize("name", ENV_NAMES)
def test_every_env_has_the_three_levels_and_each_preset_applies(name):
    presets = presets_of(build_env(name))
    assert set(presets) == set(LEVELS), f"{name} needs a preset for each of {LEVELS}"
    for level in LEVELS:
        env = build_env(name, difficulty=level)
        assert {key: knob(env, key) for key in presets[level]} == presets[level]
        assert knob(env, "difficulty") == level
        obs, _ = env.reset(seed=0)
        assert obs.text
        env.close()
    assert presets["easy"] != presets["hard"]


@pytest.mark.parametrize("name", ENV_NAMES)
def test_every_env_lets_an_explicit_knob_win_over_its_preset(name):
    presets = presets_of(build_env(name))
    won = 0
    for level, other in (("hard", "easy"), ("easy", "hard")):
        for key, value in presets[other].items():
            if presets[level].get(key) == value:
                continue
            try:
                env = build_env(name, difficulty=level, **{key: value})
            except ValueError:  # this knob alone does not fit the rest of the level's preset
                continue
            assert knob(env, key) == value and knob(env, "difficulty") == level
            won += 1
    assert won >= 1


@pytest.mark.parametrize("name", ENV_NAMES)
def test_every_env_refuses_a_bad_level_with_a_value_error(name):
    for level in ("extreme", "Hard", 2, True, ["easy"]):
        with pytest.raises(ValueError, match="difficulty must be one of"):
            build_env(name, difficulty=level)
    env = build_env(name)
    if isinstance(env, EpisodicEnv):  # a level per episode, as a reset option
        with pytest.raises(ValueError, match="difficulty must be one of"):
            env.reset(seed=0, options={"difficulty": "extreme"})
        assert env.reset(seed=0, options={"difficulty": "hard"})[0].text
        assert env.config.difficulty == "hard"
