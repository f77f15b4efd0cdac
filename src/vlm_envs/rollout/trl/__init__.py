"""Train with TRL: ``GRPOTrainer`` plays vlm-envs episodes, every turn's images included.

::

    from trl import GRPOConfig
    from vlm_envs.rollout.trl import VlmEnvsGRPOTrainer

    trainer = VlmEnvsGRPOTrainer(model=model, args=GRPOConfig(...), train_dataset=dataset,
                                 processing_class=processor)
    trainer.train()

``dataset`` holds rows ``vlm-envs make-dataset ENV --trainer trl`` writes (or any prompts carrying
their episode, :mod:`vlm_envs.episode_carrier`). The parts are public too: the rollout function
(:data:`rollout_func`, for ``GRPOTrainer(rollout_func=...)`` with text-only envs), the reward
function (:func:`episode_reward`) and the trainer. This package is the only part of the library
that knows TRL (the ``trl`` extra).
"""

from vlm_envs.rollout.trl.engines import VLLMSampling, VLLMServerEngine
from vlm_envs.rollout.trl.policy import PolicyEngine
from vlm_envs.rollout.trl.processor import load_processor
from vlm_envs.rollout.trl.rewards import episode_metrics, episode_reward
from vlm_envs.rollout.trl.rollout import EpisodeRow, StockTrainerError, VlmEnvsRollout, rollout_func
from vlm_envs.rollout.trl.trainer import (
    TESTED_TRL_VERSIONS,
    DatasetError,
    EpisodesFailedError,
    TrlVersionError,
    VlmEnvsGRPOTrainer,
    check_trl,
)

__all__ = [
    "TESTED_TRL_VERSIONS",
    "DatasetError",
    "EpisodeRow",
    "EpisodesFailedError",
    "PolicyEngine",
    "StockTrainerError",
    "TrlVersionError",
    "VLLMSampling",
    "VLLMServerEngine",
    "VlmEnvsGRPOTrainer",
    "VlmEnvsRollout",
    "check_trl",
    "episode_metrics",
    "episode_reward",
    "load_processor",
    "rollout_func",
]
