"""Matchstick puzzles: a true equation drawn from the seed, then one stick moved at random to make a false
one (a random one of every such move). Moving that stick back solves it, so every puzzle is solvable."""

from __future__ import annotations

import numpy as np

from vlm_envs.envs.matchstick.equation import Equation, moves


def _number(digits: int, rng: np.random.Generator) -> int:
    """A number of 1 to ``digits`` digits (the count drawn first, so short numbers stay common)."""
    count = int(rng.integers(1, digits + 1))
    return int(rng.integers(0 if count == 1 else 10 ** (count - 1), 10**count))


def generate(digits: int, operators: str, rng: np.random.Generator) -> tuple[Equation, Equation]:
    """(the false equation shown, the true one it was made from)."""
    while True:  # most true equations have a false neighbour; the draw repeats for the few without
        op = operators[int(rng.integers(len(operators)))]
        a, b = _number(digits, rng), _number(digits, rng)
        if op == "-" and a < b:
            a, b = b, a
        truth = Equation(str(a), op, str(b), str(a + b if op == "+" else a - b))
        false = [m for m in moves(truth) if not m.true]
        if false:
            return false[int(rng.integers(len(false)))], truth
