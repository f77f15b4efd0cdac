"""What every env does with its typed config: overrides at construction and from ``reset`` options,
and the seed of an unseeded reset."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

C = TypeVar("C", bound=BaseModel)


def overridden(config: C, changes: Mapping[str, Any] | None) -> C:
    """``config`` with ``changes`` applied and validated again; ``config`` itself when there are none."""
    if not changes:
        return config
    return type(config)(**{**config.model_dump(exclude_unset=True), **changes})


def episode_seed(seed: int | None) -> int:
    """``seed``, or a fresh random one for an unseeded reset (its episode is then new each time)."""
    return secrets.randbits(63) if seed is None else seed
