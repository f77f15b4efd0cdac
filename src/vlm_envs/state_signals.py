"""Where an episode stands: a key of its state, the state as text, and the turns left to the goal.

Three optional methods of :class:`vlm_envs.Env` (:class:`StateSignals`); each is ``None`` by default, so an
env that does not know them keeps working, and ``None`` before the first ``reset``:

- ``state_key()``: equal for two episodes of one env and config exactly when their states are equal,
  whatever path led there. It does not depend on the turn number, on a budget (turns, moves or zooms
  left) or on the history; what the model cannot see (a maze's unseen cells, a field's mines, the answer)
  is part of the state. By default a digest of the env's class and ``state_text()``, so an env that writes
  its state as text has a key too.
- ``state_text()``: the state, exact and complete, as text a model could be trained to write (board rows,
  positions, values); equal keys, equal texts.
- ``distance_to_goal()``: the turns an optimal player needs from here, 0 once the goal is reached, no budget
  counted (compare it with the turns left yourself). :data:`UNREACHABLE` from a state the goal cannot be
  reached from (a box pushed into a corner, a fall into a hole, a wrong final answer); ``None`` where the env
  cannot compute it within its step budget. Equal keys, equal distances.

The rollout records, for every turn, the state the reply acted on and the distance after it
(:func:`standing_of`), and whether the reply was optimal (:func:`action_optimal`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import ClassVar, Final

#: What ``distance_to_goal()`` says of a state from which no play reaches the goal.
UNREACHABLE: Final = -1


def state_digest(owner: str, text: str) -> str:
    """``sha256:<hex>`` of a state's ``text`` written by ``owner`` (the env's class path)."""
    digest = hashlib.sha256(f"{owner}\n{text}".encode("utf-8", "surrogatepass"))
    return "sha256:" + digest.hexdigest()


def turns_for(actions: int, per_turn: int) -> int:
    """The fewest turns that play ``actions`` actions, at most ``per_turn`` a turn."""
    return -(-actions // per_turn)


class StateSignals:
    """``state_key``, ``state_text`` and ``distance_to_goal`` for :class:`vlm_envs.Env`: ``None`` unless the
    env says (see :mod:`vlm_envs.state_signals`)."""

    #: Whether one episode can come back to a state at a later turn (a move and its inverse, a reply that
    #: changes nothing); ``False`` where every reply moves the episode on, so ``check_env`` skips its check
    #: of a key met again at another turn.
    states_recur: ClassVar[bool] = True

    def state_key(self) -> str | None:
        """A key equal exactly when two states of this env and config are equal: by default a digest of
        :meth:`state_text`."""
        text = self.state_text()
        if text is None:
            return None
        cls = type(self)
        return state_digest(f"{cls.__module__}:{cls.__qualname__}", text)

    def state_text(self) -> str | None:
        """The state, exact and complete, as text; ``None``: the env does not say."""
        return None

    def distance_to_goal(self) -> int | None:
        """The turns an optimal player needs from here (0 once solved, :data:`UNREACHABLE` where no play
        reaches the goal); ``None``: the env cannot compute it."""
        return None


def answer_distance(solved: bool, lost: bool, to_answer: int = 1) -> int:
    """The distance in an env of one final answer: 0 once ``solved``, :data:`UNREACHABLE` once ``lost`` (a
    wrong final answer ended it), else the ``to_answer`` turns the answer still takes."""
    if solved:
        return 0
    return UNREACHABLE if lost else to_answer


@dataclasses.dataclass(frozen=True)
class Standing:
    """Where an episode stood at one moment, as its env said: the state's key and distance to the goal."""

    key: str | None = None
    distance: int | None = None


def standing_of(env: StateSignals) -> Standing:
    """``env``'s :meth:`~StateSignals.state_key` and :meth:`~StateSignals.distance_to_goal` now, checked:
    ``TypeError`` for a key that is not a ``str`` or a distance that is not an ``int`` (a ``bool`` is not),
    ``ValueError`` for a distance below :data:`UNREACHABLE`."""
    key, distance = env.state_key(), env.distance_to_goal()
    if key is not None and not isinstance(key, str):
        raise TypeError(f"state_key() returned a {type(key).__name__}, not a str or None")
    if distance is not None and (isinstance(distance, bool) or not isinstance(distance, int)):
        raise TypeError(f"distance_to_goal() returned a {type(distance).__name__}, not an int or None")
    if distance is not None and distance < UNREACHABLE:
        raise ValueError(f"distance_to_goal() returned {distance}: a distance is >= 0, or UNREACHABLE (-1)")
    return Standing(key, None if distance is None else int(distance))


def action_optimal(before: int | None, after: int | None) -> bool | None:
    """Whether a turn was an optimal player's: it lowered the distance to the goal by exactly one.
    ``None`` where it cannot be told: a distance unknown, or none left to lower (the goal reached, or
    :data:`UNREACHABLE` before the turn)."""
    if before is None or after is None or before < 1:
        return None
    return after == before - 1
