"""Images as a Qwen-VL processor sees them: target size, content keys, and a cache of processor outputs.

Resizing an image to the size the processor would pick (sides multiples of ``patch_size *
merge_size``, area within its min/max pixels) before anyone sees it means the engine, which runs
its own processor, and the trainer count the same image tokens; caching by content makes a
revisited frame (Sokoban revisits states often) cost one hash.
"""

from __future__ import annotations

import hashlib
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image

from vlm_envs.rollout.pixels import LookupPatchifier


class CodecError(ValueError):
    """A conversation, image, processor or template the codec cannot encode faithfully."""


class ProcessedImage:
    """One image as the model sees it: resized to the processor's grid, and its processor output.

    Where the processor's lookup table reproduces it (:class:`LookupPatchifier`), ``pixel_values``
    are made from the resized image on first use: an image that only goes to the engine, or to
    another process, costs no float rows (which are 8x its bytes), and a pickle carries only the
    image. The tensor is shared through the cache: treat it as read-only.
    """

    __slots__ = ("__weakref__", "_patchify", "_pixel_values", "grid_thw", "image", "key", "num_tokens")

    def __init__(
        self,
        image: Image.Image,
        grid_thw: tuple[int, int, int],
        num_tokens: int,
        key: str,
        *,
        pixel_values: torch.Tensor | None = None,
        patchify: LookupPatchifier | None = None,
    ) -> None:
        if pixel_values is None and patchify is None:
            raise ValueError("give pixel_values, or a patchify that makes them")
        self.image = image
        self.grid_thw = grid_thw
        self.num_tokens = num_tokens
        #: :func:`image_digest` of ``image`` (the resized one), e.g. for ``image_data_uri(image, key)``.
        self.key = key
        self._pixel_values = pixel_values
        self._patchify = patchify

    @property
    def pixel_values(self) -> torch.Tensor:
        """``(prod(grid_thw), channels * temporal * patch * patch)`` float rows, as the processor gives."""
        if self._pixel_values is None:  # two threads may both make them: equal results, no harm
            self._pixel_values = torch.from_numpy(self._patchify(self.image))  # type: ignore[misc]
        return self._pixel_values

    @property
    def row_length(self) -> int:
        """Floats per row of ``pixel_values``."""
        if self._patchify is not None:
            return self._patchify.row_length
        return int(self._pixel_values.shape[1])  # type: ignore[union-attr]

    @property
    def nbytes(self) -> int:
        """Bytes of ``pixel_values``, made or not."""
        return math.prod(self.grid_thw) * self.row_length * 4

    def write_pixel_values(self, out: np.ndarray) -> None:
        """Write ``pixel_values`` into ``out`` (float32, their shape) without keeping a copy here."""
        if self._pixel_values is None:
            self._patchify(self.image, out=out)  # type: ignore[misc]
        else:
            out[...] = self._pixel_values.numpy()

    def __getstate__(self) -> dict[str, Any]:
        state = {name: getattr(self, name) for name in self.__slots__ if name != "__weakref__"}
        if self._patchify is not None:
            state["_pixel_values"] = None  # made again on the other side: the image is 8x smaller
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def __repr__(self) -> str:
        return f"ProcessedImage(size={self.image.size}, grid_thw={self.grid_thw}, key={self.key[:12]!r})"


#: Memory for a tensor: ``nbytes`` as a writable byte array, or ``None`` for torch's own.
Allocator = Callable[[int], "np.ndarray | None"]


def stack_pixel_values(
    images: Sequence[ProcessedImage],
    placed: dict[int, np.ndarray] | None = None,
    memory: Allocator | None = None,
) -> torch.Tensor:
    """The images' ``pixel_values`` rows, concatenated in order, written once into one array.

    Rows made from a lookup table go straight to their place, and a repeated image is copied from
    its first place: no per-image arrays (on a virtual machine, fresh memory costs more in page
    faults than the arithmetic), and no ``torch.cat``, which would wake torch's intra-op threads
    to contend for the cores the rollout needs. ``placed`` (image id -> rows already written
    elsewhere) carries that across several stacks of overlapping images, and is updated. ``memory``
    gives the array to write into (an episode worker's shared memory, so that the rows are sent
    without a copy).
    """
    widths = {p.row_length for p in images}
    if len(widths) != 1:
        raise ValueError(f"images of different row lengths {sorted(widths)} cannot be stacked")
    rows = [math.prod(p.grid_thw) for p in images]
    shape = (sum(rows), widths.pop())
    given = None if memory is None else memory(math.prod(shape) * 4)
    if given is None:
        # torch's allocator, not numpy's: numpy asks for huge pages above 4 MB, and faulting those
        # in costs about 3x more here (8.6 ms vs 3.0 ms for 5 MB of fresh memory, measured on this VM)
        stacked = torch.empty(shape, dtype=torch.float32)
    else:
        stacked = torch.from_numpy(given.view(np.float32).reshape(shape))
    out = stacked.numpy()
    placed = {} if placed is None else placed
    start = 0
    for image, n in zip(images, rows, strict=True):
        here = out[start : start + n]
        if id(image) in placed:
            here[...] = placed[id(image)]
        else:
            image.write_pixel_values(here)
            placed[id(image)] = here
        start += n
    return stacked


def train_inputs_of(
    images: Sequence[ProcessedImage],
    placed: dict[int, np.ndarray] | None = None,
    memory: Allocator | None = None,
) -> dict[str, torch.Tensor]:
    """``{"pixel_values", "image_grid_thw"}`` of ``images`` in order, as a trainer takes them; ``{}``
    without images. ``placed``, ``memory``: see :func:`stack_pixel_values`."""
    if not images:
        return {}
    return {
        "pixel_values": stack_pixel_values(images, placed, memory),
        "image_grid_thw": torch.tensor([p.grid_thw for p in images], dtype=torch.long),
    }


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
        if item.nbytes > self.max_bytes:
            return
        with self._lock:
            self._insert(key, item)

    def _insert(self, key: str, item: ProcessedImage) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= old.nbytes
        self._items[key] = item
        self._alive[key] = item
        self._bytes += item.nbytes
        while self._bytes > self.max_bytes:
            _, evicted = self._items.popitem(last=False)
            self._bytes -= evicted.nbytes


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
        source_key = image_digest(image)
        cached = self._cache.get(source_key)
        if cached is not None:
            return cached
        rgb = image if image.mode == "RGB" else image.convert("RGB")
        size = self.target_size(*rgb.size)
        if rgb.size != size:
            rgb = rgb.resize(size, self._resample)
        key = source_key if rgb is image else image_digest(rgb)
        if self.lookup is not None:
            grid = (1, size[1] // self.patch_size, size[0] // self.patch_size)
            item = ProcessedImage(rgb, grid, self._num_tokens(grid), key, patchify=self.lookup)
        else:
            out = self.image_processor(images=[rgb], return_tensors="pt")
            grid = tuple(int(x) for x in out["image_grid_thw"][0])  # type: ignore[assignment]
            if grid[1] * self.patch_size != size[1] or grid[2] * self.patch_size != size[0]:
                raise CodecError(
                    f"processor grid {grid} does not match the target size {size} (patch {self.patch_size})"
                )
            item = ProcessedImage(rgb, grid, self._num_tokens(grid), key, pixel_values=out["pixel_values"])
        self._cache.put(source_key, item)
        return item

    def _num_tokens(self, grid: tuple[int, int, int]) -> int:
        return math.prod(grid) // self.merge_size**2

    @property
    def cache_stats(self) -> tuple[int, int]:
        """``(hits, misses)`` of the cache."""
        return self._cache.hits, self._cache.misses
