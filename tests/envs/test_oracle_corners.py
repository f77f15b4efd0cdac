"""A config that validates is one the oracle wins: for every env with an oracle and knobs, configs at the
ends of each knob's range (a few corners of their product, and the edges of joint bounds), two seeds each.

Budgets (``max_turns``, ``max_moves``, ``max_steps``) are left out: left to their defaults they derive from
the rest of the config; given, they are the user's (a shorter one truncates on purpose). Knobs that only
draw (cell and image sizes) are left out too.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from annotated_types import Ge, Le
from pydantic import ValidationError

from vlm_envs import build_env
from vlm_envs.registry import get_spec

#: Each env's knobs that shape its episodes, with the ends of their ranges (int ends are the fields' own
#: bounds: a test below holds them equal).
KNOBS: dict[str, dict[str, list[Any]]] = {
    "chart_calc": {
        "kinds": [("bar",), ("pie",), ("line", "grouped_bar")],
        "categories": [(3, 3), (8, 8)],
        "series": [(2, 2), (4, 4)],
        "questions": [("which",), ("difference", "ratio", "sum", "mean", "percent_change", "which")],
    },
    "clock": {
        "question": ["read", "later"],
        "minute_step": [1, 60],
        "numerals": ["arabic", "none"],
        "second_hand": [False, True],
        "max_later": [1, 720],
    },
    "fog_maze": {
        "size": [(2, 2), (40, 40), (2, 40)],
        "loop_fraction": [0.0, 1.0],
        "min_distance": [1, 78],
        "view": ["local", "first_person"],
        "view_size": [1, 9],
        "max_actions_per_turn": [1, 100],
    },
    "frozen_lake": {
        "size": [2, 16],
        "frozen_probability": [0.0, 1.0],
        "placement": ["anywhere", "corners"],
        "min_path": [1, 30],
        "slippery": [False, True],
        "success_rate": [0.0, 1.0],
        "max_actions_per_turn": [1, 100],
    },
    "image_probe": {"questions": [1, 1000], "choices": [2, 6]},
    "jigsaw": {"n": [2, 4], "numbers": [False, True], "max_swaps_per_turn": [1, 100]},
    "lights_out": {"n": [2, 8], "scramble_presses": [1, 64], "max_presses_per_turn": [1, 100]},
    "matchstick": {"digits": [1, 3], "operators": ["+", "+-"]},
    "mental_rotation": {
        "mode": ["rotate", "mirror"],
        "min_cubes": [2, 12],
        "max_cubes": [2, 12],
        "min_turns": [1, 3],
        "max_actions_per_turn": [1, 100],
    },
    "minesweeper": {"size": [(4, 4), (16, 16), (4, 16)], "mines": [1, 64], "max_actions_per_turn": [1, 100]},
    "polyomino_packing": {
        "shape": ["rectangle", "irregular"],
        "pieces": [2, 12],
        "min_size": [2, 6],
        "max_size": [2, 6],
        "mirror": [False, True],
        "removals": [False, True],
    },
    "rush_hour": {
        "size": [5, 8],
        "vehicles": [1, 24],
        "min_moves": [1, 60],
        "max_moves": [1, 60],
        "max_search": [100, 200_000],
        "max_actions_per_turn": [1, 100],
    },
    "sliding_puzzle": {"n": [2, 4], "scramble_moves": [1, 80], "max_actions_per_turn": [1, 100]},
    "sokoban": {
        "grid_size": [(5, 5), (64, 64)],
        "num_boxes": [1, 4],
        "wall_fraction": [0.0, 0.99],
        "max_actions_per_step": [1, 100],
        "solver_max_nodes": [1, 1_000_000],
    },
    "tower_of_hanoi": {
        "disks": [1, 10],
        "start": ["random", "classic"],
        "min_moves": [1, 1023],
        "max_moves_per_turn": [1, 100],
    },
    "zoom_search": {
        "code_length": [3, 6],
        "max_zooms": [0, 1000],
        "coords": ["pixels", "relative1000"],
    },
}
#: Configs at the edges of joint bounds, which each knob alone at an end misses.
EDGES: dict[str, list[dict[str, Any]]] = {
    "lights_out": [{"n": 8, "scramble_presses": 64}],  # the issue's: 8 turns were too few
    "minesweeper": [
        {"size": (16, 16), "mines": 64},
        {"size": (16, 16), "mines": 64, "max_actions_per_turn": 1},
    ],
    "polyomino_packing": [  # the largest pieces, whose packings are past the search budget: no distance
        {"shape": "rectangle", "pieces": 12, "min_size": 6, "max_size": 6, "removals": False},
        {"shape": "irregular", "pieces": 12, "min_size": 2, "max_size": 6, "mirror": True},
    ],
    "sliding_puzzle": [{"n": 4, "scramble_moves": 80}],
    "sokoban": [
        {"grid_size": (6, 6), "num_boxes": 4, "wall_fraction": 0.0},  # 16 floor cells: the most boxes
        {"grid_size": (10, 10), "num_boxes": 3},  # 51 floor cells: the most for 3 boxes
        {"grid_size": (20, 20), "num_boxes": 2, "wall_fraction": 0.1},  # 292 floor cells
        {"grid_size": (64, 64), "num_boxes": 2, "wall_fraction": 0.9},
    ],
    "tower_of_hanoi": [{"disks": 10, "max_moves_per_turn": 2}],
    "zoom_search": [  # the smallest canvas; the largest at each scale end, as full as it fits
        {"canvas": 448, "view": 224, "glyph_px": 8, "distractors": 0},
        {"canvas": 8064, "view": 4032, "glyph_px": 8, "distractors": 783},
        {"canvas": 8064, "view": 4032, "glyph_px": 8, "crop_view": 4096, "distractors": 8},
        {"canvas": 8064, "view": 224, "glyph_px": 64, "distractors": 8, "max_zooms": 0},
    ],
}
#: Corners tried per env besides the lowest and the highest: a fixed sample of the valid ones.
SAMPLED_CORNERS = 6
SEEDS = (0, 1)
#: Replies an episode may take in this test (every cap the configs allow is at most 1000 turns).
MAX_REPLIES = 1000


def _valid(name: str, config: dict[str, Any]) -> bool:
    try:
        get_spec(name).load().build_env(**config).close()
    except (ValueError, ValidationError):
        return False
    return True


def corners(name: str) -> list[dict[str, Any]]:
    """The valid configs of ``name`` with every knob at an end: the lowest, the highest and a fixed sample
    of the others, then the env's edges."""
    knobs = KNOBS[name]
    product = [dict(zip(knobs, values, strict=True)) for values in itertools.product(*knobs.values())]
    ends = [c for c in (product[0], product[-1]) if _valid(name, c)]
    rest = [c for c in product[1:-1] if _valid(name, c)]
    sample = random.Random(name).sample(rest, min(SAMPLED_CORNERS, len(rest)))
    return [*ends, *sample, *EDGES.get(name, [])]


CASES = [(name, config) for name in KNOBS for config in corners(name)]


@pytest.mark.parametrize(("name", "config"), CASES, ids=[f"{n}-{c}" for n, c in CASES])
def test_the_oracle_wins_configs_at_the_ends_of_every_knob(name: str, config: dict[str, Any]) -> None:
    env = build_env(name, **config)
    for seed in SEEDS:
        env.reset(seed=seed)
        for _ in range(MAX_REPLIES):
            reply = env.oracle_response()
            assert reply is not None, f"the oracle gave no reply (seed {seed})"
            if env.step(reply)[1]:
                break
        assert env.episode_reward() > 0, f"the oracle lost seed {seed}"


@pytest.mark.parametrize("name", sorted(KNOBS))
def test_the_int_ends_are_the_config_bounds(name: str) -> None:
    fields = build_env(name).config_class.model_fields
    for knob, values in KNOBS[name].items():
        metadata = fields[knob].metadata
        low = next((m.ge for m in metadata if isinstance(m, Ge)), None)
        high = next((m.le for m in metadata if isinstance(m, Le)), None)
        if all(type(v) is int for v in values) and low is not None and high is not None:
            assert [min(values), max(values)] == [low, high], knob


@pytest.mark.parametrize(
    ("name", "config", "message"),
    [
        ("tower_of_hanoi", {"disks": 10, "max_moves_per_turn": 1}, "can need 1023 turns, over the 1000"),
        ("fog_maze", {"size": (40, 40), "max_actions_per_turn": 1}, "can need 1599 turns, over the 1000"),
        ("sokoban", {"grid_size": (30, 30), "num_boxes": 12}, "less than or equal to 4"),
        ("sokoban", {"grid_size": (30, 30), "num_boxes": 3}, "3 box(es) allow at most 53"),
    ],
)
def test_configs_no_turn_cap_or_solver_lets_the_oracle_win_are_refused(
    name: str, config: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_env(name, **config)
