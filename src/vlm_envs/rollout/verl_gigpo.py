"""GiGPO's turn-level advantages (:mod:`vlm_envs.credit.gigpo`) as verl's advantage estimator
``vlm_envs_gigpo`` (``algorithm.adv_estimator=vlm_envs_gigpo``).

Importing this module registers it (verl's ``register_adv_est``); verl imports it in every process through
the ``verl.plugins`` entry point this package declares (verl's ``__init__`` loads that group). Each row
of the batch is one output of :class:`~vlm_envs.rollout.verl.VlmEnvsAgentLoop`: a whole episode (full
history) or one turn (``window:K``). Its record (``extra_fields["vlm_envs"]``) says which episode it
belongs to (``episode_id``), which turns its response holds and where (``response_turns``), each turn's
state key and the episode's step rewards. Then, within each prompt group (verl's ``index``, the uid):

- every generated token of a turn gets ``A_episode + step_weight * A_step`` of that turn
  (:func:`~vlm_envs.credit.gigpo.gigpo_advantages`);
- the episode's return is the summed ``token_level_rewards`` of its last output (the row whose score
  verl's V1 trainer gives every output of the episode); a turn's step return is its discounted return
  from the record's step rewards, with ``gamma``;
- a row without usable signals (another agent loop's row, a record that is missing, malformed or does
  not match the row's mask) counts as an episode of its own, and a FAILED or ABORTED episode's turns join
  no anchor state: their tokens get the episode-level advantage only. Nothing in a record can fail the
  step; a reward that is not a finite number counts as 0.

Settings come from ``algorithm.vlm_envs_gigpo`` (``step_weight``, ``gamma``, ``scale``, ``eps``; defaults
from :mod:`vlm_envs.credit.gigpo`; ``scale`` defaults to ``mean`` where
``algorithm.norm_adv_by_std_in_grpo`` is false); a bad setting raises ``ValueError``.

verl 0.9.1's ``compute_advantage`` (``verl/trainer/ppo/ray_trainer.py``) gives a registered estimator
``token_level_rewards``, ``response_mask``, ``config`` and ``index`` only, never the batch's extra
fields. The records therefore come from ``non_tensor_batch`` where a caller passes it, else from
:func:`records_for_rows` around the call: the V1 trainers of :mod:`vlm_envs.rollout.verl_trainer` do
that. Without records every row is its own episode: GRPO over the rows (a lone row gets 0).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import math
import numbers
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any

import torch
from verl.trainer.ppo.core_algos import register_adv_est

from vlm_envs.credit.gigpo import EPS, GAMMA, SCALES, STEP_WEIGHT, CreditTurn, Scale, discounted_returns
from vlm_envs.credit.gigpo import gigpo_advantages as turn_advantages
from vlm_envs.rollout.history import check_gamma
from vlm_envs.rollout.record import RECORD_KEY

#: The estimator's name (``algorithm.adv_estimator``) and the key of its settings under ``algorithm``.
ADV_ESTIMATOR = "vlm_envs_gigpo"
SETTINGS_KEY = "vlm_envs_gigpo"
#: Episodes whose turns join anchor states (a FAILED or ABORTED episode's steps say nothing of its states).
_PLAYED = frozenset({"completed", "truncated"})

logger = logging.getLogger(__name__)
_handed: contextvars.ContextVar[Sequence[Any] | None] = contextvars.ContextVar("vlm_envs_gigpo", default=None)


@dataclasses.dataclass(frozen=True)
class GiGPOSettings:
    """The estimator's settings (see the module)."""

    step_weight: float = STEP_WEIGHT
    gamma: float = GAMMA
    scale: Scale = "std"
    eps: float = EPS

    def __post_init__(self) -> None:
        check_gamma(self.gamma, f"{SETTINGS_KEY}.gamma")
        for name in ("step_weight", "eps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < math.inf:
                raise ValueError(f"{SETTINGS_KEY}.{name} must be a finite number >= 0, got {value!r:.80}")
        if self.eps == 0:
            raise ValueError(f"{SETTINGS_KEY}.eps must be > 0, got {self.eps!r}")
        if self.scale not in SCALES:
            raise ValueError(f"{SETTINGS_KEY}.scale must be one of {SCALES}, got {self.scale!r:.80}")

    @classmethod
    def of(cls, config: Any) -> GiGPOSettings:
        """The settings under ``config`` (verl's ``algorithm`` config, a mapping, or ``None``)."""
        section = config.get(SETTINGS_KEY) if config is not None else None
        values = dict(section) if section is not None else {}
        unknown = sorted(set(values) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"unknown {SETTINGS_KEY} settings {unknown}: step_weight, gamma, scale, eps")
        if "scale" not in values and config is not None and not config.get("norm_adv_by_std_in_grpo", True):
            values["scale"] = "mean"
        return cls(**values)


@contextlib.contextmanager
def records_for_rows(records: Sequence[Any]) -> Iterator[None]:
    """Hand each row's record (``extra_fields["vlm_envs"]``, or anything else: ``None``) to the estimator
    calls made inside the block, in the order of the batch's rows."""
    token = _handed.set(list(records))
    try:
        yield
    finally:
        _handed.reset(token)


def records_of(extra_fields: Sequence[Any]) -> list[Any]:
    """Each row's record from its ``extra_fields`` (``None`` where a row has none)."""
    return [fields.get(RECORD_KEY) if isinstance(fields, Mapping) else None for fields in extra_fields]


@dataclasses.dataclass(frozen=True)
class _Turn:
    turn: int
    start: int
    end: int
    state_key: str | None
    step_return: float


@dataclasses.dataclass(frozen=True)
class _Row:
    """One row as GiGPO reads it: its episode, its turns' token spans and their standing."""

    episode: Hashable
    turns: tuple[_Turn, ...] = ()

    @property
    def last(self) -> int:
        return max((t.turn for t in self.turns), default=-1)


def read_row(row: int, record: Any, ones: torch.Tensor, gamma: float) -> _Row:
    """Row ``row``'s episode and turns from its ``record``, checked against its response mask (``ones``: how
    many of its first ``k`` tokens are generated, for ``k = 0 .. length``); a row without usable signals is
    an episode of its own with no turns."""
    alone = _Row(episode=("row", row))
    if not isinstance(record, Mapping) or not isinstance(record.get("episode_id"), str):
        return alone
    episode = record["episode_id"]
    spans, turns = record.get("response_turns"), record.get("turns")
    if not isinstance(spans, list) or not isinstance(turns, list) or not spans:
        return alone
    breakdown = record.get("reward_breakdown")
    steps = breakdown.get("step_rewards") if isinstance(breakdown, Mapping) else None
    played = record.get("status") in _PLAYED and _finite_list(steps) and len(steps) == len(turns)
    returns = discounted_returns(steps, gamma) if played else [0.0] * len(turns)
    read, covered, at = [], 0, 0
    for span in spans:
        if not (isinstance(span, list) and len(span) == 3 and all(type(v) is int for v in span)):
            return alone
        turn, start, end = span
        if not (0 <= turn < len(turns) and at <= start < end < len(ones)):
            return alone
        if int(ones[end] - ones[start]) != end - start:  # a token of the reply is not generated
            return alone
        entry = turns[turn]
        key = entry.get("state_key") if isinstance(entry, Mapping) and played else None
        read.append(_Turn(turn, start, end, key if isinstance(key, str) else None, returns[turn]))
        covered, at = covered + end - start, end
    if covered != int(ones[-1]):  # generated tokens no reply holds: the record is not this row's
        return alone
    return _Row(episode=episode, turns=tuple(read))


def token_advantages(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    groups: Sequence[Hashable],
    records: Sequence[Any],
    settings: GiGPOSettings,
) -> torch.Tensor:
    """Each response token's GiGPO advantage (``(rows, length)``, 0 where ``response_mask`` is), for rows
    in prompt ``groups`` with their ``records`` (see the module)."""
    ones = torch.nn.functional.pad(response_mask.long().cumsum(dim=-1), (1, 0))
    rows = [read_row(i, record, ones[i], settings.gamma) for i, record in enumerate(records)]
    raw = token_level_rewards.sum(dim=-1).tolist()
    if not all(map(math.isfinite, raw)):
        logger.warning("vlm_envs_gigpo: a row's reward is not a finite number; it counts as 0")
    scores = [score if math.isfinite(score) else 0.0 for score in raw]
    final: dict[tuple[Hashable, Hashable], int] = {}
    for i, row in enumerate(rows):
        key = (groups[i], row.episode)
        if key not in final or row.last > rows[final[key]].last:
            final[key] = i
    # every row's uncovered tokens (its episode's advantage), then each turn's span
    credit, places = [], []
    for i, row in enumerate(rows):
        group, episode_return = groups[i], float(scores[final[groups[i], row.episode]])
        credit.append(CreditTurn(group, row.episode, None, episode_return, 0.0))
        places.append((i, 0, response_mask.shape[1]))
        for turn in row.turns:
            credit.append(CreditTurn(group, row.episode, turn.state_key, episode_return, turn.step_return))
            places.append((i, turn.start, turn.end))
    values = turn_advantages(credit, step_weight=settings.step_weight, scale=settings.scale, eps=settings.eps)
    out = torch.zeros_like(token_level_rewards, dtype=torch.float32)
    for (i, start, end), value in zip(places, values, strict=True):
        out[i, start:end] = value
    return out * response_mask


@register_adv_est(ADV_ESTIMATOR)
def compute_gigpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Any] | None = None,
    config: Any = None,
    non_tensor_batch: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's estimator interface: ``(advantages, returns)``, both the per-token GiGPO advantage.

    ``index``: each row's prompt group (one group where ``None``); the records come from
    ``non_tensor_batch["vlm_envs"]``, else :func:`records_for_rows`; ``config``: verl's ``algorithm``.
    """
    settings = GiGPOSettings.of(config)
    n = int(token_level_rewards.shape[0])
    records = non_tensor_batch.get(RECORD_KEY) if non_tensor_batch is not None else _handed.get()
    if records is None:
        logger.warning(
            "vlm_envs_gigpo got no records (train with trainer.v1.trainer_mode=vlm_envs_sync, or "
            "vlm_envs_colocate_async / vlm_envs_separate_async): GRPO over the rows, no turn-level credit"
        )
    elif len(records) != n:
        logger.warning("vlm_envs_gigpo: %d records for %d rows; turn-level credit off", len(records), n)
    records = list(records) if records is not None and len(records) == n else [None] * n
    groups = [_hashable(g) for g in index] if index is not None else [0] * n
    with torch.no_grad():
        advantages = token_advantages(token_level_rewards, response_mask, groups, records, settings)
    return advantages, advantages


def _finite_list(values: Any) -> bool:
    return isinstance(values, list) and all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values
    )


def _hashable(value: Any) -> Hashable:
    """A group key for ``value`` (verl's uids are strings; a numpy scalar or an array is made hashable)."""
    item = value.item() if hasattr(value, "item") and getattr(value, "size", 1) == 1 else value
    try:
        hash(item)
    except TypeError:
        return repr(item)
    return item
