"""verl's V1 trainers, each handing the rows' records to the ``vlm_envs_gigpo`` estimator.

verl 0.9.1's V1 trainer (``verl/trainer/ppo/v1/trainer_base.py``, ``PPOTrainer._compute_advantage``)
reads only ``uid``, ``response_mask``, ``rm_scores`` and the log probs from its TransferQueue before it
calls the estimator, which never sees the outputs' ``extra_fields``. These trainers read the rows'
``extra_fields`` for the same keys, in the same order, and hand their records to the estimator
(:func:`~vlm_envs.rollout.verl_gigpo.records_for_rows`) around verl's own step; with any other estimator
they are verl's trainers unchanged. Registered with verl's ``register_trainer`` as ``vlm_envs_sync``,
``vlm_envs_colocate_async`` and ``vlm_envs_separate_async`` (``trainer.v1.trainer_mode``: each then runs
as verl's ``sync``, ``colocate_async`` or ``separate_async``, with that mode's settings); verl imports
this module through the ``verl.plugins`` entry point (where ``transfer_queue``, which verl's V1 trainer
needs, is missing, the import fails and verl's plugin loader skips it).
"""

from __future__ import annotations

from typing import Any, ClassVar

import transfer_queue as tq
from verl.trainer.ppo.v1 import (
    PPOTrainerColocateAsync,
    PPOTrainerSeparateAsync,
    PPOTrainerSync,
    register_trainer,
)

# the module, not its names: where vlm_envs_gigpo is imported first, its own import of verl loads this
# plugin while vlm_envs_gigpo is still half made
from vlm_envs.rollout import verl_gigpo


class HandsRecords:
    """The advantage step of a verl V1 trainer, with the rows' records handed to ``vlm_envs_gigpo``.

    verl's trainer branches on its own mode names (``self.trainer_mode == "sync"``, the mode's settings
    under ``trainer.v1.<mode>``): once verl has picked the class by our name, the config says ``mode``.
    """

    mode: ClassVar[str]
    config: Any

    def __init__(self, config: Any) -> None:
        config.trainer.v1.trainer_mode = self.mode
        super().__init__(config)

    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        if self.config.algorithm.adv_estimator != verl_gigpo.ADV_ESTIMATOR:
            return super()._compute_advantage(batch, metrics)
        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"]
        )
        with verl_gigpo.records_for_rows(verl_gigpo.records_of(data.pop("extra_fields").tolist())):
            return super()._compute_advantage(batch, metrics)


@register_trainer("vlm_envs_sync")
class VlmEnvsTrainerSync(HandsRecords, PPOTrainerSync):
    """verl's ``sync`` trainer, handing records to ``vlm_envs_gigpo``."""

    mode = "sync"


@register_trainer("vlm_envs_colocate_async")
class VlmEnvsTrainerColocateAsync(HandsRecords, PPOTrainerColocateAsync):
    """verl's ``colocate_async`` trainer, handing records to ``vlm_envs_gigpo``."""

    mode = "colocate_async"


@register_trainer("vlm_envs_separate_async")
class VlmEnvsTrainerSeparateAsync(HandsRecords, PPOTrainerSeparateAsync):
    """verl's ``separate_async`` trainer, handing records to ``vlm_envs_gigpo``."""

    mode = "separate_async"
