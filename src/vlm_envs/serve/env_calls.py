"""Inside a serve worker, the calls on a session's env beside reset and step: where the episode stands, the
env's own random reply, the episode's snapshot, and a restore from a client's snapshot.

Each answers ``(status, body)``: the JSON bytes of the reply (200) or a one-line error. A snapshot a
client sends is hostile input: it is bounded (:func:`vlm_envs.snapshot.check_plain`) before anything is
read from it, and it is restored only into an env the worker built from the reset's own env and config
(which passed the client's config check), so a snapshot of another env, config or rules version, or an
altered one, is refused by the env itself (:class:`~vlm_envs.snapshot.SnapshotError`, naming what
differs). The reset options its replay would pass to the env pass the check a reset's options pass
(:func:`~vlm_envs.envs.config.check_client_config`): nothing in a snapshot names a file, a folder or a
server the worker would read, and nothing in it is imported.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from vlm_envs.envs.config import check_client_config
from vlm_envs.errors import one_line
from vlm_envs.protocol import Env, Observation
from vlm_envs.serve.wire import SIGNAL_NAMES, RandomState, Signals
from vlm_envs.snapshot import SnapshotError, check_plain, recorder_of


def signal_fields(env: Env) -> dict[str, Any]:
    """``env``'s ``state_key``, ``state_text`` and ``distance_to_goal`` now, as a reply's metadata carries
    them (:class:`~vlm_envs.serve.wire.Signals`), with ``signal_errors``: for each method that raised or
    gave a value the wire does not carry (another type, out of bounds), ``null`` and the reason in one line.
    The episode goes on either way (a ``MemoryError`` stays one)."""
    values: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name in SIGNAL_NAMES:
        try:
            values[name] = getattr(env, name)()
        except MemoryError:
            raise
        except Exception as err:  # the env's own method failed: its episode itself goes on
            errors[name] = one_line(f"{name}() raised {one_line(err, typed=True)}")
    try:
        Signals.model_validate(values)
    except ValidationError as err:
        for problem in err.errors(include_url=False):
            name = str(problem["loc"][0])
            errors.setdefault(
                name, one_line(f"{name}() gave a {type(values[name]).__name__} value: {problem['msg']}")
            )
    return {
        **{name: None if name in errors else values[name] for name in SIGNAL_NAMES},
        "signal_errors": errors,
    }


def random_reply(env: Env, state: Mapping[str, Any]) -> tuple[int, bytes]:
    """The env's own random reply, drawn from the client's generator ``state`` (a :class:`RandomState`'s
    fields), with the state advanced past the draw."""
    try:
        rng = RandomState.model_validate(state).load_into(random.Random())
    except ValueError as err:  # pydantic's errors are ValueErrors; so is a position past the words
        return 422, f"invalid random state: {one_line(err, typed=True)}".encode()
    try:
        text = env.random_response(rng)
    except MemoryError:
        raise
    except Exception as err:  # the env's own hook failed: the episode itself goes on
        return 500, f"the env's random_response failed: {one_line(err, typed=True)}".encode()
    if not isinstance(text, str):
        return 500, f"the env's random_response gave a {type(text).__name__}, not a str".encode()
    body = {"text": text, "state": RandomState.of(rng).model_dump()}
    return 200, json.dumps(body, separators=(",", ":")).encode()


def snapshot_reply(env: Env) -> tuple[int, bytes]:
    """The episode's snapshot as JSON; 409 when it has none (an episode reset without a seed the env
    can name)."""
    try:
        snapshot = env.snapshot()
    except SnapshotError as err:
        return 409, f"no snapshot of this episode: {one_line(err)}".encode()
    return 200, json.dumps(snapshot, separators=(",", ":"), allow_nan=False).encode()


def check_snapshot(target: Any, snapshot: Any) -> None:
    """:class:`SnapshotError` for a snapshot out of bounds; :class:`~vlm_envs.envs.config.ClientConfigError`
    for one whose replay would reset the env ``target`` with options a client may not give."""
    check_plain(snapshot)
    state = snapshot.get("state") if type(snapshot) is dict else None
    options = state.get("options") if type(state) is dict else None
    if type(options) is dict:
        check_client_config(target, options)


@dataclasses.dataclass(frozen=True)
class Restored:
    """An episode restored: the observation to answer next, the steps played and the seed."""

    obs: Observation
    steps: int
    seed: int | None


def restore_episode(env: Env, snapshot: Any) -> Restored:
    """Continue ``snapshot``'s episode in ``env`` (:class:`SnapshotError` if refused, ``env`` as it was)."""
    obs = env.restore(snapshot)
    record = recorder_of(env).record  # the replay the restore played: its steps and seed
    return Restored(obs, len(record.replies) if record else 0, record.seed if record else None)
