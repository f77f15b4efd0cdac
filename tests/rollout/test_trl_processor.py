"""``vlm_envs.rollout.trl.load_processor``: what the TRL GRPO script of docs/trl.md loads its processor
with, from the documented install (no torchvision here): a saved Qwen-VL folder gives a processor
that encodes images and text, padding on the left; TRL trains with it (tests/test_readme.py runs the
script)."""

from __future__ import annotations

import importlib.util
import json
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


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl"])
def test_the_processor_saves_as_transformers_lays_out_a_folder_and_loads_back_the_same(
    family: str, tmp_path: Path
) -> None:
    """SFTTrainer's ``save_model`` ends with ``processing_class.save_pretrained``: it must work without
    a video processor, keep the video processor's config, and load back encoding alike."""
    from transformers.image_processing_base import ImageProcessingMixin
    from transformers.video_processing_utils import BaseVideoProcessor

    processor = load_processor(str(save_tiny_model(tmp_path / "model", family)))
    processor.chat_template += "{# edited #}"  # the processor's own template is the one saved
    (written,) = processor.save_pretrained(tmp_path / "saved")
    assert Path(written) == tmp_path / "saved" / "processor_config.json"
    again = load_processor(str(tmp_path / "saved"))
    assert (
        type(again).__name__
        == type(processor).__name__
        == ("Qwen2VLProcessor", "Qwen3VLProcessor")[family == "qwen3_vl"]
    )
    assert again.chat_template == processor.chat_template
    # the layout transformers 5 reads: image and video processor configs nested in processor_config.json
    image, _ = ImageProcessingMixin.get_image_processor_dict(tmp_path / "saved")
    assert image == json.loads(processor.image_processor.to_json_string())
    video, _ = BaseVideoProcessor.get_video_processor_dict(tmp_path / "saved")
    assert (
        video["video_processor_type"]
        == ("Qwen2VLVideoProcessor", "Qwen3VLVideoProcessor")[family == "qwen3_vl"]
    )
    assert again.video_processor_config == video
    message = {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "hi"}]}
    text = processor.apply_chat_template([message], add_generation_prompt=True, tokenize=False)
    image = Image.new("RGB", (64, 48), (10, 200, 30))
    before = processor(text=[text], images=[image], return_tensors="pt")
    after = again(text=[text], images=[image], return_tensors="pt")
    assert before.keys() == after.keys() and all(bool((before[k] == after[k]).all()) for k in before)
