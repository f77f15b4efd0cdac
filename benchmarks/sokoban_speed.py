"""Sokoban env speed: steps/s (step incl. render to PIL), PNG data-URI frames/s, reset time.

Each figure is printed next to a naive baseline measured in the same run: a renderer that draws
every cell with PIL shapes each step and encodes RGB PNGs at PIL's default level, and a reset that
places boxes at random and checks them with a breadth-first search over every (player, boxes)
state. Targets: >= 10,000 steps/s (6x6, 64 px), PNG frame <= 0.5 ms, 10x10/3-box reset median
<= 100 ms with exact optimal length. Run: ``.venv/bin/python benchmarks/sokoban_speed.py``.
"""

from __future__ import annotations

import argparse
import base64
import io
import random
import statistics
import time
from collections import deque

import numpy as np
from PIL import Image, ImageDraw

from vlm_envs.envs.sokoban import SokobanEnv
from vlm_envs.envs.sokoban.board import Layout, State, apply_move, is_solved
from vlm_envs.envs.sokoban.generator import Difficulty, carve_room
from vlm_envs.envs.sokoban.render import clear_caches, renderer
from vlm_envs.protocol import Observation


def naive_frame(layout: Layout, state: State, cs: int) -> Image.Image:
    """The baseline: every cell drawn with PIL shapes, every time."""
    im = Image.new("RGB", (layout.cols * cs, layout.rows * cs))
    draw = ImageDraw.Draw(im)
    for cell in range(layout.rows * layout.cols):
        r, c = divmod(cell, layout.cols)
        x0, y0, x1, y1 = c * cs, r * cs, c * cs + cs - 1, r * cs + cs - 1
        if layout.walls[cell]:
            draw.rectangle([x0, y0, x1, y1], fill=(96, 64, 52))
            continue
        draw.rectangle([x0, y0, x1, y1], fill=(236, 228, 206), outline=(214, 204, 178))
        if cell in layout.targets:
            draw.ellipse([x0 + 4, y0 + 4, x1 - 4, y1 - 4], outline=(214, 38, 38), width=3)
        if cell in state.boxes:
            draw.rectangle([x0 + 3, y0 + 3, x1 - 3, y1 - 3], fill=(214, 140, 60), outline=(118, 68, 22))
            draw.line([x0 + 3, y0 + 3, x1 - 3, y1 - 3], fill=(118, 68, 22), width=3)
            draw.line([x0 + 3, y1 - 3, x1 - 3, y0 + 3], fill=(118, 68, 22), width=3)
        if cell == state.player:
            draw.ellipse([x0 + 6, y0 + 6, x1 - 6, y1 - 6], fill=(44, 96, 226))
    return im


def naive_png_uri(im: Image.Image) -> str:
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def bench_steps(cell_size: int, n: int, cold: bool) -> float:
    """Steps/s of the env (random well-formed answers; resets are not timed)."""
    env = SokobanEnv(grid_size=(6, 6), num_boxes=1, cell_size=cell_size, max_steps=10_000)
    rng = random.Random(0)
    responses = [env.random_response(rng) for _ in range(256)]
    env.reset(seed=0)
    elapsed, done = 0.0, False
    for i in range(n):
        if done:
            env.reset(seed=i)
        if cold:
            clear_caches()
        t = time.perf_counter()
        _, done, _ = env.step(responses[i % 256])
        elapsed += time.perf_counter() - t
    return n / elapsed


def bench_naive_steps(cell_size: int, n: int) -> float:
    """Steps/s of the baseline: the same rules, a naively drawn frame, an Observation."""
    env = SokobanEnv(grid_size=(6, 6), num_boxes=1, cell_size=cell_size)
    env.reset(seed=0)
    layout, state = env.layout, env.state
    dirs = np.random.default_rng(0).integers(0, 4, n)
    t = time.perf_counter()
    for d in dirs:
        state = apply_move(layout, state, int(d)).state
        Observation(text="<image>\nBoxes on targets: 0/1.", images=[naive_frame(layout, state, cell_size)])
    return n / (time.perf_counter() - t)


def _states(grid: tuple[int, int], boxes: int, n: int) -> tuple[Layout, list[State]]:
    """Up to ``n`` distinct states of one generated level, reached by random moves."""
    env = SokobanEnv(grid_size=grid, num_boxes=boxes)
    env.reset(seed=1)
    layout, state = env.layout, env.state
    seen = {state: None}
    rng = np.random.default_rng(1)
    for d in rng.integers(0, 4, 100 * n):
        if len(seen) >= n:
            break
        state = apply_move(layout, state, int(d)).state
        seen.setdefault(state, None)
    return layout, list(seen)


def bench_png(cell_size: int, grid: tuple[int, int], boxes: int) -> tuple[float, float, float]:
    """ms per data URI: cold (new states), cached (repeat states), naive baseline."""
    layout, states = _states(grid, boxes, 60)
    clear_caches()
    rend = renderer(layout, cell_size)
    t = time.perf_counter()
    for s in states:
        rend.frame_data_uri(s)
    cold = (time.perf_counter() - t) / len(states) * 1e3
    t = time.perf_counter()
    for _ in range(20):
        for s in states:
            rend.frame_data_uri(s)
    cached = (time.perf_counter() - t) / (20 * len(states)) * 1e3
    t = time.perf_counter()
    for s in states:
        naive_png_uri(naive_frame(layout, s, cell_size))
    naive = (time.perf_counter() - t) / len(states) * 1e3
    return cold, cached, naive


def bench_reset(grid: tuple[int, int], boxes: int, seeds: int) -> list[float]:
    """Reset times in ms (generation + exact optimal length + first frame)."""
    env = SokobanEnv(grid_size=grid, num_boxes=boxes)
    out = []
    for seed in range(seeds):
        t = time.perf_counter()
        _, info = env.reset(seed=seed)
        out.append((time.perf_counter() - t) * 1e3)
        assert info["optimal_exact"], info
    return out


def naive_reset(grid: tuple[int, int], boxes: int, seed: int, state_limit: int = 100_000) -> float:
    """Baseline reset in ms: random boxes/targets until an exhaustive BFS finds a solution."""
    spec = Difficulty(rows=grid[0], cols=grid[1], num_boxes=boxes)
    t = time.perf_counter()
    for attempt in range(1000):
        rng = np.random.default_rng([seed, attempt])
        walls = carve_room(spec, rng)
        floor = [i for i, w in enumerate(walls) if not w]
        cells = [floor[int(i)] for i in rng.choice(len(floor), 2 * boxes + 1, replace=False)]
        layout = Layout(grid[0], grid[1], walls, frozenset(cells[:boxes]))
        start = State(cells[-1], tuple(sorted(cells[boxes:-1])))
        seen = {start}
        queue = deque([start])
        while queue and len(seen) < state_limit:
            state = queue.popleft()
            if is_solved(layout, state):
                return (time.perf_counter() - t) * 1e3
            for d in range(4):
                nxt = apply_move(layout, state, d).state
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--reset-seeds", type=int, default=40)
    parser.add_argument("--naive-reset-seeds", type=int, default=3)
    args = parser.parse_args()

    rows: list[tuple[str, str, str, str]] = []
    warm = bench_steps(64, args.steps, cold=False)
    cold = bench_steps(64, args.steps // 4, cold=True)
    naive = bench_naive_steps(64, args.steps // 10)
    rows.append(("steps/s, 6x6 1 box, 64 px, frames cached", f"{warm:,.0f}", f"{naive:,.0f}", ">= 10,000"))
    rows.append(("steps/s, 6x6 1 box, 64 px, caches cleared", f"{cold:,.0f}", f"{naive:,.0f}", ""))
    for cs, grid, boxes in ((64, (6, 6), 1), (28, (10, 10), 3)):
        png_cold, png_cached, png_naive = bench_png(cs, grid, boxes)
        label = f"ms/PNG data URI, {grid[0]}x{grid[1]}, {cs} px"
        rows.append((label + ", new state", f"{png_cold:.3f}", f"{png_naive:.3f}", "<= 0.5"))
        rows.append((label + ", cached", f"{png_cached:.4f}", f"{png_naive:.3f}", ""))
    for grid, boxes in (((6, 6), 1), ((10, 10), 3)):
        times = bench_reset(grid, boxes, args.reset_seeds)
        base = [naive_reset(grid, boxes, s) for s in range(args.naive_reset_seeds)]
        target = "<= 100" if grid == (10, 10) else ""
        label = f"reset ms, {grid[0]}x{grid[1]} {boxes} box(es), median (p90)"
        p90 = float(np.percentile(times, 90))
        ours = f"{statistics.median(times):.1f} ({p90:.1f})"
        rows.append((label, ours, f"{statistics.median(base):.1f} ({max(base):.1f} max)", target))

    widths = [
        max(len(r[i]) for r in [*rows, ("figure", "vlm-envs", "naive baseline", "target")]) for i in range(4)
    ]
    header = ("figure", "vlm-envs", "naive baseline", "target")
    for row in (header, tuple("-" * w for w in widths), *rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    print(
        "\nnaive reset: random placement + exhaustive BFS (no exact-optimal bound is known without it);"
        f" {args.naive_reset_seeds} seeds"
    )


if __name__ == "__main__":
    main()
