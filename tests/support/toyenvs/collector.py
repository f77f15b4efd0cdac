"""The colours env, whose reset info says how the garbage collector of the process playing it is set."""

from __future__ import annotations

import gc
from typing import Any

from toyenvs.colors import ColorsEnv


class CollectorFacts(ColorsEnv):
    def reset(self, seed: int | None = None):
        obs, info = super().reset(seed)
        return obs, {**info, "young_threshold": gc.get_threshold()[0], "frozen": gc.get_freeze_count()}


def build_env(sample: Any = None, args: Any = None, **config: Any) -> CollectorFacts:
    return CollectorFacts(**config)
