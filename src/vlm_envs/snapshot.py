"""Snapshots of an episode between turns: taken, sealed, checked and restored.

A snapshot is a plain JSON object that names what it belongs to and carries a digest of the rest::

    {"vlm_envs_snapshot": 1, "env": "sokoban", "config": {...}, "rules_version": "1",
     "state": {"seed": 7, "options": null, "replies": ["<answer>Up</answer>"]},
     "digest": "sha256:..."}

Every env gets one by record and replay: the protocol's guards write down the seed a ``reset`` played,
its options and every reply a ``step`` answered (:class:`EpisodeRecorder`); restoring resets with that
seed and those options and plays the replies again. An env may keep its own ``state`` instead
(:meth:`Snapshots.snapshot_state` / :meth:`Snapshots.restore_state`).

A snapshot is hostile input (a client, a file, a dataset row): it is checked within fixed bounds (size,
depth, items, replies) before anything else, nothing in it is imported or opened, and a refusal raises
:class:`SnapshotError` on one line with the env left as it was.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Generic, TypeVar

from vlm_envs.errors import one_line

#: The key that marks a snapshot, and the version of its layout.
FORMAT_KEY = "vlm_envs_snapshot"
FORMAT = 1
#: Bounds on a snapshot: characters of its strings and keys (also the most :func:`loads` reads),
#: nesting, values in all, replies. A snapshot over any of them is refused before it is digested.
MAX_CHARS = 1 << 24
MAX_DEPTH = 32
MAX_ITEMS = 1 << 16
MAX_REPLIES = 10_000
#: Ints a snapshot may hold: seeds reach 2**64 - 1 (``vlm_envs.protocol.SEED_LIMIT``).
MAX_INT_BITS = 64
_KEYS = frozenset({FORMAT_KEY, "env", "config", "rules_version", "state", "digest"})
#: The keys of a replay record's state (:class:`EpisodeRecord`).
REPLAY_KEYS = frozenset({"seed", "options", "replies"})
_DIGEST_PREFIX = "sha256:"


class SnapshotError(ValueError):
    """A snapshot cannot be taken, or is refused: foreign, altered, truncated or out of bounds."""


def check_plain(value: Any, what: str = "the snapshot") -> None:
    """Raise :class:`SnapshotError` unless ``value`` is plain JSON within the bounds; the work is bounded
    by the bounds, not by ``value``'s size (a huge list is refused by its length, unread)."""
    chars = items = 0
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        kind = type(item)
        if kind is dict or kind is list:
            if depth >= MAX_DEPTH:
                raise SnapshotError(f"{what} nests deeper than {MAX_DEPTH} levels")
            items += len(item)
            if items > MAX_ITEMS:
                raise SnapshotError(f"{what} holds over {MAX_ITEMS} values")
            if kind is list:
                pending += [(v, depth + 1) for v in item]
                continue
            for key, v in item.items():
                if type(key) is not str:
                    raise SnapshotError(f"{what} has a key of type {type(key).__name__}: keys are strings")
                chars += len(key)
                pending.append((v, depth + 1))
        elif kind is str:
            chars += len(item)
        elif kind is int:
            if item.bit_length() > MAX_INT_BITS:
                raise SnapshotError(f"{what} holds an int of over {MAX_INT_BITS} bits")
        elif kind is float:
            if not math.isfinite(item):
                raise SnapshotError(f"{what} holds a float that is not finite")
        elif item is not None and kind is not bool:
            raise SnapshotError(f"{what} holds a {kind.__name__}: a snapshot is plain JSON")
        if chars > MAX_CHARS:
            raise SnapshotError(f"{what} holds over {MAX_CHARS} characters")


def canonical_json(value: Any) -> str:
    """The one text of a plain JSON value the digest is taken over: sorted keys, no spaces."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest_of(content: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of a snapshot's content (everything but its digest); a reply's lone surrogates
    are digested as they stand."""
    text = canonical_json(content).encode("utf-8", "surrogatepass")
    return _DIGEST_PREFIX + hashlib.sha256(text).hexdigest()


def loads(text: str | bytes) -> dict[str, Any]:
    """A snapshot from JSON text (a file, a request body), its length checked before it is parsed."""
    if len(text) > MAX_CHARS:
        raise SnapshotError(f"the snapshot text is {len(text)} long, over the limit of {MAX_CHARS}")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as err:  # a truncated text, or nesting past the parser's stack
        raise SnapshotError(f"the snapshot is not JSON: {one_line(err, 120)}") from None
    if type(value) is not dict:
        raise SnapshotError(f"a snapshot is a JSON object, got {type(value).__name__}")
    return value


@dataclasses.dataclass(frozen=True)
class SnapshotOwner:
    """What a snapshot belongs to: the env's name, its config (plain JSON) and its rules version."""

    env: str
    config: dict[str, Any]
    rules_version: str


def seal(owner: SnapshotOwner, state: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot of ``state`` for ``owner``: plain JSON (as ``json.loads`` gives it back), digest set."""
    content = {
        FORMAT_KEY: FORMAT,
        "env": owner.env,
        "config": owner.config,
        "rules_version": owner.rules_version,
        "state": state,
    }
    try:
        content = json.loads(canonical_json(content))
    except (TypeError, ValueError) as err:
        raise SnapshotError(f"the snapshot is not plain JSON: {one_line(err, 120)}") from None
    check_plain(content)
    return {**content, "digest": digest_of(content)}


def open_sealed(snapshot: Any, owner: SnapshotOwner) -> Any:
    """The ``state`` of a snapshot that is whole and belongs to ``owner``; else :class:`SnapshotError`
    naming what differs."""
    if type(snapshot) is not dict:
        raise SnapshotError(f"a snapshot is a dict (JSON object), got {type(snapshot).__name__}")
    check_plain(snapshot)
    if missing := sorted(_KEYS - snapshot.keys()):
        raise SnapshotError(f"not a whole vlm-envs snapshot: it has no {', '.join(map(repr, missing))}")
    if unknown := sorted(snapshot.keys() - _KEYS):
        raise SnapshotError(f"not a vlm-envs snapshot: unknown key(s) {', '.join(map(repr, unknown))}")
    if snapshot[FORMAT_KEY] != FORMAT:
        raise SnapshotError(
            f"snapshot format {snapshot[FORMAT_KEY]!r:.20}; this vlm-envs reads format {FORMAT}"
        )
    content = {key: value for key, value in snapshot.items() if key != "digest"}
    if snapshot["digest"] != digest_of(content):
        raise SnapshotError("the snapshot was altered or truncated: its digest does not match its content")
    if snapshot["env"] != owner.env:
        raise SnapshotError(f"a snapshot of env {snapshot['env']!r:.80}, not of {owner.env!r}")
    if snapshot["rules_version"] != owner.rules_version:
        raise SnapshotError(
            f"a snapshot of {owner.env!r} rules version {snapshot['rules_version']!r:.40}; "
            f"this env plays rules version {owner.rules_version!r}"
        )
    if canonical_json(snapshot["config"]) != canonical_json(owner.config):
        raise SnapshotError(
            f"a snapshot of another {owner.env!r} config: {_config_diff(snapshot['config'], owner)}"
        )
    return snapshot["state"]


def _config_diff(theirs: Any, owner: SnapshotOwner) -> str:
    if type(theirs) is not dict:
        return f"{type(theirs).__name__} in the snapshot"
    ours = owner.config
    keys = sorted(k for k in theirs.keys() | ours.keys() if _held(theirs, k) != _held(ours, k))
    said = [f"{k}={_value(theirs, k)} there, {_value(ours, k)} here" for k in keys[:3]]
    return "; ".join(said) + (f" (and {len(keys) - 3} more)" if len(keys) > 3 else "")


def _held(config: dict[str, Any], key: str) -> tuple[bool, str]:
    return key in config, canonical_json(config.get(key))


def _value(config: dict[str, Any], key: str) -> str:
    return canonical_json(config[key])[:40] if key in config else "(unset)"


@dataclasses.dataclass
class EpisodeRecord:
    """The replay state of an episode: the seed its ``reset`` played, its options, the replies so far."""

    seed: int | None
    options: dict[str, Any] | None = None
    replies: list[str] = dataclasses.field(default_factory=list)

    def state(self) -> dict[str, Any]:
        """The record as a snapshot's ``state``."""
        if self.seed is None:
            raise SnapshotError(
                "the episode was reset without a seed and the env does not say which it played "
                "(episode_seed()): reset with a seed, or give the env an episode_seed()"
            )
        return {"seed": self.seed, "options": self.options, "replies": list(self.replies)}

    @classmethod
    def from_state(cls, state: Any) -> EpisodeRecord:
        """A record from a snapshot's ``state``, every type checked (``bool`` is no seed, no reply)."""
        if type(state) is not dict or state.keys() != REPLAY_KEYS:
            keys = sorted(state) if type(state) is dict else type(state).__name__
            raise SnapshotError(f"a replay state holds exactly seed, options and replies, got {keys}")
        seed, options, replies = state["seed"], state["options"], state["replies"]
        if type(seed) is not int or not 0 <= seed < 1 << MAX_INT_BITS:
            raise SnapshotError(f"the snapshot's seed must be an int in [0, 2**64), got {seed!r:.40}")
        if options is not None and type(options) is not dict:
            raise SnapshotError(
                f"the snapshot's options must be an object or null, got {type(options).__name__}"
            )
        if type(replies) is not list or len(replies) > MAX_REPLIES:
            raise SnapshotError(f"the snapshot's replies must be a list of at most {MAX_REPLIES} strings")
        if any(type(reply) is not str for reply in replies):
            raise SnapshotError("the snapshot's replies must all be strings")
        return cls(seed, options, list(replies))


class EpisodeRecorder:
    """What the protocol's guards write down of the episode an env plays; one per env instance.

    Only the outermost guarded call that returns records: a subclass's ``reset`` that calls its parent's
    is one reset, and a ``step`` that raises answered nothing.
    """

    def __init__(self) -> None:
        self.record: EpisodeRecord | None = None
        self._depth = 0

    @contextlib.contextmanager
    def resetting(
        self, env: Snapshots[Any], seed: int | None, options: Mapping[str, Any] | None
    ) -> Iterator[None]:
        """Around a guarded ``reset``: ``seed`` as given, else the one the env says it played."""
        with self._call() as outermost:
            yield
            if outermost:
                played = seed if seed is not None else env.episode_seed()
                self.record = EpisodeRecord(played, dict(options) if options else None)

    @contextlib.contextmanager
    def stepping(self, reply: str) -> Iterator[None]:
        """Around a guarded ``step`` answering ``reply``."""
        with self._call() as outermost:
            yield
            if outermost and self.record is not None:
                self.record.replies.append(reply)

    @contextlib.contextmanager
    def _call(self) -> Iterator[bool]:
        self._depth += 1
        try:
            yield self._depth == 1
        finally:
            self._depth -= 1


_RECORDER = "_vlm_envs_episode_recorder"


def recorder_of(env: object) -> EpisodeRecorder:
    """The recorder of ``env``'s episodes (made on first use: an env need not call ``Env.__init__``)."""
    recorder = vars(env).get(_RECORDER)
    if recorder is None:
        recorder = EpisodeRecorder()
        setattr(env, _RECORDER, recorder)
    return recorder


ObsT = TypeVar("ObsT")


class Snapshots(Generic[ObsT]):
    """Snapshot and restore for :class:`vlm_envs.Env`, by record and replay unless the env keeps its own
    state (:meth:`snapshot_state` and :meth:`restore_state`). Bump :attr:`rules_version` whenever the env's
    dynamics change: snapshots of the old rules are then refused instead of replayed into another episode."""

    #: The version of the env's rules; a snapshot restores only into an env of the same version.
    rules_version: ClassVar[str] = "1"
    spec: Any = None

    def snapshot(self) -> dict[str, Any]:
        """The episode as it stands, after ``reset`` or any ``step`` (finished episodes too): a plain JSON
        dict naming the env, its config and rules version, with a digest of its content."""
        return seal(self._snapshot_owner(), self.snapshot_state())

    def restore(self, snapshot: Any) -> ObsT:
        """Continue the episode of ``snapshot`` (taken from an env of the same name and config, in any
        process) and return the observation the model is to answer next; :class:`SnapshotError` for a
        foreign, altered, truncated or oversized snapshot, the env then left as it was."""
        state = open_sealed(snapshot, self._snapshot_owner())
        try:
            previous = self.snapshot_state()
        except SnapshotError:  # no episode yet (or one that cannot be replayed): nothing to go back to
            previous = None
        try:
            return self.restore_state(state)
        except SnapshotError:  # refused before anything changed
            raise
        except Exception as err:  # replaying a forged episode can fail in any way the env fails
            if previous is not None:
                self.restore_state(previous)
            else:
                recorder_of(self).record = None
            raise SnapshotError(f"the snapshot does not replay: {one_line(err, 200, typed=True)}") from err

    def snapshot_state(self) -> dict[str, Any]:
        """The plain JSON state a snapshot holds: by default the replay record (seed, options, replies)."""
        record = recorder_of(self).record
        if record is None:
            raise SnapshotError("no episode to snapshot: call reset() first")
        return record.state()

    def restore_state(self, state: Any) -> ObsT:
        """Set the episode to ``state`` (what :meth:`snapshot_state` gave) and return the observation to
        answer next: by default ``reset`` with the seed and options, then the replies. Raise
        :class:`SnapshotError` for a state refused before anything changed; any other error is undone."""
        record = EpisodeRecord.from_state(state)
        env: Any = self
        if record.options is None:
            obs, _ = env.reset(seed=record.seed)
        else:
            obs, _ = env.reset(seed=record.seed, options=record.options)
        for reply in record.replies:
            obs, _, _ = env.step(reply)
        return obs

    def episode_seed(self) -> int | None:
        """The seed the current episode plays (what a ``reset`` without one picked); ``None``: not known,
        and an episode reset without a seed cannot be snapshot."""
        return None

    def snapshot_config(self) -> dict[str, Any]:
        """The config a snapshot names, as plain JSON: equal exactly when two envs of one name play the
        same episode for the same seed, options and replies. By default the config ``build_env`` gave."""
        return dict(self.spec.kwargs) if self.spec is not None else {}

    def _snapshot_owner(self) -> SnapshotOwner:
        cls = type(self)
        name = self.spec.name if self.spec is not None else f"{cls.__module__}:{cls.__qualname__}"
        try:
            config = json.loads(canonical_json(self.snapshot_config()))
        except (TypeError, ValueError) as err:
            raise SnapshotError(
                f"{name}'s snapshot_config() is not plain JSON ({one_line(err, 120)}): give the env a "
                "snapshot_config() that names its config in JSON"
            ) from None
        return SnapshotOwner(env=name, config=config, rules_version=str(cls.rules_version))
