import asyncio
import threading
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError
from toyenvs.colors import ColorsEnv

from vlm_envs import Observation, StepInfo, build_env
from vlm_envs.protocol import check_seed, resolve_env_config, trainer_env_config


def _img(color: str = "red") -> Image.Image:
    return Image.new("RGB", (8, 8), color)


def test_observation_is_frozen_and_validates_types():
    obs = Observation(text="hi")
    with pytest.raises(ValidationError):
        obs.text = "changed"
    with pytest.raises(ValidationError):
        Observation(text="x", images=["not an image"])
    with pytest.raises(ValidationError):
        Observation(text="x", role="assistant")
    with pytest.raises(ValidationError):
        Observation(text="x", unknown_field=1)


def test_text_is_literal_so_a_quoted_placeholder_never_becomes_a_slot():
    a = _img()
    quoted = "You wrote: \\boxed{<image>} <image><image>"
    obs = Observation(text=quoted, images=[a])
    assert obs.parts() == [{"type": "image", "image": a}, {"type": "text", "text": quoted}]
    assert Observation(text=quoted).parts() == [{"type": "text", "text": quoted}]


def test_compose_places_images_where_they_stand():
    a, b = _img("red"), _img("blue")
    obs = Observation.compose("first ", a, " then ", b, " end <image>")
    parts = obs.parts()
    assert [p["type"] for p in parts] == ["text", "image", "text", "image", "text"]
    assert parts[1]["image"] is a and parts[3]["image"] is b
    assert parts[0]["text"] == "first " and parts[4]["text"] == " end <image>"
    assert obs.text == "first  then  end <image>" and obs.image_slots == (6, 12)
    adjacent = Observation.compose(a, b, "x").parts()
    assert [p["type"] for p in adjacent] == ["image", "image", "text"]
    with pytest.raises(TypeError, match="strings and PIL images"):
        Observation.compose("x", 3)


def test_slots_must_fit_the_text_and_the_images():
    with pytest.raises(ValidationError, match="1 image slot"):
        Observation(text="ab", images=[_img(), _img()], image_slots=(1,))
    with pytest.raises(ValidationError, match="non-decreasing"):
        Observation(text="ab", images=[_img(), _img()], image_slots=(2, 1))
    with pytest.raises(ValidationError, match="non-decreasing"):
        Observation(text="ab", images=[_img()], image_slots=(3,))


def test_parts_without_slots_put_images_first():
    a = _img()
    parts = Observation(text="look", images=[a]).parts()
    assert parts == [{"type": "image", "image": a}, {"type": "text", "text": "look"}]


def test_dict_round_trip_matches_slime_shape():
    a = _img()
    obs = Observation.compose("state: ", a, role="tool")
    data = obs.to_dict()
    assert data["obs_str"] == "state: <image>"
    assert data["multi_modal_data"] == {"<image>": [a]}
    assert Observation.from_dict(data) == obs
    # slime's example envs give no role: user by default, or as told
    assert Observation.from_dict({"obs_str": "x"}).role == "user"
    assert Observation.from_dict({"obs_str": "x"}, role="tool").role == "tool"


def test_placeholders_of_trusted_text_become_slots_only_when_they_match():
    a, b = _img("red"), _img("blue")
    matched = Observation.with_placeholders("<image> and <image>!", [a, b])
    assert [p["type"] for p in matched.parts()] == ["image", "text", "image", "text"]
    assert matched.text == " and !"
    mismatched = Observation.with_placeholders("<image> and <image>", [a])
    assert mismatched.parts() == [
        {"type": "image", "image": a},
        {"type": "text", "text": "<image> and <image>"},
    ]
    assert Observation.from_dict({"obs_str": "<image>", "multi_modal_data": {}}).text == "<image>"


@pytest.mark.parametrize("seed", [3.7, True, b"1", "1", -1, 2**64, 10**29])
def test_seeds_outside_the_domain_are_refused_never_aliased(seed):
    env = ColorsEnv()
    with pytest.raises((TypeError, ValueError), match=r"seed must be .*\[0, 2\*\*64\)"):
        env.reset(seed=seed)


def test_seeds_in_the_domain_pass_numpy_ints_included():
    env = ColorsEnv()
    assert env.reset(seed=np.uint64(2**64 - 1))[1] == ColorsEnv().reset(seed=2**64 - 1)[1]
    assert check_seed(np.int32(5)) == 5 and type(check_seed(np.int32(5))) is int
    assert check_seed(None) is None


def test_reset_options_reach_envs_that_take_them_and_are_refused_by_others():
    env = build_env("sokoban", grid_size=(6, 6))
    _, info = env.reset(seed=1, options={"grid_size": (5, 5)})
    assert info["grid_size"] == [5, 5]
    assert env.reset(seed=1)[1]["grid_size"] == [6, 6]  # options last one episode
    with pytest.raises(TypeError, match="takes no options"):
        ColorsEnv().reset(seed=1, options={"level": 2})
    with pytest.raises(TypeError, match="must be a mapping"):
        env.reset(seed=1, options=["grid_size"])


@pytest.mark.parametrize("reply", [None, 5, {}, b"<answer>Up</answer>", b"\xff\xfe", ["Up"]])
@pytest.mark.parametrize("name", ["sokoban", "geo3k", "matchstick", "zoom_search"])
def test_non_string_replies_are_refused_with_a_type_error_naming_the_type(name, reply):
    env = build_env(name)
    env.reset(seed=0)
    with pytest.raises(TypeError, match=f"^a reply must be a str .*, got {type(reply).__name__}$"):
        env.step(reply)
    assert isinstance(env.step("<answer>Up</answer>")[2], StepInfo)  # the episode goes on


def test_non_string_replies_never_reach_a_subclass_step_sync_or_async():
    seen = []

    class Recorder(ColorsEnv):
        def step(self, response_text):
            seen.append(response_text)
            return super().step(response_text)

    env = Recorder()
    env.reset(seed=0)
    for reply in (b"<answer>red</answer>", None, ["red"]):
        with pytest.raises(TypeError):
            env.step(reply)
        with pytest.raises(TypeError):
            asyncio.run(env.astep(reply))
    env.step("<answer>red</answer>")
    assert seen == ["<answer>red</answer>"]


def test_format_observation_makes_tool_messages():
    env = ColorsEnv()
    message = env.format_observation(Observation(text="score: 1", role="tool"))
    assert message == {"role": "tool", "content": [{"type": "text", "text": "score: 1"}]}


def test_step_info_defaults_and_metric_types():
    info = StepInfo()
    assert (info.reward, info.terminated, info.truncated, info.metrics) == (0.0, False, False, {})
    with pytest.raises(ValidationError):
        StepInfo(metrics={"bad": "text"})


def test_async_methods_run_off_the_event_loop():
    env = ColorsEnv()
    loop_thread: list[int] = []
    step_thread: list[int] = []
    original = env.step

    def recording_step(text: str):
        step_thread.append(threading.get_ident())
        return original(text)

    env.step = recording_step

    async def main():
        loop_thread.append(threading.get_ident())
        obs, info = await env.areset(seed=3)
        return obs, info, await env.astep(f"<answer>{info['color']}</answer>")

    obs, _, (_, done, step_info) = asyncio.run(main())
    assert obs.images and done and step_info.reward == 1.0
    assert step_thread and step_thread[0] != loop_thread[0]


def test_resolve_env_config_merges_sample_then_explicit():
    sample = SimpleNamespace(metadata={"env_config": {"size": 28, "max_turns": 2}})
    assert resolve_env_config(sample, {"max_turns": 5}) == {"size": 28, "max_turns": 5}
    assert resolve_env_config({"metadata": {"env_config": {"a": 1}}}) == {"a": 1}
    assert resolve_env_config(None, {"b": 2}) == {"b": 2}
    with pytest.raises(TypeError, match="env_config"):
        resolve_env_config({"metadata": {"env_config": "oops"}})


def test_trainer_env_config_gives_the_explicit_config_then_the_trainers_turns_then_the_rows():
    row = {"metadata": {"env_config": {"max_turns": 3, "grid_size": 7, "seed_bank": 1}}}
    trainer = SimpleNamespace(max_turns=5)
    assert trainer_env_config(row, trainer, {"grid_size": 9}) == {
        "max_turns": 5,
        "grid_size": 9,
        "seed_bank": 1,
    }
    assert trainer_env_config(row, trainer, {"max_turns": 2})["max_turns"] == 2  # explicit wins
    assert trainer_env_config(row, SimpleNamespace(), {})["max_turns"] == 3  # no trainer cap: the row's
    assert trainer_env_config(None, None, {}) == {}
