import numpy as np
import pytest
from PIL import Image

from vlm_envs.rollout.images import VisionPreprocessor
from vlm_envs.rollout.pixels import LookupPatchifier
from vlm_envs.testing import build_tiny_processor


@pytest.fixture(scope="module", params=["qwen2_vl", "qwen3_vl"])
def image_processor(request):
    return build_tiny_processor(request.param, min_pixels=56 * 56, max_pixels=28 * 28 * 1280).image_processor


def noise(seed: int, height: int, width: int, mode: str = "RGB") -> Image.Image:
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    return Image.fromarray(pixels).convert(mode)


@pytest.mark.parametrize(("rows", "cols"), [(2, 2), (2, 5), (7, 3), (12, 12)])
def test_lookup_equals_the_processor_bit_for_bit(image_processor, rows, cols):
    lookup = LookupPatchifier.for_processor(image_processor)
    assert lookup is not None
    factor = image_processor.patch_size * image_processor.merge_size
    image = noise(rows * 31 + cols, rows * factor, cols * factor)
    expected = image_processor(images=[image], return_tensors="np")["pixel_values"]
    assert np.array_equal(lookup(image), expected)


def test_without_rescale_or_normalize_the_table_follows(image_processor):
    plain = type(image_processor)(**{**image_processor.to_dict(), "do_normalize": False, "do_rescale": False})
    plain.size = image_processor.size
    lookup = LookupPatchifier.for_processor(plain)
    assert lookup is not None and lookup.table[0, 255] == 255.0


class Noisy:
    """A processor whose numbers are not a per-value function (it adds position noise)."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __call__(self, images, return_tensors):
        out = self.inner(images=images, return_tensors=return_tensors)
        out["pixel_values"] = out["pixel_values"] + np.arange(out["pixel_values"].shape[0])[:, None] * 1e-3
        return out


def test_a_processor_the_table_cannot_reproduce_gets_no_shortcut(image_processor):
    noisy = Noisy(image_processor)
    assert LookupPatchifier.for_processor(noisy) is None
    vision = VisionPreprocessor(noisy)
    assert vision.lookup is None
    item = vision.process(noise(1, 56, 84))
    assert float(item.pixel_values[1, 0] - item.pixel_values[0, 0]) != 0.0
