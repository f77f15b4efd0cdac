"""Sokoban frames: a tile atlas drawn once, a cached static background, frames cached by state.

Tiles are drawn in a fixed 12-colour palette without anti-aliasing, so a frame is also a palette
image: its PNG is written directly from packed 4-bit rows (8-bit for odd cell sizes) of the cached
background with the moving tiles copied in (:func:`vlm_envs.imaging.png.encode_indexed`); it decodes
to exactly the RGB frame, at a fraction of the cost and bytes of encoding RGB. Each frame carries its
PNG (:func:`vlm_envs.imaging.attach_png`, made on first need), so whoever ships the frame sends these
bytes. Frames, PNG bytes and data URIs are kept in process-wide caches bounded in bytes, keyed by
(layout, cell size, state); cached frames are shared and read-only.
"""

from __future__ import annotations

import base64
import functools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from vlm_envs.envs.sokoban.board import (
    BOX,
    BOX_ON_TARGET,
    FLOOR,
    PLAYER,
    PLAYER_ON_TARGET,
    TARGET,
    WALL,
    Layout,
    State,
)
from vlm_envs.imaging import attach_png
from vlm_envs.imaging.png import encode_indexed

#: Qwen2.5-VL's merged patch: 14 px patches x merge size 2 (Qwen3-VL: 16 x 2 = 32).
DEFAULT_CELL_SIZE = 28

_PALETTE = [
    (236, 228, 206),  # 0 floor
    (214, 204, 178),  # 1 floor seam
    (96, 64, 52),  # 2 wall
    (150, 116, 96),  # 3 mortar
    (214, 38, 38),  # 4 target red
    (214, 140, 60),  # 5 box
    (118, 68, 22),  # 6 box edge
    (64, 178, 72),  # 7 box on target
    (18, 92, 30),  # 8 box on target edge
    (44, 96, 226),  # 9 player
    (16, 30, 96),  # 10 player outline
    (250, 250, 250),  # 11 eyes
]
FLOOR_C, SEAM, WALL_C, MORTAR, RED, BOX_C, BOX_EDGE, DONE_C, DONE_EDGE, BLUE, NAVY, WHITE = range(12)
_FLAT_PALETTE = [v for rgb in _PALETTE for v in rgb]
_PLTE = bytes(_FLAT_PALETTE)


def _packed(indices: np.ndarray, bits: int) -> np.ndarray:
    """Palette indices (H, W) packed at ``bits`` (4 or 8) per pixel, as PNG rows hold them."""
    return (indices[:, 0::2] << 4) | indices[:, 1::2] if bits == 4 else indices


def _new_image(width: int, height: int, fill: int) -> Image.Image:
    im = Image.new("P", (width, height), fill)
    im.putpalette(_FLAT_PALETTE)
    return im


def _floor(draw: ImageDraw.ImageDraw, cs: int) -> None:
    draw.line([(0, cs - 1), (cs - 1, cs - 1)], fill=SEAM)
    draw.line([(cs - 1, 0), (cs - 1, cs - 1)], fill=SEAM)


def _target(draw: ImageDraw.ImageDraw, cs: int) -> None:
    pad, width = cs // 6, max(2, cs // 12)
    draw.ellipse([pad, pad, cs - 1 - pad, cs - 1 - pad], outline=RED, width=width)
    dot = max(2, cs // 10)
    draw.rectangle([cs // 2 - dot, cs // 2 - dot, cs // 2 + dot - 1, cs // 2 + dot - 1], fill=RED)


def _crate(draw: ImageDraw.ImageDraw, cs: int, fill: int, edge: int) -> None:
    pad, width = max(1, cs // 10), max(2, cs // 12)
    draw.rectangle([pad, pad, cs - 1 - pad, cs - 1 - pad], fill=fill, outline=edge, width=width)
    inner = pad + width
    draw.line([(inner, inner), (cs - 1 - inner, cs - 1 - inner)], fill=edge, width=width)
    draw.line([(inner, cs - 1 - inner), (cs - 1 - inner, inner)], fill=edge, width=width)


def _player(draw: ImageDraw.ImageDraw, cs: int, scale: float) -> None:
    half = cs * scale / 2
    c = (cs - 1) / 2
    head = half * 0.55
    draw.ellipse([c - half, c - half * 0.2, c + half, c + half], fill=BLUE, outline=NAVY)  # body
    draw.ellipse([c - head, c - half, c + head, c - half + 2 * head], fill=BLUE, outline=NAVY)  # head
    eye = max(1, round(cs / 24))
    for ex in (c - head / 2, c + head / 2):
        ey = c - half + head
        draw.rectangle([ex - eye, ey - eye, ex + eye - 1, ey + eye - 1], fill=WHITE)


@functools.lru_cache(maxsize=16)
def atlas(cell_size: int) -> dict[str, Image.Image]:
    """The seven cell tiles (keys are the ASCII symbols) as palette images, drawn once per size."""
    if cell_size < 8:
        raise ValueError(f"cell_size must be at least 8 px, got {cell_size}")
    cs = cell_size
    tiles = {}
    wall = _new_image(cs, cs, WALL_C)
    draw = ImageDraw.Draw(wall)
    for y in (0, cs // 2):
        draw.line([(0, y), (cs - 1, y)], fill=MORTAR, width=max(1, cs // 16))
    for x, (y0, y1) in ((cs // 3, (0, cs // 2)), (2 * cs // 3, (cs // 2, cs - 1))):
        draw.line([(x, y0), (x, y1)], fill=MORTAR, width=max(1, cs // 16))
    tiles[WALL] = wall
    for symbol, target, crate, player in (
        (FLOOR, False, None, False),
        (TARGET, True, None, False),
        (BOX, False, (BOX_C, BOX_EDGE), False),
        (BOX_ON_TARGET, True, (DONE_C, DONE_EDGE), False),
        (PLAYER, False, None, True),
        (PLAYER_ON_TARGET, True, None, True),
    ):
        tile = _new_image(cs, cs, FLOOR_C)
        draw = ImageDraw.Draw(tile)
        _floor(draw, cs)
        if target and crate is None:
            _target(draw, cs)
        if crate is not None:
            _crate(draw, cs, *crate)
            if target:  # the target shows through as a red dot in the crate's centre
                dot, m = max(2, cs // 10), cs // 2
                draw.rectangle([m - dot, m - dot, m + dot - 1, m + dot - 1], fill=RED)
        if player:
            _player(draw, cs, 0.5 if target else 0.72)
        tiles[symbol] = tile
    return tiles


class ByteBoundedLRU:
    """A thread-safe LRU cache holding at most ``max_bytes`` (as measured by ``size``).

    With ``weak``, evicted values stay findable while something else holds them (an episode's
    observations do), at no memory cost to the cache; values must then support weak references.
    """

    def __init__(self, max_bytes: int, size: Callable[[Any], int], weak: bool = False):
        self.max_bytes = max_bytes
        self._size = size
        self._data: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self._alive: weakref.WeakValueDictionary | None = weakref.WeakValueDictionary() if weak else None
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            item = self._data.get(key)
            if item is not None:
                self._data.move_to_end(key)
                return item[0]
        value = self._alive.get(key) if self._alive is not None else None
        if value is not None:
            self.put(key, value)
        return value

    def put(self, key: Any, value: Any) -> None:
        nbytes = self._size(value)
        with self._lock:
            if key in self._data or nbytes > self.max_bytes:
                return
            self._data[key] = (value, nbytes)
            if self._alive is not None:
                self._alive[key] = value
            self._bytes += nbytes
            while self._bytes > self.max_bytes:
                _, (_, old) = self._data.popitem(last=False)
                self._bytes -= old

    def get_or_make(self, key: Any, make: Callable[[], Any]) -> Any:
        """The cached value of ``key``, or ``make()`` cached (two threads may both make it)."""
        value = self.get(key)
        if value is None:
            value = make()
            self.put(key, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            if self._alive is not None:
                self._alive.clear()
            self._bytes = 0


def _image_bytes(im: Image.Image) -> int:
    return im.width * im.height * (4 if im.mode == "RGB" else 1)


_frames = ByteBoundedLRU(64 << 20, _image_bytes, weak=True)
_pngs = ByteBoundedLRU(32 << 20, len)
_uris = ByteBoundedLRU(32 << 20, len)


def clear_caches() -> None:
    """Forget every cached frame, PNG and data URI (renderers stay)."""
    for cache in (_frames, _pngs, _uris):
        cache.clear()


class Renderer:
    """Draws states of one layout at one cell size; get one through :func:`renderer`."""

    def __init__(self, layout: Layout, cell_size: int = DEFAULT_CELL_SIZE):
        self.layout = layout
        self.cell_size = cell_size
        self.tiles = atlas(cell_size)
        self.tiles_rgb = {symbol: tile.convert("RGB") for symbol, tile in self.tiles.items()}
        cs = cell_size
        bg = _new_image(layout.cols * cs, layout.rows * cs, FLOOR_C)
        for cell in range(layout.rows * layout.cols):
            symbol = WALL if layout.walls[cell] else TARGET if cell in layout.targets else FLOOR
            bg.paste(self.tiles[symbol], self._xy(cell))
        self.background_rgb = bg.convert("RGB")
        self._bits = 4 if cs % 2 == 0 else 8
        self._bg_lines = _packed(np.asarray(bg), self._bits)
        self._tile_lines = {s: _packed(np.asarray(t), self._bits) for s, t in self.tiles.items()}
        self._key = (layout, cell_size)
        self.background_lines_bytes = self._bg_lines.nbytes

    def _xy(self, cell: int) -> tuple[int, int]:
        r, c = divmod(cell, self.layout.cols)
        return c * self.cell_size, r * self.cell_size

    def _moving(self, state: State) -> list[tuple[int, str]]:
        """(cell, symbol) of the boxes and the player."""
        targets = self.layout.targets
        cells = [(b, BOX_ON_TARGET if b in targets else BOX) for b in state.boxes]
        cells.append((state.player, PLAYER_ON_TARGET if state.player in targets else PLAYER))
        return cells

    def frame(self, state: State) -> Image.Image:
        """The RGB frame of ``state``, its PNG attached (cached, shared and read-only: a change to it
        copies its pixels first)."""

        def draw() -> Image.Image:
            im = self.background_rgb.copy()
            for cell, symbol in self._moving(state):
                im.paste(self.tiles_rgb[symbol], self._xy(cell))
            return attach_png(im, functools.partial(self.frame_png, state))

        return _frames.get_or_make((self._key, state), draw)

    def frame_png(self, state: State) -> bytes:
        """PNG bytes of the frame (a palette PNG; decodes to :meth:`frame`'s pixels), cached."""

        def encode() -> bytes:
            lines = self._bg_lines.copy()
            cs, width = self.cell_size, self.cell_size * self._bits // 8
            for cell, symbol in self._moving(state):
                x, y = self._xy(cell)
                x = x * self._bits // 8
                lines[y : y + cs, x : x + width] = self._tile_lines[symbol]
            return encode_indexed(lines, self.layout.cols * cs, self._bits, _PLTE)

        return _pngs.get_or_make((self._key, state), encode)

    def frame_data_uri(self, state: State) -> str:
        """``data:image/png;base64,...`` of the frame, as SGLang's ``image_data`` takes it, cached."""

        def encode() -> str:
            return "data:image/png;base64," + base64.b64encode(self.frame_png(state)).decode("ascii")

        return _uris.get_or_make((self._key, state), encode)


def _renderer_bytes(renderer: Renderer) -> int:
    return _image_bytes(renderer.background_rgb) + renderer.background_lines_bytes


#: Renderers by (layout, cell size), bounded by their backgrounds' bytes: a 64x64 level at 64 px a cell
#: holds 72 MB, so a count bound (64 of them: 4.6 GB) bounds nothing.
_renderers = ByteBoundedLRU(128 << 20, _renderer_bytes, weak=True)


def renderer(layout: Layout, cell_size: int = DEFAULT_CELL_SIZE) -> Renderer:
    """The shared renderer of a layout at a cell size (its background is drawn once)."""
    return _renderers.get_or_make((layout, cell_size), lambda: Renderer(layout, cell_size))


def frame_png(layout: Layout, state: State, cell_size: int = DEFAULT_CELL_SIZE) -> bytes:
    """Engine-ready PNG bytes of a state."""
    return renderer(layout, cell_size).frame_png(state)


def frame_data_uri(layout: Layout, state: State, cell_size: int = DEFAULT_CELL_SIZE) -> str:
    """A PNG data URI of a state."""
    return renderer(layout, cell_size).frame_data_uri(state)
