"""Tiny offline Qwen-VL processors and randomly initialised models for tests and benchmarks.

transformers needs torchvision to assemble a Qwen-VL processor (its video processor), and there is
no CPU torchvision build here (FACTS.md). The way around chosen here: use the PIL image processor
class directly (``Qwen2VLImageProcessorPil``, the same resizing and patching as the default backend)
and assemble the real ``Qwen2VLProcessor`` / ``Qwen3VLProcessor`` with ``video_processor=None``
through a subclass that skips the class check for that one missing part. Images and text work;
videos do not. Every process builds the same objects; :func:`save_tiny_processor` writes a folder
that ``--tokenizer DIR`` loads as the same processor.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerFast
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.qwen2_vl.processing_qwen2_vl import Qwen2VLProcessor
from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor

from vlm_envs.rollout.processors import IMAGE_PROCESSOR_FILE, PROCESSOR_FILE, NoVideoCheck
from vlm_envs.testing.templates import QWEN2_VL_TEMPLATE, QWEN3_VL_TEMPLATE
from vlm_envs.testing.tokenizer import build_tiny_tokenizer

# Small pixel limits keep the test images to a few dozen image tokens.
TINY_MIN_PIXELS = 28 * 28 * 4
TINY_MAX_PIXELS = 28 * 28 * 64

_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


class TinyQwen2VLProcessor(NoVideoCheck, Qwen2VLProcessor):
    """``Qwen2VLProcessor`` without a video processor."""


class TinyQwen3VLProcessor(NoVideoCheck, Qwen3VLProcessor):
    """``Qwen3VLProcessor`` without a video processor."""


def build_tiny_processor(
    family: str = "qwen2_vl", min_pixels: int = TINY_MIN_PIXELS, max_pixels: int = TINY_MAX_PIXELS
) -> Qwen2VLProcessor | Qwen3VLProcessor:
    """A real Qwen-VL processor with the tiny tokenizer.

    ``family`` is ``"qwen2_vl"`` (patch 14, CLIP normalisation, Qwen2-VL template) or ``"qwen3_vl"``
    (patch 16, 0.5 normalisation, Qwen3-VL template); both merge 2x2 patches into one image token.
    """
    if family == "qwen2_vl":
        template, patch, mean, std, cls = QWEN2_VL_TEMPLATE, 14, _CLIP_MEAN, _CLIP_STD, TinyQwen2VLProcessor
    elif family == "qwen3_vl":
        template, patch, mean, std, cls = QWEN3_VL_TEMPLATE, 16, (0.5,) * 3, (0.5,) * 3, TinyQwen3VLProcessor
    else:
        raise ValueError(f"unknown family {family!r}: use 'qwen2_vl' or 'qwen3_vl'")
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=patch,
        merge_size=2,
        temporal_patch_size=2,
        image_mean=list(mean),
        image_std=list(std),
        size={"shortest_edge": min_pixels, "longest_edge": max_pixels},
    )
    tokenizer = build_tiny_tokenizer(chat_template=template)
    return cls(
        image_processor=image_processor, tokenizer=tokenizer, video_processor=None, chat_template=template
    )


def save_tiny_processor(
    path: str | Path,
    family: str = "qwen2_vl",
    min_pixels: int = TINY_MIN_PIXELS,
    max_pixels: int = TINY_MAX_PIXELS,
) -> Path:
    """Save :func:`build_tiny_processor` to folder ``path`` for ``vlm-envs eval --tokenizer DIR``.

    The parts are saved one by one, in the layout of the hub's Qwen-VL folders (``save_pretrained``
    nests the image processor in ``processor_config.json`` instead): the tokenizer (with its chat
    template), the image processor and a ``processor_config.json`` naming the processor class.
    :func:`vlm_envs.rollout.processors.load_processor` loads the folder offline, without torchvision, as
    the same processor. Returns the folder.
    """
    processor = build_tiny_processor(family, min_pixels, max_pixels)
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    processor.tokenizer.save_pretrained(folder)
    processor.image_processor.save_pretrained(folder)
    base = next(c for c in type(processor).__mro__ if c.__module__.startswith("transformers."))
    (folder / PROCESSOR_FILE).write_text(json.dumps({"processor_class": base.__name__}, indent=2) + "\n")
    return folder


def _special_ids(tokenizer: PreTrainedTokenizerFast) -> dict[str, int]:
    ids = tokenizer.convert_tokens_to_ids
    return {
        "image_token_id": ids("<|image_pad|>"),
        "video_token_id": ids("<|video_pad|>"),
        "vision_start_token_id": ids("<|vision_start|>"),
        "vision_end_token_id": ids("<|vision_end|>"),
    }


@dataclasses.dataclass(frozen=True)
class TinySize:
    """Dimensions of a tiny model (defaults: about 0.2 M parameters, 20 tokens in ~40 ms on CPU).

    ``head_dim`` sets the attention heads of the language model (``hidden // head_dim`` of them).
    vLLM's CPU attention needs ``head_dim >= 32`` (FACTS.md): use ``TinySize(head_dim=32)`` for a
    model an engine serves.
    """

    hidden: int = 64
    layers: int = 2
    head_dim: int = 16
    vision_dim: int = 32
    vision_depth: int = 1

    def __post_init__(self) -> None:
        if self.head_dim < 8 or self.head_dim % 8 or self.hidden % self.head_dim:
            raise ValueError(
                f"head_dim must be a multiple of 8 dividing hidden={self.hidden}, got {self.head_dim}"
            )

    @property
    def heads(self) -> int:
        """Attention heads of the language model."""
        return self.hidden // self.head_dim

    def mrope_section(self) -> list[int]:
        """Qwen2-VL's M-RoPE split of ``head_dim // 2`` rotary pairs over time, height and width."""
        time = self.head_dim // 8
        return [time, (self.head_dim // 2 - time) // 2, (self.head_dim // 2 - time) // 2]


def _text_config(tokenizer: PreTrainedTokenizerFast, size: TinySize, **extra: Any) -> dict[str, Any]:
    """The language model part both tiny models share; ``extra`` adds family-specific keys."""
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": size.hidden,
        "intermediate_size": size.hidden * 2,
        "num_hidden_layers": size.layers,
        "num_attention_heads": size.heads,
        "num_key_value_heads": size.heads,
        "max_position_embeddings": 4096,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        **extra,
    }


def build_tiny_qwen2_vl(
    processor: Qwen2VLProcessor, seed: int = 0, size: TinySize = TinySize()
) -> torch.nn.Module:
    """A randomly initialised ``Qwen2VLForConditionalGeneration`` matching ``processor``'s vocabulary."""
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    tokenizer = processor.tokenizer
    config = Qwen2VLConfig(
        text_config=_text_config(
            tokenizer,
            size,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": size.mrope_section(),
            },
            bos_token_id=tokenizer.pad_token_id,
        ),
        vision_config={
            "depth": size.vision_depth,
            "embed_dim": size.vision_dim,
            "hidden_size": size.hidden,
            "num_heads": 2,
            "patch_size": processor.image_processor.patch_size,
            "spatial_merge_size": processor.image_processor.merge_size,
            "temporal_patch_size": processor.image_processor.temporal_patch_size,
        },
        **_special_ids(tokenizer),
    )
    torch.manual_seed(seed)
    return Qwen2VLForConditionalGeneration(config).eval()


def build_tiny_qwen3_vl(
    processor: Qwen3VLProcessor, seed: int = 0, size: TinySize = TinySize()
) -> torch.nn.Module:
    """A randomly initialised ``Qwen3VLForConditionalGeneration`` (patch 16) matching ``processor``."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    tokenizer = processor.tokenizer
    head_dim = size.head_dim
    config = Qwen3VLConfig(
        text_config=_text_config(
            tokenizer,
            size,
            head_dim=head_dim,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": [
                    head_dim // 4,
                    head_dim // 8 + head_dim // 16,
                    head_dim // 8 + head_dim // 16,
                ],
                "mrope_interleaved": True,
            },
        ),
        vision_config={
            "depth": size.vision_depth,
            "hidden_size": size.vision_dim,
            "intermediate_size": size.vision_dim * 2,
            "num_heads": 2,
            "out_hidden_size": size.hidden,
            "num_position_embeddings": 64,
            "deepstack_visual_indexes": [0],
            "patch_size": processor.image_processor.patch_size,
            "spatial_merge_size": processor.image_processor.merge_size,
            "temporal_patch_size": processor.image_processor.temporal_patch_size,
        },
        **_special_ids(tokenizer),
    )
    torch.manual_seed(seed)
    return Qwen3VLForConditionalGeneration(config).eval()


#: The video processor config a Qwen-VL folder needs for engines that build the full processor
#: (vLLM loads it through ``AutoProcessor``); the image processor's settings under the video class.
VIDEO_PROCESSOR_FILE = "video_preprocessor_config.json"
_VIDEO_CLASSES = {"qwen2_vl": "Qwen2VLVideoProcessor", "qwen3_vl": "Qwen3VLVideoProcessor"}


def save_tiny_model(
    path: str | Path, family: str = "qwen2_vl", size: TinySize = TinySize(head_dim=32), seed: int = 0
) -> Path:
    """Save a tiny model with its processor to folder ``path``, loadable offline by any engine.

    The folder holds the weights and config (``save_pretrained``), everything
    :func:`save_tiny_processor` writes, and a video processor config, so transformers,
    ``--tokenizer DIR`` and vLLM (which needs ``head_dim >= 32`` on the CPU, hence the default
    ``size``) load the same model. Same arguments, same weights. Returns the folder.
    """
    if family not in _VIDEO_CLASSES:
        raise ValueError(f"unknown family {family!r}: use 'qwen2_vl' or 'qwen3_vl'")
    folder = save_tiny_processor(path, family)
    processor = build_tiny_processor(family)
    build = build_tiny_qwen2_vl if family == "qwen2_vl" else build_tiny_qwen3_vl
    build(processor, seed=seed, size=size).save_pretrained(folder)
    image_config = json.loads((folder / IMAGE_PROCESSOR_FILE).read_text())
    video_config = {**image_config, "video_processor_type": _VIDEO_CLASSES[family]}
    video_config.pop("image_processor_type", None)
    (folder / VIDEO_PROCESSOR_FILE).write_text(json.dumps(video_config, indent=2) + "\n")
    return folder
