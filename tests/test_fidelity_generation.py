"""ImageFidelityCheck on transformers' own ``generate`` (the tiny Qwen-VL models): the prefill is checked on
what it carries, raw pixels (transformers 5.10.4) or the features ``generate`` encoded first
(``mm_encoder_outputs``, transformers 5.24.0), never a false alarm; a pre-encoded image missing or out of
place is named; a chunked prefill is passed over, and said so, where it cuts images apart."""

from __future__ import annotations

import copy
import inspect
import logging
from typing import Any

import pytest
import torch
from PIL import Image
from transformers.modeling_outputs import BaseModelOutputWithPooling

from vlm_envs.fidelity import ENCODED, PIXELS, ImageFidelityCheck, ImageFidelityError, encoded_image_rows
from vlm_envs.testing import build_tiny_processor, build_tiny_qwen2_vl, build_tiny_qwen3_vl

MODELS = {"qwen2_vl": build_tiny_qwen2_vl, "qwen3_vl": build_tiny_qwen3_vl}
LATER_CHUNK = "pre-encoded features of a later prefill chunk"
SEVERAL_IN_ONE = f"{ENCODED} of several images in one tensor (a chunked prefill)"

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny(family: str) -> tuple[Any, Any]:
    processor = build_tiny_processor(family)
    processor.tokenizer.padding_side = "left"  # as generate wants a batch
    return processor, MODELS[family](processor).eval()


def pre_encodes(model: Any) -> bool:
    """Whether this transformers' forward takes the features generate encodes before the prefill."""
    return "mm_encoder_outputs" in inspect.signature(model.forward).parameters


def prompts(processor: Any, samples: int = 2) -> Any:
    """Sample 0: two user turns, an image of 4 pads then one of 6; sample 1: one turn, an image of 6."""
    square, wide, tall = (
        Image.new("RGB", size, c) for size, c in [((64, 64), "red"), ((96, 64), "blue"), ((64, 96), "green")]
    )
    two_turns = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Which colour?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "red"}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "And now?"}]},
    ]
    one_turn = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Colour?"}]}]
    texts = [
        processor.apply_chat_template(m, add_generation_prompt=True, tokenize=False)
        for m in (two_turns, one_turn)
    ]
    images = [[square, wide], [tall]]
    return processor(text=texts[:samples], images=images[:samples], return_tensors="pt", padding=True)


@pytest.mark.parametrize("family", list(MODELS))
def test_generate_is_checked_on_what_its_prefill_carries(family: str) -> None:
    processor, model = tiny(family)
    check = ImageFidelityCheck(model, processor, raise_on_error=True, expect_image_each_turn=True)
    torch.manual_seed(0)
    with torch.no_grad():
        model.generate(**prompts(processor), max_new_tokens=3, do_sample=True, num_return_sequences=2)
    (prefill,) = check.reports  # the decoding steps are cached: not checked
    assert (prefill.samples, prefill.images, prefill.problems, prefill.skipped) == (4, 6, [], None)
    assert prefill.source == (ENCODED if pre_encodes(model) else PIXELS)


@pytest.mark.parametrize("family", list(MODELS))
def test_a_pre_encoded_image_missing_or_out_of_place_is_named(family: str) -> None:
    processor, model = tiny(family)
    if not pre_encodes(model):
        pytest.skip("this transformers' forward takes raw pixels only (5.24's takes mm_encoder_outputs)")
    inputs = prompts(processor)
    pixel_values = inputs.pop("pixel_values")
    with torch.no_grad():
        encoded = model.get_image_features(pixel_values, inputs["image_grid_thw"], return_dict=True)

    def forward(order: list[int]) -> None:
        """The model's forward with the encoded images in ``order`` (what generate's prefill gets)."""
        features = copy.copy(encoded)
        features.pooler_output = [encoded.pooler_output[i] for i in order]
        if getattr(encoded, "deepstack_features", None) is not None:  # Qwen3-VL: per layer, per image
            features.deepstack_features = [[layer[i] for i in order] for layer in encoded.deepstack_features]
        with torch.no_grad():
            model(**inputs, mm_encoder_outputs={"image": features})

    check = ImageFidelityCheck(model, processor, raise_on_error=True)
    forward([0, 1, 2])
    assert [(r.source, r.images, r.problems) for r in check.reports] == [(ENCODED, 3, [])]
    with pytest.raises(ImageFidelityError, match=r"sample 1, turn 1: 6 image pad tokens but no image left"):
        forward([0, 1])
    swapped = (
        r"sample 0, turn 1: 4 image pad tokens, its image \(6 pre-encoded feature rows\) needs 6; "
        r"sample 0, turn 2: 6 image pad tokens, its image \(4 pre-encoded feature rows\) needs 4$"
    )
    with pytest.raises(ImageFidelityError, match=swapped):
        forward([1, 0, 2])
    check.remove()
    forward([1, 0, 2])  # the model's own check counts pads in all: the images out of place go through


@pytest.mark.parametrize("cut", ["inside an image", "inside a turn, before its image"])
def test_a_chunked_prefill_is_passed_over_where_it_cuts_images_apart(
    cut: str, caplog: pytest.LogCaptureFixture
) -> None:
    processor, model = tiny("qwen2_vl")
    if not pre_encodes(model):
        pytest.skip("this transformers' generate passes raw pixels, which a chunked prefill cannot split")
    inputs = prompts(processor, samples=1)
    pads = (inputs["input_ids"][0] == model.config.image_token_id).nonzero()[:, 0].tolist()
    second = pads[4]  # where turn 2's image starts (the first image has 4 pads)
    chunk = second + 2 if cut == "inside an image" else second - 1
    check = ImageFidelityCheck(model, processor, raise_on_error=True, expect_image_each_turn=True)
    with caplog.at_level(logging.WARNING), torch.no_grad():
        for _ in range(2):
            model.generate(**inputs, max_new_tokens=2, do_sample=False, prefill_chunk_size=chunk)
    first = (0, SEVERAL_IN_ONE) if cut == "inside an image" else (1, None)  # 1: turn 2 is not finished
    assert [(r.images, r.skipped) for r in check.reports] == [first, (0, LATER_CHUNK)] * 2
    assert not check.problems
    said = [r.getMessage() for r in caplog.records if r.name == "vlm_envs.fidelity"]
    assert said == [
        f"image fidelity: forwards passed over unchecked: {r}" for _, r in [first, (0, LATER_CHUNK)] if r
    ]


class Sink(torch.nn.Module):
    """A forward that takes any keywords (the check only reads them)."""

    def forward(self, **kwargs: Any) -> None:
        return None


def test_pre_encoded_features_not_split_per_image_are_passed_over() -> None:
    processor, sink = build_tiny_processor(), Sink()
    check = ImageFidelityCheck(sink, processor, raise_on_error=True)
    ids = prompts(processor)["input_ids"]
    stacked = BaseModelOutputWithPooling(pooler_output=torch.zeros(16, 8))  # one tensor for every image
    sink(input_ids=ids, mm_encoder_outputs={"image": stacked})
    ((skipped),) = check.reports
    assert skipped.skipped == f"{ENCODED} not split per image" and not skipped.problems
    with pytest.raises(
        ImageFidelityError, match=r"^image fidelity: sample 0, turn 1: 4 image pad tokens but no"
    ):
        sink(input_ids=ids, mm_encoder_outputs={})  # generate's prefill where the images were left out
    assert encoded_image_rows({"image": BaseModelOutputWithPooling(pooler_output=(torch.zeros(4, 8),))}) == [
        4
    ]
