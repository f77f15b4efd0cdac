"""Sokoban frames: seven distinct cell states, PNG bytes that decode to the frame, bounded caches."""

import base64
import gc
import io
import itertools
import weakref

import numpy as np
import pytest
from PIL import Image

from vlm_envs.envs.sokoban.board import LEGEND, parse_level
from vlm_envs.envs.sokoban.render import DEFAULT_CELL_SIZE, ByteBoundedLRU, atlas, clear_caches, renderer

LEVEL = "#######\n# .$* #\n#+ $  #\n#######"


@pytest.mark.parametrize("cell_size", [16, 28, 32, 64])
def test_the_seven_cell_states_look_different(cell_size):
    tiles = atlas(cell_size)
    assert set(tiles) == set(LEGEND)
    arrays = {s: np.asarray(t.convert("RGB"), dtype=np.int16) for s, t in tiles.items()}
    for a, b in itertools.combinations(arrays, 2):
        differing = np.any(arrays[a] != arrays[b], axis=2).mean()
        assert differing > 0.03, f"{LEGEND[a]!r} and {LEGEND[b]!r} differ in only {differing:.1%} of pixels"


def test_box_on_target_differs_from_box_in_colour_not_only_detail():
    tiles = atlas(DEFAULT_CELL_SIZE)
    box = np.asarray(tiles["$"].convert("RGB"), dtype=float).mean(axis=(0, 1))
    done = np.asarray(tiles["*"].convert("RGB"), dtype=float).mean(axis=(0, 1))
    assert np.abs(box - done).max() > 40


def test_frame_shows_each_cell_with_its_tile():
    layout, state = parse_level(LEVEL)
    frame = np.asarray(renderer(layout, 28).frame(state))
    assert frame.shape == (4 * 28, 7 * 28, 3)
    text = LEVEL.splitlines()
    for r, line in enumerate(text):
        for c, symbol in enumerate(line):
            expected = np.asarray(atlas(28)[symbol].convert("RGB"))
            assert np.array_equal(frame[r * 28 : (r + 1) * 28, c * 28 : (c + 1) * 28], expected), (
                r,
                c,
                symbol,
            )


@pytest.mark.parametrize("cell_size", [28, 33, 64])
def test_png_decodes_to_exactly_the_frame(cell_size):
    clear_caches()
    layout, state = parse_level(LEVEL)
    rend = renderer(layout, cell_size)
    png = rend.frame_png(state)
    decoded = Image.open(io.BytesIO(png))
    assert decoded.format == "PNG" and decoded.size == (7 * cell_size, 4 * cell_size)
    assert decoded.convert("RGB").tobytes() == rend.frame(state).tobytes()
    uri = rend.frame_data_uri(state)
    assert uri.startswith("data:image/png;base64,")
    assert base64.b64decode(uri.split(",", 1)[1]) == png


def test_frames_are_cached_by_state():
    layout, state = parse_level(LEVEL)
    rend = renderer(layout, 28)
    assert rend.frame(state) is rend.frame(state)
    assert rend.frame_png(state) is rend.frame_png(state)
    moved = state._replace(player=state.player + 1)
    assert rend.frame_png(moved) != rend.frame_png(state)
    assert renderer(layout, 28) is rend


def test_cache_stays_within_its_byte_bound():
    cache = ByteBoundedLRU(100, len)
    for i in range(10):
        cache.put(i, b"x" * 30)
    assert cache.get(0) is None and cache.get(9) == b"x" * 30
    assert sum(cache.get(i) is not None for i in range(10)) == 3
    cache.put("huge", b"x" * 101)
    assert cache.get("huge") is None


def test_tiny_cell_size_is_rejected():
    with pytest.raises(ValueError, match="cell_size"):
        atlas(4)


def test_an_evicted_frame_still_held_elsewhere_is_found_not_redrawn():
    cache = ByteBoundedLRU(100, lambda im: 60, weak=True)  # room for one frame
    held = Image.new("RGB", (4, 4), "red")
    cache.put("a", held)
    cache.put("b", Image.new("RGB", (4, 4), "blue"))  # evicts "a"
    assert cache.get("a") is held  # an observation still holds it
    del held
    cache.put("c", Image.new("RGB", (4, 4), "green"))  # evicts "a" again; nothing holds it now
    assert cache.get("a") is None
    plain = ByteBoundedLRU(100, lambda im: 60)
    kept = Image.new("RGB", (4, 4))
    plain.put("a", kept)
    plain.put("b", Image.new("RGB", (4, 4)))
    assert plain.get("a") is None


def _open_room(rows: int, cols: int, variant: int) -> str:
    """A walled room of rows x cols with a player, a box and a target (``variant`` moves the target)."""
    inner = [[" "] * (cols - 2) for _ in range(rows - 2)]
    inner[0][0], inner[1][1] = "@", "$"
    inner[2 + variant // (cols - 2)][variant % (cols - 2)] = "."
    lines = ["#" * cols, *("#" + "".join(row) + "#" for row in inner), "#" * cols]
    return "\n".join(lines)


def test_renderers_of_big_levels_are_bounded_by_bytes_not_count():
    """Eight distinct 64x64 levels at 64 px a cell (a 4096 px square, over 60 MB of background each):
    once nothing else holds them, the cache keeps at most two (128 MB), not all eight; one that an
    episode still holds is found again, not redrawn."""
    held = renderer(parse_level(_open_room(64, 64, 0))[0], 64)
    assert held.background_rgb.width * held.background_rgb.height * 4 > 60 << 20
    dropped = [weakref.ref(renderer(parse_level(_open_room(64, 64, v))[0], 64)) for v in range(1, 8)]
    gc.collect()
    assert sum(ref() is not None for ref in dropped) <= 2
    assert renderer(held.layout, 64) is held
