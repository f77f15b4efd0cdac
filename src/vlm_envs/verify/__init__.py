"""Math answer checking that is right on geometry answers, bounded in time, and never runs model text.

``grade`` / ``agrade`` run in worker processes under a hard wall-clock limit (``timeout``, at most
``MAX_TIMEOUT``; ``check_timeout`` validates one where it is configured); ``grade_local`` is the same
check in-process with no bound (for use inside workers and benchmarks). Verdict reasons are the string
constants exported here.
"""

from vlm_envs.verify.bounded import DEFAULT_TIMEOUT, agrade, configure, grade, shutdown
from vlm_envs.verify.compare import grade_local
from vlm_envs.verify.extract import extract_boxed
from vlm_envs.verify.normalize import MAX_ANSWER_CHARS, MAX_TEXT_CHARS
from vlm_envs.verify.pool import MAX_TIMEOUT, check_timeout
from vlm_envs.verify.verdict import (
    CHOICE_LETTER,
    EMPTY,
    EQUAL,
    HEDGE,
    MISMATCH,
    REASONS,
    ROUNDED_MATCH,
    TIMEOUT,
    TOO_COMPLEX,
    TOO_LONG,
    UNIT_MISMATCH,
    UNPARSEABLE,
    WORKER_ERROR,
    Verdict,
)

__all__ = [
    "CHOICE_LETTER",
    "DEFAULT_TIMEOUT",
    "EMPTY",
    "EQUAL",
    "HEDGE",
    "MAX_ANSWER_CHARS",
    "MAX_TEXT_CHARS",
    "MAX_TIMEOUT",
    "MISMATCH",
    "REASONS",
    "ROUNDED_MATCH",
    "TIMEOUT",
    "TOO_COMPLEX",
    "TOO_LONG",
    "UNIT_MISMATCH",
    "UNPARSEABLE",
    "WORKER_ERROR",
    "Verdict",
    "agrade",
    "check_timeout",
    "configure",
    "extract_boxed",
    "grade",
    "grade_local",
    "shutdown",
]
