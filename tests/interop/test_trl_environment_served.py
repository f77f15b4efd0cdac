"""TRL's environment route on ``vlm-envs serve``: the class built with ``url`` offers the env's own
tools (Geo3k's ``calc_score``, ZoomSearch's ``zoom``), the same methods with the same signatures as
the class built in process, and they play on the server; a row's difficulty and options reach the
served env as its reset options (the server checks them, as it checks every client's)."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

from vlm_envs.interop.trl_environment import TrlEnvironment, environment_factory
from vlm_envs.remote import RemoteEnvError
from vlm_envs.serve.config import ServeConfig

sys.path.insert(0, str(Path(__file__).parents[1] / "serve"))
from serve_support import ServerThread

#: Each env with tools of its own, and one of them.
TOOL_ENVS = {"geo3k": "calc_score", "zoom_search": "zoom"}


@pytest.fixture(scope="module")
def tool_server() -> Any:
    with ServerThread(ServeConfig(envs=(*TOOL_ENVS, "sokoban"), workers=1)) as running:
        yield running


def tool_methods(cls: type[TrlEnvironment]) -> dict[str, inspect.Signature]:
    """The methods TRL offers as tools, read as GRPOTrainer reads them (TRL 1.16): every public
    function of the class but ``reset`` and ``get_reward``."""
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    }


@pytest.mark.parametrize("env", list(TOOL_ENVS))
def test_the_served_class_offers_the_envs_own_tools(env: str, tool_server: Any) -> None:
    local, served = environment_factory(env), environment_factory(env, url=tool_server.url)
    assert tool_methods(served) == tool_methods(local)
    assert {"reply", TOOL_ENVS[env]} <= set(tool_methods(served))
    assert getattr(served, TOOL_ENVS[env]).__doc__ == getattr(local, TOOL_ENVS[env]).__doc__
    instance = served()
    parts = instance.reset(seed=1)
    assert parts and type(instance._env).__name__ == "RemoteEnv"
    answer = instance.calc_score(answer="1") if env == "geo3k" else instance.zoom(bbox=[0.0, 0.0, 0.5, 0.5])
    assert answer and instance.last_info["metrics"], instance.last_info
    instance._env.close()


def test_a_rows_difficulty_and_options_reach_the_served_env(tool_server: Any) -> None:
    def shown(parts: list[dict]) -> list:
        return [p.get("text") or p["image"].tobytes() for p in parts]

    served, local = environment_factory("sokoban", url=tool_server.url)(), environment_factory("sokoban")()
    for row in ({"difficulty": "hard"}, {"options": {"grid_size": [7, 7]}}):
        assert shown(served.reset(seed=3, **row)) == shown(local.reset(seed=3, **row))
    assert shown(served.reset(seed=3, difficulty="hard")) != shown(served.reset(seed=3))
    served._env.close()
    geo3k = environment_factory("geo3k", url=tool_server.url)()
    with pytest.raises(RemoteEnvError, match="'dataset' is refused"):
        geo3k.reset(seed=0, options={"dataset": "/"})


def test_a_make_env_function_is_never_offered_as_a_tool() -> None:
    def make() -> Any:
        from vlm_envs import build_env

        return build_env("sokoban")

    cls = environment_factory("sokoban", make_env=make)
    assert set(tool_methods(cls)) == {"reply"} and type(cls()._env).__name__ == "SokobanEnv"
