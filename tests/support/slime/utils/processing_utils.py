"""Stand-in for ``slime.utils.processing_utils.build_processor_kwargs``: the keyword arguments slime
adds to its processor call on a sample (``processor(text=sample.prompt, **build_processor_kwargs(
sample.multimodal_inputs))``): token ids as plain lists, image/video/audio outputs as torch tensors.
"""

from __future__ import annotations

from typing import Any

_MODALITY_KWARGS = ("audio_kwargs", "images_kwargs", "videos_kwargs")


def build_processor_kwargs(multimodal_inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    result = dict(multimodal_inputs or {})
    result["text_kwargs"] = {
        **result.get("text_kwargs", {}),
        "return_tensors": None,
        "return_mm_token_type_ids": False,
    }
    for key in _MODALITY_KWARGS:
        result[key] = {**result.get(key, {}), "return_tensors": "pt"}
    return result
