"""What an inference engine is and what its replies must be: the engine reply contract, stated once.

:class:`Engine` is the small interface the episode loop talks to: token ids and images in; token ids,
log probs and a finish reason out. :class:`ReplyContract` states what any engine's reply must be; the
episode loop checks every reply against it. The errors say whether a retry may help.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NoReturn, Protocol, runtime_checkable

from vlm_envs.rollout.engines.image_uris import ImageInput

FinishReason = Literal["stop", "length", "abort"]

# SGLang's finish_reason.type values (sglang/srt/managers/schedule_batch.py: FINISH_* to_json()).
_FINISH_TYPES: frozenset[str] = frozenset({"stop", "length", "abort"})
#: A log prob above 0 by at most this is float rounding of a certain token (p = 1); kept as 0.0.
LOG_PROB_ROUNDING = 1e-5


class EngineError(Exception):
    """An engine call failed."""


class TransientEngineError(EngineError):
    """A failure that may pass on retry (connection refused or reset, 5xx); retries were used up."""


class EngineTimeout(TransientEngineError):
    """The engine gave no complete reply in time: a read made no progress, or the turn ran out."""


class PermanentEngineError(EngineError):
    """A failure a retry cannot fix: a 4xx answer, or a reply that breaks the protocol."""


class EngineContractError(PermanentEngineError):
    """A reply broke the reply contract (see :class:`ReplyContract`).

    ``engine`` names the engine, ``rule`` the rule broken. ``kept`` is set when the reply is usable
    up to a point (more tokens than asked): its first ``max_new_tokens`` tokens, checked.
    """

    def __init__(self, engine: str, rule: str, detail: str, kept: EngineOutput | None = None) -> None:
        super().__init__(f"{engine} broke the reply contract ({rule}): {detail}")
        self.engine, self.rule, self.kept = engine, rule, kept


@dataclasses.dataclass(frozen=True)
class EngineOutput:
    """One generation: the new token ids with their log probs, why it stopped, and its text."""

    token_ids: list[int]
    log_probs: list[float]
    finish_reason: FinishReason
    text: str = ""
    #: The stop string or stop token id that ended a ``"stop"`` generation, when the engine says.
    matched_stop: int | str | None = None


@runtime_checkable
class Engine(Protocol):
    """Generates a continuation of ``input_ids`` (with ``images`` in placeholder order)."""

    async def generate(
        self, input_ids: Sequence[int], images: Sequence[ImageInput], sampling_params: Mapping[str, Any]
    ) -> EngineOutput:
        """Raise :class:`EngineError` subclasses on failure; an abort is an output, not an error."""
        ...


def engine_name(engine: object) -> str:
    """How errors name ``engine``: its ``name`` attribute if it has a string one, else its class."""
    name = getattr(engine, "name", None)
    return name if isinstance(name, str) and name else type(engine).__name__


@dataclasses.dataclass(frozen=True)
class ReplyContract:
    """What every engine reply must be, checked once per reply by the episode loop.

    Token ids are ints (not bools, not floats) in ``[0, vocab_size)``; there is one log prob per id,
    each a finite real number ``<= 0`` (up to :data:`LOG_PROB_ROUNDING`); the finish reason is one
    SGLang reports (stop, length, abort); there are at most ``max_new_tokens`` ids. A reply with
    more keeps its first ``max_new_tokens`` (``EngineContractError.kept``); any other break rejects
    the whole reply.
    """

    vocab_size: int
    max_new_tokens: int
    engine: str = "engine"

    def check(self, output: EngineOutput) -> EngineOutput:
        """``output`` with ids as ints and log probs as floats; raises :class:`EngineContractError`."""
        ids, log_probs = output.token_ids, output.log_probs
        if output.finish_reason not in _FINISH_TYPES:
            self._broken(
                "a known finish reason", f"{output.finish_reason!r} is not one of {sorted(_FINISH_TYPES)}"
            )
        if len(ids) != len(log_probs):
            self._broken("one log prob per token id", f"{len(ids)} token ids but {len(log_probs)} log probs")
        if set(map(type, ids)) - {int}:  # fast paths first: this runs on the event loop every turn
            ids = [self._token_id(i, t) for i, t in enumerate(ids)]
        low, high = (min(ids), max(ids)) if ids else (0, 0)
        if low < 0 or high >= self.vocab_size:
            i, t = next((i, t) for i, t in enumerate(ids) if not 0 <= t < self.vocab_size)
            self._broken(
                "token ids in [0, vocab_size)",
                f"token id {t} at position {i} is outside [0, {self.vocab_size})",
            )
        plain = not set(map(type, log_probs)) - {float}  # a sum is not finite if any term is not
        if not (plain and max(log_probs, default=0.0) <= 0.0 and math.isfinite(sum(log_probs))):
            log_probs = [self._log_prob(i, lp) for i, lp in enumerate(log_probs)]
        checked = dataclasses.replace(output, token_ids=list(ids), log_probs=list(log_probs))
        if len(ids) > self.max_new_tokens:
            kept = dataclasses.replace(
                checked,
                token_ids=checked.token_ids[: self.max_new_tokens],
                log_probs=checked.log_probs[: self.max_new_tokens],
                finish_reason="length",
            )
            n = self.max_new_tokens
            self._broken(
                "at most max_new_tokens",
                f"{len(ids)} tokens for max_new_tokens={n}; the first {n} kept",
                kept,
            )
        return checked

    def _token_id(self, position: int, token: Any) -> int:
        if isinstance(token, numbers.Integral) and not isinstance(token, bool):
            return int(token)
        self._broken(
            "token ids are ints", f"token id {token!r} at position {position} is a {type(token).__name__}"
        )

    def _log_prob(self, position: int, value: Any) -> float:
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            self._broken(
                "log probs are numbers",
                f"log prob {value!r} at position {position} is a {type(value).__name__}",
            )
        value = float(value)
        if not math.isfinite(value):
            hint = " (did return_logprob reach the server?)"
            self._broken("log probs are finite and <= 0", f"log prob {value!r} at position {position}{hint}")
        if value > LOG_PROB_ROUNDING:
            self._broken("log probs are finite and <= 0", f"log prob {value!r} at position {position} is > 0")
        return min(value, 0.0)

    def _broken(self, rule: str, detail: str, kept: EngineOutput | None = None) -> NoReturn:
        raise EngineContractError(self.engine, rule, detail, kept)
