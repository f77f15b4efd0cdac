"""What every env does with its typed config: strict fields with bounds, difficulty presets, overrides at
construction and from ``reset`` options, and the seed of an unseeded reset.

Difficulty presets: an env declares, on its config class, ``PRESETS: ClassVar[dict[str, dict[str, Any]]]``
mapping each of :data:`LEVELS` (``easy``, ``medium``, ``hard``) to values of its own knobs::

    class MyConfig(EnvConfig):
        PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
            "easy": {"size": (5, 5)}, "medium": {"size": (7, 7)}, "hard": {"size": (9, 9), "max_turns": 6}
        }
        size: tuple[int, int] = (7, 7)
        max_turns: TurnCap = 8

``MyConfig(difficulty="hard")`` takes the hard preset's values before validation (they are then checked
like any other); a knob given explicitly wins over the preset (``MyConfig(difficulty="hard", size=(6, 6))``).
The level stays in ``config.difficulty`` (``None``: no preset, the fields' defaults) for rows and records to
report. Preset values count as defaults, not as given: overriding the level of a config (a ``reset`` option
``{"difficulty": "easy"}``) replaces them, while its explicit knobs stay. A level an env has no preset for
is a ``ValueError``.
"""

from __future__ import annotations

import secrets
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ModelWrapValidatorHandler, ValidationError, model_validator

from vlm_envs.protocol import SEED_LIMIT

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


def turn_cap(max_turns: int | None, default: int, needed: int) -> int:
    """A config's turn cap: ``max_turns`` where given (the user's or trainer's budget, kept as given), else
    ``default`` raised to the ``needed`` turns the oracle's longest episode of the config takes, at most
    :data:`MAX_TURNS`: a config left to its defaults is one the oracle wins."""
    return max_turns if max_turns is not None else min(MAX_TURNS, max(default, needed))


def check_turns_needed(needed: int, what: str) -> None:
    """A ``ValueError`` when ``what`` (a config's words for itself) needs more turns than any episode may
    have (:data:`MAX_TURNS`), so that no turn cap lets the oracle win."""
    if needed > MAX_TURNS:
        raise ValueError(
            f"{what} can need {needed} turns, over the {MAX_TURNS} an episode may have: allow more actions "
            "a turn, or make it smaller"
        )


#: The field-metadata mark of a config key that names a file, a folder or a hub id (:func:`location`).
LOCATION_MARK = "vlm_envs_location"


def location(default: Any = None, **kwargs: Any) -> Any:
    """A config field that names a file, a folder or a hub id. Such a key is set with the env (its
    registration's config, the user's own module), never by a dataset row: rows choose episodes, not
    files (a trainer refuses a row that sets one, :func:`location_keys`)."""
    return Field(default, json_schema_extra={LOCATION_MARK: True}, **kwargs)


#: Keys no client config may hold: ``build_env(sample=None, args=None, **config)`` takes them as the
#: trainer's sample and args, never as a knob.
TRAINER_ARGUMENTS = frozenset({"sample", "args"})
#: How deep a client's config may nest (JSON from a client may nest thousands deep).
MAX_CONFIG_DEPTH = 32


class ClientConfigError(ValueError):
    """A client's config (a dataset row's ``env_config``, a served session's ``config``) sets a key it
    may not; the message names the key, never its value."""


def check_client_config(target: Any, config: Mapping[str, Any]) -> None:
    """:class:`ClientConfigError` unless a client may build the env ``target`` (an ``Env`` class, or a
    module with ``build_env``) with ``config``. A client chooses episodes, never what the host reads
    or where it connects: refused are the :func:`location` keys of ``target`` (files, folders, hub ids,
    servers, tokens, deadlines), the trainer's ``sample`` and ``args``, a mapping at any depth that names
    a ``path`` with no inline ``bytes`` (a ``datasets`` image read from disk), and nesting deeper than
    :data:`MAX_CONFIG_DEPTH`. Nothing is opened or resolved to decide: the answer is the same whether a
    path exists or not."""
    if not config:
        return
    refused = sorted((location_keys(target) | TRAINER_ARGUMENTS) & set(config))
    if refused:
        raise ClientConfigError(
            f"config key {refused[0]!r} is refused: it names a file, folder, hub id, server, token or "
            "deadline, or the trainer's sample or args; a client's config chooses episodes, so set it "
            "where the episodes play (vlm_envs.register, an entry point, or the trainer's own config)"
        )
    stack: list[tuple[str, Any, int]] = [(str(key), value, 1) for key, value in config.items()]
    while stack:
        key, value, depth = stack.pop()
        if depth > MAX_CONFIG_DEPTH:
            raise ClientConfigError(f"config key {key[:80]!r} nests deeper than {MAX_CONFIG_DEPTH} levels")
        if isinstance(value, Mapping):
            if value.get("path") and value.get("bytes") is None:
                raise ClientConfigError(
                    f"config key {key[:80]!r} holds an image named by its path, which is refused: a "
                    "client's config carries images inline (bytes), never a file for the host to read"
                )
            stack.extend((key, item, depth + 1) for item in value.values())
        elif isinstance(value, list | tuple):
            stack.extend((key, item, depth + 1) for item in value)


def location_keys(target: Any) -> frozenset[str]:
    """The config keys of an env target (an ``Env`` class, or a module with ``build_env``) that name
    files, folders or hub ids: the :func:`location` fields of its configs (an env class's
    ``config_class``, a module's config and env classes) and a module's ``LOCATION_KEYS`` (an env
    configured without an :class:`EnvConfig`)."""
    keys = set(getattr(target, "LOCATION_KEYS", ()))
    for config in _config_classes(target):
        keys.update(
            name
            for name, field in config.model_fields.items()
            if isinstance(field.json_schema_extra, dict) and field.json_schema_extra.get(LOCATION_MARK)
        )
    return frozenset(keys)


def check_config_values(target: Any, config: Mapping[str, Any]) -> None:
    """A one-line ``ValueError`` naming the first bad key where ``config`` does not validate as the
    :class:`EnvConfig` of the env ``target`` (an ``Env`` class's ``config_class``, or the one such class a
    module holds); nothing is built (no level, no image). An env without one is passed over: its config
    is checked when the env is built."""
    configs = _config_classes(target)
    if len(configs) != 1:
        return
    try:
        configs.pop().model_validate(dict(config))
    except ValidationError as err:
        first = err.errors()[0]
        where = "".join(f" {part}" for part in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ValueError(f"env_config{where}: {message}") from None


def _config_classes(target: Any) -> set[type[EnvConfig]]:
    """The :class:`EnvConfig` classes of an env target: an env class's ``config_class``, a module's
    config and env classes."""
    members = list(vars(target).values()) if isinstance(target, types.ModuleType) else [target]
    found = set()
    for member in members:
        config = getattr(member, "config_class", member) if isinstance(member, type) else None
        if isinstance(config, type) and issubclass(config, EnvConfig):
            found.add(config)
    return found


#: A difficulty level.
Level = Literal["easy", "medium", "hard"]
#: The levels, easiest first.
LEVELS: tuple[Level, ...] = ("easy", "medium", "hard")

C = TypeVar("C", bound=BaseModel)


class EnvConfig(BaseModel):
    """The base of an env's typed config: fields as strict as seeds, unknown keys refused, frozen.

    An int field takes ints only (not ``True``, ``3.0`` or ``"3"``), a bool field bools only, a float
    field finite numbers (no ``NaN``, no infinity, no bool); each env bounds its own fields
    (``Field(ge=..., le=...)``). Values as dataset rows deliver them are read first: numpy scalars and
    arrays as plain Python, lists as tuples where the field is a tuple. ``difficulty`` picks one of the
    env's :attr:`PRESETS` (see the module docstring).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    #: Each level's knob values (the env's own fields); an env without presets refuses every level.
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {}

    #: The preset applied (``None``: none, the fields' defaults).
    difficulty: Level | None = None

    @classmethod
    def preset(cls, level: Any) -> dict[str, Any]:
        """The knob values of ``level``; a ``ValueError`` naming the levels for anything else."""
        return preset_of(cls.PRESETS, level, cls.__name__)

    @model_validator(mode="wrap")
    @classmethod
    def _apply_preset(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        if not isinstance(data, Mapping) or data.get("difficulty") is None:
            return handler(data)
        preset = cls.preset(plain(data["difficulty"]))
        config = handler({**preset, **data})
        # preset values count as defaults: overriding the level replaces them (see ``overridden``)
        config.__pydantic_fields_set__.difference_update(set(preset) - set(data))
        return config

    @model_validator(mode="before")
    @classmethod
    def _plain_input(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        tuples = {name for name, field in cls.model_fields.items() if _is_tuple(field.annotation)}
        return {key: _as_tuple(plain(v)) if key in tuples else plain(v) for key, v in data.items()}


#: How a board env shows its board: an image, a text grid, or both.
RenderMode = Literal["vision", "text", "vision+text"]


class RenderedConfig(EnvConfig):
    """The config of an env that shows its board as its ``render_mode`` field says (each such config
    declares the field itself, ``render_mode: RenderMode = "vision"``, where it belongs among its own)."""

    if TYPE_CHECKING:
        render_mode: RenderMode

    @property
    def shows_image(self) -> bool:
        """Whether observations carry the board's image."""
        return self.render_mode != "text"

    @property
    def shows_text(self) -> bool:
        """Whether observations carry the board as text."""
        return self.render_mode != "vision"


def preset_of(presets: Mapping[str, Mapping[str, Any]], level: Any, owner: str) -> dict[str, Any]:
    """``presets[level]`` (a copy) for a level of :data:`LEVELS` that ``owner`` has a preset for; else a
    ``ValueError`` naming the levels it has (for envs whose config is not an :class:`EnvConfig`)."""
    if not isinstance(level, str) or level not in LEVELS or level not in presets:
        known = [lv for lv in LEVELS if lv in presets]
        if not known:
            raise ValueError(f"{owner} has no difficulty presets (difficulty must be None)")
        raise ValueError(f"difficulty must be one of {known} or None, got {level!r:.40}")
    return dict(presets[level])


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


class EpisodeSeeds:
    """The seeds of one env's episodes, by gymnasium's rule: a reset given a seed plays that seed; a reset
    without one continues from the last seed (its successor, ``seed + 1``), so the episodes after one seed
    are the same in any process. Before any seed, the first unseeded reset takes ``first`` or a fresh random
    seed. Trainer paths always pass a seed, so their episodes depend on that seed alone."""

    def __init__(self) -> None:
        self._next: int | None = None
        #: The seed of the latest episode (``None`` before the first): what a snapshot replays.
        self.last: int | None = None

    def next(self, seed: int | None, first: int | None = None) -> int:
        """The seed of a new episode (``seed`` as ``reset`` was given it)."""
        if seed is None:
            seed = self._next if self._next is not None else first
        if seed is None:
            seed = secrets.randbits(63)
        self._next = (seed + 1) % SEED_LIMIT
        self.last = seed
        return seed
