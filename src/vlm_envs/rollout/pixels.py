"""Qwen-VL ``pixel_values`` from a lookup table: the processor's own numbers, several times faster.

A Qwen2-VL-family image processor maps each uint8 channel value through rescale and normalize (the
same float operations for every pixel), then cuts the image into patches. Both steps depend only on
the value and the position, so :class:`LookupPatchifier` runs the processor's own ``rescale`` and
``normalize`` once on all 256 values per channel, and later only indexes the table and reorders.
It is trusted only after it reproduces the processor bit for bit on probe images.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image


class LookupPatchifier:
    """``pixel_values`` rows of an RGB image already resized to a multiple of ``patch * merge``."""

    def __init__(self, table: np.ndarray, patch_size: int, merge_size: int, temporal_patch_size: int) -> None:
        self.table = table  # (3, 256) float32
        self.patch_size = patch_size
        self.merge_size = merge_size
        self.temporal_patch_size = temporal_patch_size

    @classmethod
    def for_processor(cls, image_processor: Any) -> LookupPatchifier | None:
        """A patchifier equal to ``image_processor`` on probe images, or ``None`` if it cannot be one."""
        try:
            patch, merge = int(image_processor.patch_size), int(image_processor.merge_size)
            temporal = int(image_processor.temporal_patch_size)
            values = np.tile(np.arange(256, dtype=np.uint8), (3, 1, 1))  # channel-first, 1 x 256 pixels
            if image_processor.do_rescale:
                values = image_processor.rescale(values, image_processor.rescale_factor)
            if image_processor.do_normalize:
                values = image_processor.normalize(
                    values, image_processor.image_mean, image_processor.image_std
                )
            table = np.ascontiguousarray(np.asarray(values, dtype=np.float32).reshape(3, 256))
        except (AttributeError, TypeError, ValueError):
            return None
        candidate = cls(table, patch, merge, temporal)
        return candidate if candidate._matches(image_processor) else None

    def _matches(self, image_processor: Any) -> bool:
        factor = self.patch_size * self.merge_size
        rng = np.random.default_rng(0)
        for rows, cols in ((2, 3), (4, 2)):
            pixels = rng.integers(0, 256, (rows * factor, cols * factor, 3), dtype=np.uint8)
            probe = Image.fromarray(pixels)
            try:
                expected = image_processor(images=[probe], return_tensors="np")["pixel_values"]
            except Exception:  # a processor that cannot run on the probe gets no shortcut
                return False
            ours = self(probe)
            if ours.shape != expected.shape or not np.array_equal(ours, expected):
                return False
        return True

    @property
    def row_length(self) -> int:
        """Floats per row: channels * temporal * patch * patch."""
        return 3 * self.temporal_patch_size * self.patch_size**2

    def __call__(self, image: Image.Image, out: np.ndarray | None = None) -> np.ndarray:
        """``(grid_h * grid_w, 3 * temporal * patch * patch)`` float32 rows, in the processor's order.

        With ``out`` (a C-contiguous float32 array of that shape) the rows are written there.
        """
        pixels = np.asarray(image.convert("RGB") if image.mode != "RGB" else image)
        height, width, _ = pixels.shape
        p, m, t = self.patch_size, self.merge_size, self.temporal_patch_size
        grid_h, grid_w = height // p, width // p
        chw = np.stack([self.table[c][pixels[:, :, c]] for c in range(3)])
        patches = chw.reshape(3, grid_h // m, m, p, grid_w // m, m, p).transpose(1, 4, 2, 5, 0, 3, 6)
        patches = np.broadcast_to(patches[:, :, :, :, :, None], (*patches.shape[:5], t, p, p))
        if out is None:
            return patches.reshape(grid_h * grid_w, 3 * t * p * p)
        np.copyto(out.reshape(patches.shape), patches)
        return out
