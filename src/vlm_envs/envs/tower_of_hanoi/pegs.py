"""Tower of Hanoi's rules: disks on three pegs, legal moves, start positions drawn from a seed, and the
shortest way to gather every disk on the goal peg.

A position is a tuple: ``pegs[d]`` is the peg (0, 1, 2 for A, B, C) of disk ``d``, disk 0 the smallest.
Any such tuple is a legal position (each peg's disks stack largest at the bottom). A move takes the top
(smallest) disk of one peg onto another peg that is empty or whose top disk is larger.
"""

from __future__ import annotations

import numpy as np

Position = tuple[int, ...]
Move = tuple[int, int]
PEG_NAMES = "ABC"
#: Start positions drawn before falling back to the classic start (every disk on the peg after the goal).
MAX_DRAWS = 100


def top(pegs: Position, peg: int) -> int | None:
    """The smallest disk on ``peg``, None when it is empty."""
    return next((d for d, p in enumerate(pegs) if p == peg), None)


def move_error(pegs: Position, move: Move) -> str | None:
    """Why ``move`` is illegal in ``pegs``, or None when it is legal."""
    src, dst = move
    if src == dst:
        return f"{PEG_NAMES[src]}->{PEG_NAMES[dst]} moves a disk onto its own peg"
    disk = top(pegs, src)
    if disk is None:
        return f"peg {PEG_NAMES[src]} is empty"
    under = top(pegs, dst)
    if under is not None and under < disk:
        return f"disk {disk + 1} cannot go onto the smaller disk {under + 1} on peg {PEG_NAMES[dst]}"
    return None


def moved(pegs: Position, move: Move) -> Position:
    """The position after the legal ``move``."""
    disk = top(pegs, move[0])
    assert disk is not None
    return (*pegs[:disk], move[1], *pegs[disk + 1 :])


def shortest_moves(pegs: Position, goal: int) -> list[Move]:
    """A shortest sequence of moves gathering every disk on peg ``goal``: the largest disk not there moves
    once, after the smaller ones are stacked on the third peg, and they then follow it (optimal from any
    position to a single peg)."""
    position = list(pegs)
    out: list[Move] = []

    def gather(k: int, target: int) -> None:  # disks 0..k-1 onto target
        for disk in range(k - 1, -1, -1):
            if position[disk] != target:
                other = 3 - position[disk] - target
                gather(disk, other)
                out.append((position[disk], target))
                position[disk] = target
                gather(disk, target)
                return

    gather(len(position), goal)
    return out


def draw_start(disks: int, min_moves: int, classic: bool, seed: int) -> tuple[Position, int]:
    """A start position and goal peg from ``seed``: every disk on peg A and the goal C (``classic``), or
    each disk on a random peg and a random goal, at least ``min_moves`` moves from solved
    (``min_moves <= 2**disks - 1``; after :data:`MAX_DRAWS` draws, the classic start, the goal drawn)."""
    if classic:
        return (0,) * disks, 2
    rng = np.random.default_rng([seed, 0x4A301])
    for _ in range(MAX_DRAWS):
        pegs = tuple(int(p) for p in rng.integers(3, size=disks))
        goal = int(rng.integers(3))
        if len(shortest_moves(pegs, goal)) >= min_moves:
            return pegs, goal
    goal = int(rng.integers(3))
    return ((goal + 1) % 3,) * disks, goal


def format_move(move: Move) -> str:
    return f"{PEG_NAMES[move[0]]}->{PEG_NAMES[move[1]]}"


def stacks(pegs: Position) -> list[list[int]]:
    """Each peg's disk numbers (1 = smallest), bottom to top."""
    return [[d + 1 for d in range(len(pegs) - 1, -1, -1) if pegs[d] == peg] for peg in range(3)]
