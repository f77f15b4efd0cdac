"""Images as a Qwen-VL processor sees them: target size, content keys, and a cache of processor outputs.

Resizing an image to the size the processor would pick (sides multiples of ``patch_size *
merge_size``, area within its min/max pixels) before anyone sees it means the engine, which runs
its own processor, and the trainer count the same image tokens; caching by content makes a
revisited frame (Sokoban revisits states often) cost one hash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch
from PIL import Image

from vlm_envs.rollout.pixels import LookupPatchifier


class CodecError(ValueError):
    """A conversation, image, processor or template the codec cannot encode faithfully."""


@dataclasses.dataclass(frozen=True)
class ProcessedImage:
    """One image as the model sees it: resized to the processor's grid, and its processor output.

    The tensors are shared through the cache: treat them as read-only.
    """

    image: Image.Image
    pixel_values: torch.Tensor
    grid_thw: tuple[int, int, int]
    num_tokens: int
    #: :func:`image_digest` of ``image`` (the resized one), e.g. for ``image_data_uri(image, key)``.
    key: str


def image_digest(image: Image.Image) -> str:
    """A content key for an image: same mode, size and pixels give the same key in any process."""
    h = hashlib.sha1(usedforsecurity=False)  # the fastest hashlib digest here; a content key, not security
    h.update(f"{image.mode}:{image.size[0]}x{image.size[1]}:".encode())
    h.update(image.tobytes())
    return h.hexdigest()


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """The Qwen-VL target ``(height, width)``: both sides multiples of ``factor``, area within the
    pixel limits, aspect ratio kept as well as possible (the rule of the Qwen2-VL image processor)."""
    if min(height, width) <= 0 or max(height, width) / min(height, width) > 200:
        raise CodecError(
            f"image of {width}x{height} pixels: sides must be positive, aspect ratio at most 200"
        )
    h = round(height / factor) * factor
    w = round(width / factor) * factor
    if h * w > max_pixels:
        scale = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / scale / factor) * factor)
        w = max(factor, math.floor(width / scale / factor) * factor)
    elif h * w < min_pixels:
        scale = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * scale / factor) * factor
        w = math.ceil(width * scale / factor) * factor
    return h, w


class _ByteLRU:
    """A thread-safe LRU of processed images, bounded by the bytes of their pixel values.

    Evicted entries stay findable while anything else holds them (a running episode's trajectory
    does): they cost no memory of the cache's, and finding them spares the processor.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, ProcessedImage] = OrderedDict()
        self._alive: weakref.WeakValueDictionary[str, ProcessedImage] = weakref.WeakValueDictionary()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> ProcessedImage | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                item = self._alive.get(key)
                if item is None:
                    self.misses += 1
                    return None
                self._insert(key, item)
            self.hits += 1
            self._items.move_to_end(key)
            return item

    def put(self, key: str, item: ProcessedImage) -> None:
        size = item.pixel_values.nbytes
        if size > self.max_bytes:
            return
        with self._lock:
            self._insert(key, item)

    def _insert(self, key: str, item: ProcessedImage) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= old.pixel_values.nbytes
        self._items[key] = item
        self._alive[key] = item
        self._bytes += item.pixel_values.nbytes
        while self._bytes > self.max_bytes:
            _, evicted = self._items.popitem(last=False)
            self._bytes -= evicted.pixel_values.nbytes


class VisionPreprocessor:
    """Resizes images the way a Qwen-VL image processor will, runs it, and caches the results.

    ``image_processor`` needs ``patch_size``, ``merge_size`` and min/max pixels (``size`` with
    ``shortest_edge``/``longest_edge``, or ``min_pixels``/``max_pixels``), and must return
    ``pixel_values`` and ``image_grid_thw``. The cache holds up to ``cache_bytes`` of pixel values.
    """

    def __init__(self, image_processor: Any, cache_bytes: int = 256 << 20) -> None:
        self.image_processor = image_processor
        try:
            self.patch_size = int(image_processor.patch_size)
            self.merge_size = int(image_processor.merge_size)
        except (AttributeError, TypeError) as err:
            raise CodecError("the image processor has no patch_size/merge_size (not a Qwen-VL one)") from err
        size = image_processor.size
        get = size.get if isinstance(size, Mapping) else lambda k: getattr(size, k, None)
        self.min_pixels = int(get("shortest_edge") or getattr(image_processor, "min_pixels", 0) or 0)
        self.max_pixels = int(get("longest_edge") or getattr(image_processor, "max_pixels", 0) or 0)
        if not self.min_pixels or not self.max_pixels:
            raise CodecError(f"the image processor's size {size!r} names no min/max pixels")
        self._resample = Image.Resampling(int(getattr(image_processor, "resample", Image.Resampling.BICUBIC)))
        self._cache = _ByteLRU(cache_bytes)
        #: The processor's numbers without the processor, where a probe shows them identical.
        self.lookup = LookupPatchifier.for_processor(image_processor)

    def target_size(self, width: int, height: int) -> tuple[int, int]:
        """``(width, height)`` the processor resizes an image of this size to."""
        factor = self.patch_size * self.merge_size
        h, w = smart_resize(height, width, factor, self.min_pixels, self.max_pixels)
        return w, h

    def process(self, image: Image.Image) -> ProcessedImage:
        """``image`` resized to its target size and run through the processor; cached by content."""
        key = image_digest(image)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        rgb = image if image.mode == "RGB" else image.convert("RGB")
        size = self.target_size(*rgb.size)
        if rgb.size != size:
            rgb = rgb.resize(size, self._resample)
        if self.lookup is not None:
            pixel_values = torch.from_numpy(self.lookup(rgb))
            grid = (1, size[1] // self.patch_size, size[0] // self.patch_size)
        else:
            out = self.image_processor(images=[rgb], return_tensors="pt")
            pixel_values, grid = out["pixel_values"], tuple(int(x) for x in out["image_grid_thw"][0])
        if grid[1] * self.patch_size != size[1] or grid[2] * self.patch_size != size[0]:
            raise CodecError(
                f"processor grid {grid} does not match the target size {size} (patch {self.patch_size})"
            )
        item = ProcessedImage(
            image=rgb,
            pixel_values=pixel_values,
            grid_thw=grid,  # type: ignore[arg-type]
            num_tokens=math.prod(grid) // self.merge_size**2,
            key=key if rgb is image else image_digest(rgb),
        )
        self._cache.put(key, item)
        return item

    @property
    def cache_stats(self) -> tuple[int, int]:
        """``(hits, misses)`` of the cache."""
        return self._cache.hits, self._cache.misses
