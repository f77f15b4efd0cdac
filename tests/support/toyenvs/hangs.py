"""An env whose first step never returns (for the worker watchdog)."""

from __future__ import annotations

import time
from typing import Any

from toyenvs.colors import ColorsEnv


class HangsOnStep(ColorsEnv):
    def step(self, response_text: str):
        time.sleep(3600)
        return super().step(response_text)


def build_env(sample: Any = None, args: Any = None, **config: Any) -> HangsOnStep:
    return HangsOnStep(**config)
