"""Curricula for ``make-dataset --difficulty`` and ``eval --difficulty``: which difficulty level each row of
a dataset (or episode of an eval) plays.

A spec is one level (``hard``: every row), a mix by share (``easy:0.5,medium:0.3,hard:0.2``: that share
of the rows at each level, in an order drawn from the dataset's seed), or a schedule
(``schedule:easy..hard``: the levels from the first to the last in equal shares, rows ordered from easy to
hard, for trainers that read rows in order; ``schedule:easy:0.6,hard:0.4`` orders a mix by share the same
way). Counts are exact: each level gets its share of ``n`` rounded by largest remainder, so the rows of
a level never differ from ``share * n`` by a whole row. A row's level is computed from its index alone
(:class:`LevelPlan`): a mix places the rows by a keyed permutation of the indices, so no list of ``n``
levels is ever held and any seed range of a dataset can be built anywhere.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from vlm_envs.envs.config import LEVELS

SCHEDULE = "schedule:"
#: How far the shares of a mix may sum from 1 (they are written with a few decimals).
SHARE_TOLERANCE = 1e-6


@dataclasses.dataclass(frozen=True)
class Curriculum:
    """Levels and their shares of the rows; ``ordered``: rows from the easiest level to the hardest."""

    shares: tuple[tuple[str, float], ...]
    ordered: bool = False

    def counts(self, n: int) -> dict[str, int]:
        """Rows per level for ``n`` rows (largest remainder: they sum to ``n``)."""
        exact = [(level, share * n) for level, share in self.shares]
        counts = {level: math.floor(value) for level, value in exact}
        by_remainder = sorted(exact, key=lambda item: item[1] - math.floor(item[1]), reverse=True)
        for level, _ in by_remainder[: n - sum(counts.values())]:
            counts[level] += 1
        return counts

    def plan(self, n: int, seed: int) -> LevelPlan:
        """The levels of ``n`` rows: in level order for a schedule, else placed by ``seed``."""
        return LevelPlan(self, n, seed)


@dataclasses.dataclass(frozen=True)
class LevelPlan(Sequence[str]):
    """Row ``i``'s level (``plan[i]``) for ``n`` rows, computed on demand; picklable and small."""

    curriculum: Curriculum
    n: int
    seed: int

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> str:  # type: ignore[override]
        """Row ``index``'s level (one row: a plan is not sliced)."""
        if not 0 <= index < self.n:
            raise IndexError(f"row {index} of {self.n}")
        position = index if self.curriculum.ordered else _permuted(index, self.n, self.seed)
        for level, count in self._bounds():
            if position < count:
                return level
        raise AssertionError("the counts sum to n")  # unreachable: Curriculum.counts sums to n

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(self.n))

    def _bounds(self) -> list[tuple[str, int]]:
        """Each level with the end of its block of positions, easiest first."""
        counts, end, bounds = self.curriculum.counts(self.n), 0, []
        for level in LEVELS:
            end += counts.get(level, 0)
            bounds.append((level, end))
        return bounds


#: Feistel rounds of the row permutation (Luby-Rackoff: four rounds of a keyed hash give a pseudorandom one).
_ROUNDS = 4


def _permuted(index: int, n: int, seed: int) -> int:
    """``index``'s place in a permutation of ``range(n)`` keyed by ``seed``: a balanced Feistel network on
    the smallest even bit width that holds ``n``, walked until it lands below ``n`` (a bijection there)."""
    half = max(1, ((n - 1).bit_length() + 1) // 2)
    mask = (1 << half) - 1
    key = f"vlm-envs curriculum {seed}".encode()[:64]
    value = index
    while True:
        left, right = value >> half, value & mask
        for round_ in range(_ROUNDS):
            digest = hashlib.blake2b(f"{round_}:{right}".encode(), key=key, digest_size=8).digest()
            left, right = right, left ^ (int.from_bytes(digest, "big") & mask)
        value = (left << half) | right
        if value < n:
            return value


def curriculum_plan(spec: str | None, n: int, seed: int, env_config: Mapping[str, Any]) -> LevelPlan | None:
    """The level of each of ``n`` rows or episodes (``i`` plays seed ``seed + i``) for a ``--difficulty``
    spec, ``None`` without one; ``ValueError`` for a bad spec or an ``env_config`` that sets the level
    itself."""
    if spec is None:
        return None
    if "difficulty" in env_config:
        raise ValueError("give the level with --difficulty or with --config difficulty=..., not both")
    return parse_curriculum(spec).plan(max(n, 0), seed)


def parse_curriculum(spec: str) -> Curriculum:
    """A ``--difficulty`` spec (see the module docstring); ``ValueError`` saying what is wrong."""
    ordered = spec.startswith(SCHEDULE)
    body = spec.removeprefix(SCHEDULE).strip()
    if ordered and ".." in body:
        first, _, last = body.partition("..")
        for level in (first, last):
            _check_level(level, spec)
        order: list[str] = list(LEVELS)
        span = order[order.index(first) : order.index(last) + 1]
        if not span:
            raise ValueError(f"--difficulty {spec!r}: a schedule goes from easier to harder, as easy..hard")
        return Curriculum(tuple((level, 1 / len(span)) for level in span), ordered=True)
    if ":" not in body:
        _check_level(body, spec)
        return Curriculum(((body, 1.0),), ordered=ordered)
    shares: dict[str, float] = {}
    for part in body.split(","):
        level, _, share = part.strip().partition(":")
        _check_level(level, spec)
        if level in shares:
            raise ValueError(f"--difficulty {spec!r} names {level!r} twice")
        try:
            value = float(share)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and 0 < value <= 1):
            raise ValueError(f"--difficulty {spec!r}: the share of {level!r} must be a number in (0, 1]")
        shares[level] = value
    if abs(sum(shares.values()) - 1) > SHARE_TOLERANCE:
        raise ValueError(f"--difficulty {spec!r}: the shares sum to {sum(shares.values()):g}, not 1")
    ordered_shares = tuple((level, shares[level]) for level in LEVELS if level in shares)
    return Curriculum(ordered_shares, ordered=ordered)


def _check_level(level: str, spec: str) -> None:
    if level not in LEVELS:
        raise ValueError(
            f"--difficulty {spec!r}: {level!r} is not a level ({', '.join(LEVELS)}); give LEVEL, "
            "LEVEL:SHARE,... (easy:0.5,medium:0.3,hard:0.2) or schedule:easy..hard"
        )
