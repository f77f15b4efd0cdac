"""OpenEnv's own client (``openenv`` 0.10.0, its ``GenericEnvClient`` over ``/ws``) plays Sokoban and
Geo3k against ``vlm-envs serve`` unchanged; its images decode to the pixels the env drew in process (a
Sokoban frame as the palette PNG its env attached: converted to its ``image_modes`` entry, it is the
frame). The reply's metadata is in the observation too, where ``openenv-core`` 0.3.0's client finds it
(that client itself runs in tests/tiers/test_openenv.py, in its own tier: both install the ``openenv``
package)."""

from __future__ import annotations

import base64
import io

import pytest
from openenv.core import GenericEnvClient
from PIL import Image

from vlm_envs import build_env


def decoded(observation: dict) -> list[tuple]:
    # as TRL's OpenEnv examples read an image field: Image.open(BytesIO(b64decode(...))), then the mode
    images = [Image.open(io.BytesIO(base64.b64decode(data))) for data in observation["images"]]
    images = [im.convert(mode) for im, mode in zip(images, observation["image_modes"], strict=True)]
    return [(image.mode, image.size, image.tobytes()) for image in images]


def drawn(image: Image.Image) -> tuple:
    return image.mode, image.size, image.tobytes()


@pytest.mark.parametrize("name, seed", [("sokoban", 3), ("geo3k", 5)])
def test_openenv_client_plays_an_episode(every_env_server, name, seed):
    local = build_env(name)
    obs, _ = local.reset(seed)
    with GenericEnvClient(base_url=every_env_server.url).sync() as client:
        result = client.reset(env=name, seed=seed)
        assert result.observation["text"] == obs.text and not result.done
        assert result.observation["metadata"] == result.metadata  # as OpenEnv 0.10's own server sends it
        assert result.metadata["observation_metadata"] == obs.metadata  # Geo3k's problem id
        assert result.metadata["system_prompt"] == local.system_prompt()
        assert result.metadata["tools"] == local.tools()
        assert decoded(result.observation) == [drawn(i) for i in obs.images]
        assert obs.images, "both envs show an image first"
        for _ in range(12):
            reply = local.oracle_response()
            obs, done, info = local.step(reply)
            result = client.step({"text": reply})
            assert result.observation["text"] == obs.text
            assert decoded(result.observation) == [drawn(i) for i in obs.images]
            assert (result.reward, result.done) == (info.reward, done)
            assert result.metadata["metrics"] == info.metrics
            assert result.observation["metadata"] == result.metadata
            if done:
                break
        assert done and result.metadata["episode_reward"] == local.episode_reward() == 1.0
        state = client.state()
        assert state["step_count"] >= 1 and state["env"] == name and state["done"] is True
        with pytest.raises(RuntimeError, match="episode is done"):  # OpenEnv's client raises error frames
            client.step({"text": reply})


def test_openenv_client_reads_schema_and_health(every_env_server):
    import requests

    schema = requests.get(every_env_server.url + "/schema", timeout=10).json()
    assert schema["action"]["required"] == ["text"]
    assert {"text", "images", "image_slots", "role"} <= set(schema["observation"]["properties"])
    health = requests.get(every_env_server.url + "/health", timeout=10).json()
    assert health["status"] == "healthy" and "envs" not in health  # open to all: no env names
    metadata = requests.get(every_env_server.url + "/metadata", timeout=10).json()
    assert metadata["protocol"] == "openenv 0.10.0" and metadata["envs"]["sokoban"] == "vlm_envs.envs.sokoban"
