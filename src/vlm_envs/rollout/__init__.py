"""Turning environments into training data: encoding, inference engines and the episode loop.

Needs the ``rollout`` extra (torch, transformers, aiohttp).
"""

from vlm_envs.rollout.codec import ChatCodec, Encoded
from vlm_envs.rollout.engines.contract import (
    Engine,
    EngineContractError,
    EngineError,
    EngineOutput,
    EngineTimeout,
    PermanentEngineError,
    ReplyContract,
    TransientEngineError,
)
from vlm_envs.rollout.engines.image_uris import image_data_uri
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.engines.vllm import VLLMEngine
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.executors.config import ExecutorConfig
from vlm_envs.rollout.executors.in_process import EpisodeExecutor, InProcessEpisodes
from vlm_envs.rollout.executors.worker_process import EpisodeJob
from vlm_envs.rollout.executors.workers import EpisodeWorkers
from vlm_envs.rollout.images import CodecError, ProcessedImage, VisionPreprocessor, image_digest
from vlm_envs.rollout.trajectory import Status, Trajectory, TurnRecord

__all__ = [
    "ChatCodec",
    "CodecError",
    "Encoded",
    "Engine",
    "EngineContractError",
    "EngineError",
    "EngineOutput",
    "EngineTimeout",
    "EpisodeConfig",
    "EpisodeExecutor",
    "EpisodeJob",
    "EpisodeWorkers",
    "ExecutorConfig",
    "InProcessEpisodes",
    "PermanentEngineError",
    "ProcessedImage",
    "ReplyContract",
    "SGLangEngine",
    "Status",
    "Trajectory",
    "TransientEngineError",
    "TurnRecord",
    "VLLMEngine",
    "VisionPreprocessor",
    "image_data_uri",
    "image_digest",
    "run_episode",
]
