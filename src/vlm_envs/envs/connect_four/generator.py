"""Connect Four starts drawn from a seed: an opening played by both sides, stopped where you, to move, can
win against the engine in ``min_win`` to ``max_win`` of your moves and no fewer.

The seed draws the engine's tie ``order`` once, then games: who moves first, then moves of a quick player
for each side (the engine's rules at depth 1: win, block, stay safe, else the best score one ply ahead),
with a random legal column instead for a share of them (:data:`YOUR_NOISE`, :data:`ENGINE_NOISE`). From
the :data:`MIN_OPENING`-th ply on, each position where you are to move is searched for a win of fewer than
``min_win`` moves; the first that has one ends the game, and the position of your move before it becomes
the start if its own shortest win is ``min_win`` to ``max_win`` moves. (With ``min_win`` 1 every position
is searched for a win within ``max_win``.) A start needs ``max_win`` within the engine's horizon, where the
search is a cheap forced-win search. After :data:`MAX_GAMES` games without one, the position found with the
longest short win is taken, else a fixed one where you win at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vlm_envs.envs.connect_four.board import Geometry, has_four, playable
from vlm_envs.envs.connect_four.engine import reply
from vlm_envs.envs.connect_four.solver import SEARCH_BUDGET, shortest_win

#: Plies played before a position may be a start.
MIN_OPENING = 4
#: Games drawn before the fallback.
MAX_GAMES = 60
#: The share of random moves in the openings: yours, and the engine's.
YOUR_NOISE, ENGINE_NOISE = 0.1, 0.5
#: The depth of the quick player of the openings.
OPENING_DEPTH = 1


@dataclass(frozen=True)
class Start:
    """A start: your stones and the engine's, you to move, and how it came about."""

    you: int
    engine: int
    #: The engine's order of preference among columns of equal score.
    order: tuple[int, ...]
    #: The fewest of your moves to a win against the engine.
    optimal_moves: int
    #: The columns played from the empty board, in turn.
    opening: tuple[int, ...]
    you_first: bool
    #: The game the start came from (``MAX_GAMES``: a fallback).
    attempt: int


@dataclass
class _Best:
    """The fallback: the position with the longest short win seen so far."""

    start: Start | None = None


def generate(g: Geometry, depth: int, min_win: int, max_win: int, seed: int) -> Start:
    """A start whose shortest win against the engine (``depth``, and an ``order`` drawn from ``seed``) is
    ``min_win`` to ``max_win`` moves, ``max_win`` within the engine's horizon."""
    rng = np.random.default_rng([seed, 0xC4F0])
    order = tuple(int(c) for c in rng.permutation(g.cols))
    best = _Best()
    for attempt in range(MAX_GAMES):
        start = _game(g, depth, order, min_win, max_win, rng, attempt, best)
        if start is not None:
            return start
    if best.start is not None:
        return best.start
    return _fallback(g, order)


def _game(
    g: Geometry,
    depth: int,
    order: tuple[int, ...],
    min_win: int,
    max_win: int,
    rng: np.random.Generator,
    attempt: int,
    best: _Best,
) -> Start | None:
    """One opening; the start it gives, or ``None`` (``best`` keeps any shorter win seen)."""
    you_first = bool(rng.integers(2))
    you = engine = 0
    played: list[int] = []
    previous: tuple[int, int, tuple[int, ...]] | None = None
    while True:
        mask = you | engine
        yours = (len(played) % 2 == 0) == you_first
        if yours and len(played) >= MIN_OPENING:
            found = _search(g, depth, order, you, mask, max_win if min_win == 1 else min_win - 1)
            if found is not None and found >= min_win:
                return Start(you, engine, order, found, tuple(played), you_first, attempt)
            if found is not None:
                _keep(best, Start(you, engine, order, found, tuple(played), you_first, MAX_GAMES))
                if previous is None:
                    return None
                before_you, before_mask, before_played = previous
                found = _search(g, depth, order, before_you, before_mask, max_win)
                if found is None:
                    return None
                return Start(
                    before_you, before_mask ^ before_you, order, found, before_played, you_first, attempt
                )
            previous = (you, mask, tuple(played))
        free = playable(g, mask)
        legal = [c for c in range(g.cols) if free & g.column_masks[c]]
        noise = YOUR_NOISE if yours else ENGINE_NOISE
        if rng.random() < noise:
            col = legal[int(rng.integers(len(legal)))]
        else:
            mover, prefer = (you, g.centre_order) if yours else (engine, order)
            col = reply(g, OPENING_DEPTH, prefer, mover, mask).column
        move = free & g.column_masks[col]
        if yours:
            you |= move
        else:
            engine |= move
        played.append(col)
        if has_four(g, you) or has_four(g, engine) or (mask | move) == g.full:
            return None


def _search(g: Geometry, depth: int, order: tuple[int, ...], you: int, mask: int, most: int) -> int | None:
    """The fewest moves to a win within ``most``, ``None`` where none (or past the budget)."""
    return shortest_win(g, depth, order, you, mask, most, SEARCH_BUDGET).moves


def _keep(best: _Best, start: Start) -> None:
    if best.start is None or start.optimal_moves > best.start.optimal_moves:
        best.start = start


def _fallback(g: Geometry, order: tuple[int, ...]) -> Start:
    """Three of your stones in a row at the bottom left, the engine's on them, you to win at once."""
    you = sum(1 << (c * g.stride) for c in range(3))
    engine = you << 1
    return Start(you, engine, order, 1, (0, 0, 1, 1, 2, 2), True, MAX_GAMES)
