"""The result of grading one answer, and the fixed vocabulary of reasons it can carry."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: Same value after normalising formatting (exact symbolic or exact numeric equality).
EQUAL = "equal"
#: Equal within the rounding of the label (decimal label) or of the prediction (decimal prediction).
ROUNDED_MATCH = "rounded match"
#: Parsed on both sides, different values.
MISMATCH = "mismatch"
#: Nothing to grade (empty or whitespace after extraction).
EMPTY = "empty"
#: Over the length cap, rejected before any parsing.
TOO_LONG = "too long"
#: Nesting or exponents beyond what an answer needs (exponent towers, deep fraction stacks).
TOO_COMPLEX = "too complex"
#: The grading worker overran its wall-clock limit and was killed.
TIMEOUT = "timeout"
#: The prediction (or label) could not be read as mathematics.
UNPARSEABLE = "unparseable"
#: Several candidate answers at once ("52 or 53", "\\pm 3", "52, 53").
HEDGE = "hedge"
#: A bare multiple-choice letter where the label is a value.
CHOICE_LETTER = "choice letter"
#: Radians against degrees (or the other way round).
UNIT_MISMATCH = "unit mismatch"
#: The grading worker died or answered garbage.
WORKER_ERROR = "worker error"

REASONS: frozenset[str] = frozenset(
    {
        EQUAL,
        ROUNDED_MATCH,
        MISMATCH,
        EMPTY,
        TOO_LONG,
        TOO_COMPLEX,
        TIMEOUT,
        UNPARSEABLE,
        HEDGE,
        CHOICE_LETTER,
        UNIT_MISMATCH,
        WORKER_ERROR,
    }
)


@dataclass(frozen=True)
class Verdict:
    """Whether a prediction matches a label, why, and the normalised forms that were compared."""

    correct: bool
    reason: str
    prediction_parsed: str | None = None
    truth_parsed: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (for the worker pipe and for logs)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        """Inverse of :meth:`to_dict`; raises ``ValueError`` on anything else."""
        if not isinstance(data, dict) or data.get("reason") not in REASONS:
            raise ValueError(f"not a verdict: {data!r:.200}")
        correct = data.get("correct")
        pred, truth = data.get("prediction_parsed"), data.get("truth_parsed")
        if not isinstance(correct, bool) or not all(v is None or isinstance(v, str) for v in (pred, truth)):
            raise ValueError(f"not a verdict: {data!r:.200}")
        return cls(correct, data["reason"], pred, truth)
