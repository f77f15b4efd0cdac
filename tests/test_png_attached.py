"""PNG bytes an env attaches to its image: sent as they are, until the image changes or dies."""

from __future__ import annotations

import gc
import weakref

import pytest
from PIL import Image, ImageDraw

from vlm_envs.imaging import attach_png, attached_png, encode_png, lossless_png, png_bytes, png_data_uri
from vlm_envs.imaging.decode import decode_png


def palette_frame() -> tuple[Image.Image, bytes]:
    """An RGB frame and the palette PNG of the same pixels (half the bytes of RGB)."""
    indices = Image.new("P", (8, 4), 0)
    indices.putpalette([10, 20, 30, 200, 100, 0])
    indices.paste(1, (2, 1, 6, 3))
    return indices.convert("RGB"), encode_png(indices)


def test_attached_bytes_go_out_as_they_are_on_every_path():
    frame, png = palette_frame()
    made = []
    attach_png(frame, lambda: made.append(1) or png)
    assert not made  # made on first need, once
    assert lossless_png(frame) is png and attached_png(frame) is png and made == [1]
    assert png_data_uri(frame).endswith(__import__("base64").b64encode(png).decode())
    assert decode_png(png).convert("RGB").tobytes() == frame.tobytes()
    assert png_bytes(frame) != png and decode_png(png_bytes(frame)).mode == "RGB"  # parquet: RGB only


@pytest.mark.parametrize(
    "change",
    [
        lambda im: im.paste((1, 2, 3), (0, 0, 2, 2)),
        lambda im: ImageDraw.Draw(im).line((0, 0, 7, 3), fill=(9, 9, 9)),
        lambda im: im.putpixel((0, 0), (255, 255, 255)),
        lambda im: im.putdata([(0, 0, 0)] * 32),
    ],
)
def test_a_changed_image_is_encoded_afresh(change):
    frame, png = palette_frame()
    attach_png(frame, png)
    change(frame)
    assert attached_png(frame) is None
    assert decode_png(lossless_png(frame)).tobytes() == frame.tobytes()


def test_a_palette_change_drops_a_palette_images_bytes():
    indices = Image.new("P", (4, 4), 1)
    indices.putpalette([0, 0, 0, 255, 0, 0])
    attach_png(indices, encode_png(indices))
    indices.putpalette([0, 0, 0, 0, 255, 0])
    assert attached_png(indices) is None and decode_png(lossless_png(indices)).getpixel((0, 0)) == 1
    assert decode_png(lossless_png(indices)).convert("RGB").getpixel((0, 0)) == (0, 255, 0)


def test_the_attachment_dies_with_its_image_and_a_copy_has_none():
    frame, png = palette_frame()

    class Maker:
        def __call__(self) -> bytes:
            return png

    maker = Maker()
    alive = weakref.ref(maker)
    attach_png(frame, maker)
    assert attached_png(frame.copy()) is None
    del frame, maker
    gc.collect()
    assert alive() is None


def test_an_image_keeps_the_bytes_it_was_first_given():
    frame, png = palette_frame()
    attach_png(frame, png)
    attach_png(frame, b"other")
    assert attached_png(frame) is png
