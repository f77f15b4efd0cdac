"""``vlm_envs.rollout.trl.load_processor``: what the TRL GRPO script of docs/trl.md loads its processor
with, from the documented install (no torchvision here): a saved Qwen-VL folder gives a processor
that encodes images and text, padding on the left; TRL trains with it (tests/test_readme.py runs the
script)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("trl")

from PIL import Image

from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.trl import load_processor
from vlm_envs.testing.models import save_tiny_model


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl"])
def test_a_saved_qwen_vl_folder_loads_with_its_image_processor(family: str, tmp_path: Path) -> None:
    folder = save_tiny_model(tmp_path / family, family)
    processor = load_processor(str(folder))
    assert processor.tokenizer.padding_side == "left"
    assert load_processor(str(folder), padding_side="right").tokenizer.padding_side == "right"
    if importlib.util.find_spec("torchvision") is None:  # the documented install: no video processor
        assert getattr(processor, "video_processor", None) is None
    codec = ChatCodec(processor)
    image = Image.new("RGB", (64, 64), (200, 30, 30))
    message = {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "hi"}]}
    encoded = codec.encode_prompt([message], [image])
    (seen,) = encoded.images
    pads = seen.grid_thw[0] * seen.grid_thw[1] * seen.grid_thw[2] // 4
    assert encoded.ids.count(codec.image_token_id) == pads > 0
