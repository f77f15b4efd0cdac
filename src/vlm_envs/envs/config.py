"""What every env does with its typed config: strict fields with bounds, overrides at construction and
from ``reset`` options, and the seed of an unseeded reset."""

from __future__ import annotations

import secrets
import types
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: The most pixels a side of any image an env shows may have: above what a Qwen-VL processor keeps
#: (its default ``max_pixels`` is about 3,584 squared), and 50 MB of RGB.
MAX_IMAGE_SIDE = 4096
#: The most replies an episode may be given: a conversation longer than that is a typo, not a task.
MAX_TURNS = 1000
#: The most actions (moves, swaps, rotations) one reply may play.
MAX_ACTIONS_PER_TURN = 100
#: The most actions a whole episode may play.
MAX_EPISODE_ACTIONS = 100_000
#: The longest one answer check may be given (seconds): vlm_envs.verify.MAX_TIMEOUT, restated here so
#: that building an env does not import the grader (math-verify, sympy: a second); a test holds them equal.
MAX_GRADE_TIMEOUT = 60.0
#: The largest size of a reward term a config sets (bonus, penalty): rewards and their sums stay finite.
MAX_REWARD_TERM = 1000.0

#: A turn cap.
TurnCap = Annotated[int, Field(ge=1, le=MAX_TURNS)]
#: Actions one reply may play.
ActionsPerTurn = Annotated[int, Field(ge=1, le=MAX_ACTIONS_PER_TURN)]
#: Actions a whole episode may play.
EpisodeActions = Annotated[int, Field(ge=1, le=MAX_EPISODE_ACTIONS)]
#: A reward term a config sets.
RewardTerm = Annotated[float, Field(ge=0.0, le=MAX_REWARD_TERM)]

C = TypeVar("C", bound=BaseModel)


class EnvConfig(BaseModel):
    """The base of an env's typed config: fields as strict as seeds, unknown keys refused, frozen.

    An int field takes ints only (not ``True``, ``3.0`` or ``"3"``), a bool field bools only, a float
    field finite numbers (no ``NaN``, no infinity, no bool); each env bounds its own fields
    (``Field(ge=..., le=...)``). Values as dataset rows deliver them are read first: numpy scalars and
    arrays as plain Python, lists as tuples where the field is a tuple.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _plain_input(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        tuples = {name for name, field in cls.model_fields.items() if _is_tuple(field.annotation)}
        return {key: _as_tuple(plain(v)) if key in tuples else plain(v) for key, v in data.items()}


def plain(value: Any) -> Any:
    """numpy arrays and scalars (as parquet rows deliver them) as plain Python lists and numbers."""
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        value = value.tolist()
    if isinstance(value, list | tuple):
        return type(value)(plain(v) for v in value)
    return value


def _as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _is_tuple(annotation: Any) -> bool:
    """Whether a field's type is a tuple (or an optional one)."""
    if get_origin(annotation) in (Union, types.UnionType):
        return any(_is_tuple(a) for a in get_args(annotation))
    return annotation is tuple or get_origin(annotation) is tuple


def overridden(config: C, changes: Mapping[str, Any] | None) -> C:
    """``config`` with ``changes`` applied and validated again; ``config`` itself when there are none."""
    if not changes:
        return config
    return type(config).model_validate({**config.model_dump(exclude_unset=True), **changes})


def episode_seed(seed: int | None) -> int:
    """``seed``, or a fresh random one for an unseeded reset (its episode is then new each time)."""
    return secrets.randbits(63) if seed is None else seed
