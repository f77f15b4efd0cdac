import asyncio
import threading
from types import SimpleNamespace

import pytest
from PIL import Image
from pydantic import ValidationError
from toyenvs.colors import ColorsEnv

from vlm_envs import Observation, StepInfo
from vlm_envs.protocol import resolve_env_config


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


def test_placeholders_must_match_images():
    with pytest.raises(ValidationError, match="2 <image> placeholder"):
        Observation(text="<image> and <image>", images=[_img()])
    assert len(Observation(text="no placeholder", images=[_img(), _img()]).images) == 2


def test_parts_follow_placeholder_order():
    a, b = _img("red"), _img("blue")
    parts = Observation(text="first <image> then <image> end", images=[a, b]).parts()
    assert [p["type"] for p in parts] == ["text", "image", "text", "image", "text"]
    assert parts[1]["image"] is a and parts[3]["image"] is b
    assert parts[0]["text"] == "first " and parts[4]["text"] == " end"


def test_parts_without_placeholders_put_images_first():
    a = _img()
    parts = Observation(text="look", images=[a]).parts()
    assert parts == [{"type": "image", "image": a}, {"type": "text", "text": "look"}]


def test_dict_round_trip_matches_slime_shape():
    a = _img()
    obs = Observation(text="state: <image>", images=[a], role="tool")
    data = obs.to_dict()
    assert data["obs_str"] == "state: <image>"
    assert data["multi_modal_data"] == {"<image>": [a]}
    assert Observation.from_dict(data) == obs
    # slime's example envs give no role: user by default, or as told
    assert Observation.from_dict({"obs_str": "x"}).role == "user"
    assert Observation.from_dict({"obs_str": "x"}, role="tool").role == "tool"


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
