"""An env whose step info holds a lambda: its trajectory cannot cross a process boundary."""

from __future__ import annotations

from typing import Any

from toyenvs.colors import ColorsEnv


class UnpicklableInfo(ColorsEnv):
    def step(self, response_text: str):
        obs, done, info = super().step(response_text)
        return obs, done, info.model_copy(update={"info": {"callback": lambda: None}})


def build_env(sample: Any = None, args: Any = None, **config: Any) -> UnpicklableInfo:
    return UnpicklableInfo(**config)
