"""Turning environments into training data: encoding, inference engines and the episode loop.

Needs the ``rollout`` extra (torch, transformers, aiohttp).
"""

from vlm_envs.rollout.codec import ChatCodec, CodecError, Encoded, ProcessedImage
from vlm_envs.rollout.engines import (
    Engine,
    EngineError,
    EngineOutput,
    EngineTimeout,
    PermanentEngineError,
    SGLangEngine,
    TransientEngineError,
    image_data_uri,
)

__all__ = [
    "ChatCodec",
    "CodecError",
    "Encoded",
    "Engine",
    "EngineError",
    "EngineOutput",
    "EngineTimeout",
    "PermanentEngineError",
    "ProcessedImage",
    "SGLangEngine",
    "TransientEngineError",
    "image_data_uri",
]
