"""Turning environments into training data: encoding, inference engines and the episode loop.

Needs the ``rollout`` extra (torch, transformers, aiohttp).
"""

from vlm_envs.rollout.codec import ChatCodec, Encoded
from vlm_envs.rollout.engines import (
    Engine,
    EngineContractError,
    EngineError,
    EngineOutput,
    EngineTimeout,
    PermanentEngineError,
    ReplyContract,
    SGLangEngine,
    TransientEngineError,
)
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.executors import EpisodeExecutor, ExecutorConfig, InProcessEpisodes
from vlm_envs.rollout.image_uris import image_data_uri
from vlm_envs.rollout.images import CodecError, ProcessedImage, VisionPreprocessor, image_digest
from vlm_envs.rollout.trajectory import Status, Trajectory, TurnRecord
from vlm_envs.rollout.vllm_engine import VLLMEngine
from vlm_envs.rollout.workers import EpisodeJob, EpisodeWorkers

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
