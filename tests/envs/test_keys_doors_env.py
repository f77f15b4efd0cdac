"""KeysDoors: the rules on hand-built levels, the generator's promises (keys on the player's side, lava never
cutting the way), the recorded optimum against an independent search over the text map, the solver's table
and its fast check, the local view's sight, oracle and random play per level, seed-exactness across
processes, hostile replies and config."""

from __future__ import annotations

import random
from collections import deque

import numpy as np
import pytest
from puzzle_helpers import (
    assert_hostile_never_raise,
    assert_malformed_replies_end_at_the_cap,
    assert_seed_exact,
    play,
    success_rate,
)

from vlm_envs.checker import check_env
from vlm_envs.envs.keys_doors import KeysDoorsConfig
from vlm_envs.envs.keys_doors.actions import parse_actions
from vlm_envs.envs.keys_doors.generate import draw_level, generate_level, room_columns
from vlm_envs.envs.keys_doors.render import visible
from vlm_envs.envs.keys_doors.solver import distance_table, plan, winnable
from vlm_envs.envs.keys_doors.world import (
    COLOURS,
    DOOR,
    DOWN,
    GOAL,
    LAVA,
    LEFT,
    LETTERS,
    OPEN,
    PICKUP,
    RIGHT,
    UP,
    WALL,
    Effect,
    Item,
    Level,
    State,
    act,
)
from vlm_envs.registry import build_env
from vlm_envs.state_signals import UNREACHABLE

TARGET = "vlm_envs.envs.keys_doors"
LEVELS = ("easy", "medium", "hard")
CODES = {"#": WALL, "~": LAVA, "G": GOAL}


def level_from(text: str) -> Level:
    """A level from a text map: doors (upper case) numbered left to right, each opened by its lower-case key;
    other lower-case letters are distractors; ``@`` the start."""
    rows = text.strip().splitlines()
    cells = tuple(
        tuple(DOOR if ch.isupper() and ch != "G" else CODES.get(ch, 0) for ch in row) for row in rows
    )
    found = {ch: (r, c) for r, row in enumerate(rows) for c, ch in enumerate(row) if ch not in ".#~"}
    doors = sorted((cell, ch) for ch, cell in found.items() if ch.isupper() and ch != "G")
    door_letters = [ch for _, ch in doors]
    keys = [found[ch.lower()] for ch in door_letters]
    keys += [found[ch] for ch in sorted(found) if ch.islower() and ch.upper() not in door_letters]
    colour = {letter.lower(): i for i, letter in enumerate(LETTERS)}
    return Level(
        cells,
        tuple(Item(cell, colour[ch.lower()]) for cell, ch in doors),
        tuple(Item(cell, colour[rows[cell[0]][cell[1]]]) for cell in keys),
        found["@"],
        found["G"],
    )


def search_text_map(text: str) -> int:
    """Fewest actions from ``@`` into ``G`` on the text map (an independent search with every key in the
    state, distractors included)."""
    rows = text.splitlines()
    start = next((r, row.index("@")) for r, row in enumerate(rows) if "@" in row)
    first = (start, frozenset(), frozenset())
    seen, queue = {first}, deque([(first, 0)])
    while queue:
        (cell, held, opened), d = queue.popleft()
        if rows[cell[0]][cell[1]] == "G":
            return d
        nxt = []
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            to = (cell[0] + dr, cell[1] + dc)
            ch = rows[to[0]][to[1]]
            if ch not in "#~" and (not (ch.isupper() and ch != "G") or to in opened):
                nxt.append((to, held, opened))
        here = rows[cell[0]][cell[1]]
        if here.islower() and here not in held:
            nxt.append((cell, held | {here}, opened))
        doors = {
            (cell[0] + dr, cell[1] + dc)
            for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1))
            if rows[cell[0] + dr][cell[1] + dc].lower() in held and rows[cell[0] + dr][cell[1] + dc].isupper()
        } - opened
        if doors:
            nxt.append((cell, held, opened | doors))
        for state in nxt:
            if state not in seen:
                seen.add(state)
                queue.append((state, d + 1))
    raise AssertionError("goal unreachable")


CORRIDOR = """
#########
#@.b.#.G#
#...rR..#
#.~..#..#
#########
"""


def test_the_rules_on_a_hand_built_level():
    level = level_from(CORRIDOR)
    assert [COLOURS[k.colour] for k in level.keys] == ["red", "blue"]  # the door's key, then a distractor
    s = State(level.start)
    assert act(level, s, UP) == (s, Effect.WALL) and act(level, s, PICKUP) == (s, Effect.NO_KEY)
    at_key = State((2, 4))
    assert act(level, at_key, RIGHT) == (at_key, Effect.LOCKED)  # a locked door blocks
    assert act(level, at_key, OPEN) == (at_key, Effect.NO_DOOR)  # no key yet
    holding, effect = act(level, at_key, PICKUP)
    assert effect is Effect.PICKED and holding.held == 0b01
    assert act(level, holding, PICKUP) == (holding, Effect.NO_KEY)  # picked already
    opened, effect = act(level, holding, OPEN)
    assert effect is Effect.OPENED and opened.opened == 0b1 and opened.held == 0b01  # the key is kept
    assert act(level, opened, RIGHT) == (State((2, 5), 0b01, 0b1), Effect.MOVED)  # through the door
    assert act(level, State((1, 2)), DOWN)[1] is Effect.MOVED
    assert act(level, State((2, 2)), DOWN) == (State((3, 2)), Effect.LAVA)
    assert act(level, State((1, 6), 1, 1), RIGHT)[1] is Effect.GOAL
    distractor, _ = act(level, State((1, 3)), PICKUP)
    assert distractor.held == 0b10  # a distractor is held, and opens nothing
    assert act(level, State((2, 4), 0b10), OPEN)[1] is Effect.NO_DOOR


def test_the_solver_on_a_hand_built_level():
    level = level_from(CORRIDOR)
    table = distance_table(level)
    # down, right x3 onto the key, pickup, open, right x2, up, right into the goal (ties go to Up before
    # Right; the distractor is no help)
    assert table[State(level.start)] == 10 == search_text_map(CORRIDOR.strip())
    way = [DOWN, RIGHT, RIGHT, RIGHT, PICKUP, OPEN, RIGHT, RIGHT, UP, RIGHT]
    assert plan(level, table, State(level.start), 10) == way
    assert table[State((2, 4), 1)] == 5 and table[State((2, 4), 1, 1)] == 4
    assert all(state.held < 2 for state in table)  # distractors are left out
    assert winnable(level)
    walled = level_from(CORRIDOR.replace("#...rR", "#.~.rR").replace("@.b", "@~b"))
    assert not winnable(walled) and distance_table(walled) == {}


@pytest.mark.parametrize("level", LEVELS)
def test_generated_levels_keep_their_promises(level):
    cfg = KeysDoorsConfig(difficulty=level)
    rows, width = cfg.room_size
    for seed in range(40):
        lv, table = generate_level(cfg.rooms, cfg.room_size, cfg.distractors, cfg.lava, cfg.lava_gaps, seed)
        room_of = {c: room for room in range(cfg.rooms) for c in room_columns(room, width)}
        assert (
            lv.shape == cfg.grid_shape and room_of[lv.start[1]] == 0 and room_of[lv.goal[1]] == cfg.rooms - 1
        )
        assert len(lv.doors) == cfg.rooms - 1 and len(lv.keys) == cfg.rooms - 1 + cfg.distractors
        colours = [item.colour for item in (*lv.doors, *lv.keys[len(lv.doors) :])]
        assert len(set(colours)) == len(colours)  # distractors have colours no door has
        for i, door in enumerate(lv.doors):
            assert lv.keys[i].colour == door.colour and room_of[lv.keys[i].cell[1]] <= i  # the player's side
            for side in (-1, 1):
                assert lv.cells[door.cell[0]][door.cell[1] + side] != LAVA
        occupied = {lv.start, lv.goal, *(key.cell for key in lv.keys)}
        assert len(occupied) == 2 + len(lv.keys) and all(
            lv.cells[r][c] != LAVA for r, c in occupied - {lv.goal}
        )
        assert State(lv.start) in table and table[State(lv.start)] <= cfg.actions_needed
        if level == "hard":  # a lava gap crosses every room: a column of lava with one cell open
            for room in range(cfg.rooms):
                assert any(
                    sum(lv.cells[r][c] == LAVA for r in range(1, rows + 1)) >= rows - 1
                    for c in room_columns(room, width)
                )


@pytest.mark.parametrize("level", LEVELS)
def test_the_recorded_optimum_is_an_independent_search_over_the_text_map(level):
    env = build_env(TARGET, difficulty=level)
    for seed in range(25):
        _, info = env.reset(seed=seed)
        assert info["optimal_actions"] == search_text_map(info["level"]), seed


def test_every_state_random_play_reaches_can_still_win_and_the_fast_check_agrees():
    env = build_env(TARGET, difficulty="medium", lava=8)
    rng = random.Random(0)
    for seed in range(30):
        env.reset(seed=seed)
        done = False
        while not done:
            _, done, step = env.step(env.random_response(rng))
            distance = env.distance_to_goal()
            assert distance == UNREACHABLE if step.metrics.get("fell_in_lava") else distance >= 0
    rng_draw = np.random.default_rng(0)
    lost = 0
    for _ in range(200):  # draws of heavy lava: many cannot be won
        lv = draw_level(rng_draw, 3, (4, 4), 1, 10, 2)
        assert winnable(lv) == (State(lv.start) in distance_table(lv))
        lost += not winnable(lv)
    assert 20 <= lost <= 180


@pytest.mark.parametrize("level", LEVELS)
def test_the_oracle_wins_every_seed_in_the_optimal_number_of_actions(level):
    env = build_env(TARGET, difficulty=level)
    for seed in range(100):
        end = play(env, seed, "oracle")
        assert end["success"] is True and end["reward"] == 1.0 and end["fell_in_lava"] is False
        assert end["actions"] == end["optimal_actions"] and end["wasted_actions"] == 0


def test_random_play_is_far_below_the_oracle_and_harder_on_hard():
    easy = success_rate(TARGET, {"difficulty": "easy"}, "random", range(100))
    hard = success_rate(TARGET, {"difficulty": "hard"}, "random", range(100))
    assert hard < easy <= 0.3 and hard <= 0.02


@pytest.mark.parametrize(
    "config", [{"difficulty": "easy"}, {"difficulty": "hard"}, {"difficulty": "hard", "render_mode": "text"}]
)
def test_same_seed_same_episode_in_another_process(config):
    assert_seed_exact(TARGET, config, 7)


def test_stepping_into_lava_loses_and_the_goal_cannot_be_reached():
    env = build_env(TARGET, rooms=1, room_size=(3, 3), distractors=0, lava=6)
    for seed in range(50):
        _, info = env.reset(seed=seed)
        rows = info["level"].splitlines()
        r, c = next((r, row.index("@")) for r, row in enumerate(rows) if "@" in row)
        step = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}
        into = next((name for name, (dr, dc) in step.items() if rows[r + dr][c + dc] == "~"), None)
        if into is not None:
            break
    else:
        raise AssertionError("no start next to lava in 50 seeds")
    obs, done, info = env.step(f"<answer>{into}, Up</answer>")
    assert done and info.reward == 0.0 and info.terminated and not info.truncated
    assert info.metrics["fell_in_lava"] is True and info.metrics["success"] is False
    assert info.metrics["actions"] == 1  # the rest of the turn is dropped
    assert "stepped into lava" in obs.text and env.distance_to_goal() == UNREACHABLE
    assert "Under you: lava." in env.state_text()


def test_wasted_actions_are_counted_and_change_no_state():
    env = build_env(TARGET, difficulty="easy")
    env.reset(seed=0)  # the player at (2, 2), nothing under it, no door next to it
    key = env.state_key()
    obs, done, info = env.step("<answer>Pickup, Open</answer>")
    assert not done and env.state_key() == key and info.metrics["wasted_actions"] == 2
    assert info.metrics["action_valid"] is False and info.metrics["format_valid"] is True
    assert "Pickup found no key" in obs.text and "Open found no locked door" in obs.text
    assert "Actions left: 98." in obs.text


def test_a_distractor_changes_the_state_but_not_the_distance():
    env = build_env(TARGET, rooms=1, room_size=(2, 2), distractors=2, lava=0, max_actions_per_turn=1)
    for seed in range(50):
        _, info = env.reset(seed=seed)
        rows = info["level"].splitlines()
        r, c = next((r, row.index("@")) for r, row in enumerate(rows) if "@" in row)
        if rows[r][c + 1] in "rbypc":
            break
    else:
        raise AssertionError("no key right of the start in 50 seeds")
    env.step("<answer>Right</answer>")
    before = (env.state_key(), env.distance_to_goal())
    assert "Under you: the" in env.state_text()
    _, _, info = env.step("<answer>Pickup</answer>")
    assert info.metrics["keys_held"] == 1 and env.state_key() != before[0]
    assert env.distance_to_goal() == before[1]


def test_the_local_view_hides_what_walls_and_locked_doors_hide():
    level = level_from(
        """
###########
#...@.R...#
#.....#..G#
###########
""".replace("@.R", "r@R")
    )
    here = State((1, 4), held=1)
    seen = visible(level, here, radius=3)
    assert seen[1, 4] and seen[1, 6] and seen[2, 1] and not seen[1, 7] and not seen[2, 8]
    assert not seen[1, 8]  # four columns away: outside a radius-3 view
    opened = visible(level, here._replace(opened=1), radius=3)
    assert opened[1, 7] and opened[1, 6]
    env = build_env(TARGET, difficulty="hard", render_mode="text")
    obs, info = env.reset(seed=3)
    grid = obs.text.split("What you see now:\n", 1)[1].split("\nYou carry", 1)[0].split("\n")
    assert len(grid) == 5 and grid[2][2] == "@" and "?" in "".join(grid)  # a corner of the room hides
    assert build_env(TARGET, difficulty="hard").reset(seed=3)[0].images[0].size == (5 * 32, 5 * 32)
    assert "G" not in "".join(grid) and "G" in env.state_text()  # out of sight, not out of the state
    assert env.state_text().splitlines()[:7] == info["level"].splitlines()


def test_the_full_view_shows_the_level_and_the_status_line_the_keys():
    env = build_env(TARGET, difficulty="easy", render_mode="vision+text", cell_size=20)
    obs, info = env.reset(seed=0)
    assert info["level"] in obs.text and obs.images[0].size == (9 * 20, 5 * 20)
    assert "You carry no key. Actions left: 100." in obs.text
    obs, _, _ = env.step(env.oracle_response())  # fetches the key and opens the door
    assert "You carry the purple key. You stand on the open purple door." in obs.text
    assert "Carrying: purple." in env.state_text()


def test_parse_actions_spellings_and_errors():
    assert parse_actions("<answer>Up, pick up; d\nTOGGLE r</answer>", 5).actions == (
        UP,
        PICKUP,
        DOWN,
        OPEN,
        RIGHT,
    )
    assert parse_actions("<answer>L pick_up Open</answer>", 3).actions == (LEFT, PICKUP, OPEN)
    assert "at most 2" in parse_actions("<answer>Up Up Up</answer>", 2).error
    assert "not an action" in parse_actions("<answer>Forward</answer>", 5).error
    assert "?" in parse_actions("<answer><image></answer>", 5).error
    assert parse_actions("Up, Up", 5).error is not None


def test_hostile_replies_and_check_env():
    assert_hostile_never_raise(build_env(TARGET), 0)
    check_env(build_env(TARGET, difficulty="hard", render_mode="vision+text"))


def test_a_stream_of_malformed_replies_ends_at_the_turn_cap():
    assert_malformed_replies_end_at_the_cap(TARGET, 3)
    assert build_env(TARGET, difficulty="easy").config.turn_limit == 100


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"rooms": 5, "distractors": 2}, "need 6 colours"),
        ({"rooms": 2, "lava_gaps": 3}, "lava_gaps 3 exceeds rooms 2"),
        ({"view_size": 4}, "view_size must be odd"),
        ({"room_size": (2, 2), "rooms": 4}, "too few for the start"),
        ({"room_size": (1, 4)}, "2 to 8 cells each"),
        ({"rooms": 5, "room_size": (8, 8), "cell_size": 128}, "px wide"),
        ({"rooms": 5, "room_size": (8, 8), "distractors": 0, "max_actions_per_turn": 1}, "over the 1000"),
        ({"colour": "red"}, "Extra inputs"),
    ],
)
def test_config_errors(config, message):
    with pytest.raises(ValueError, match=message):
        build_env(TARGET, **config)


def test_budgets_follow_the_config_and_the_trainer():
    assert KeysDoorsConfig(difficulty="easy").action_budget == 100  # its bound is 36
    assert (
        KeysDoorsConfig(difficulty="hard").action_budget == KeysDoorsConfig(difficulty="hard").actions_needed
    )
    assert KeysDoorsConfig(max_actions=7).action_budget == 7
    from vlm_envs.envs.keys_doors import build_env as module_build

    env = module_build(
        {"metadata": {"env_config": {"difficulty": "easy"}}}, type("A", (), {"max_turns": 2})()
    )
    env.reset(seed=1)
    assert env.config.max_turns == 2 and env.config.rooms == 2
    env.step("<answer>Up</answer>")
    assert env.step("nothing")[1] is True
