"""Connect Four: the bitboard rules against a grid, the engine's sure rules and seeded ties, the solver
against brute force (forced wins, and the engine's actual replies past its horizon), starts of the promised
length, oracle and random play, invalid moves, losses, seed-exactness, views, presets and config."""

from __future__ import annotations

import itertools
import random

import pytest
from puzzle_helpers import (
    assert_hostile_never_raise,
    assert_malformed_replies_end_at_the_cap,
    assert_seed_exact,
    success_rate,
)

from vlm_envs.envs.connect_four import ConnectFourConfig, horizon, reply, shortest_win
from vlm_envs.envs.connect_four.actions import parse_column
from vlm_envs.envs.connect_four.board import (
    Geometry,
    geometry,
    has_four,
    landing,
    playable,
    replay,
    winning_cells,
)
from vlm_envs.envs.connect_four.generator import MAX_GAMES
from vlm_envs.envs.connect_four.render import ENGINES, YOURS
from vlm_envs.registry import build_env
from vlm_envs.state_signals import UNREACHABLE

TARGET = "vlm_envs.envs.connect_four"


# ----- a plain reference: the board as a grid -----


def grid_of(g: Geometry, stones: int) -> set[tuple[int, int]]:
    """The (column, row) cells of ``stones``, row 0 the bottom."""
    return {(c, r) for c in range(g.cols) for r in range(g.rows) if stones >> (c * (g.rows + 1) + r) & 1}


def grid_four(g: Geometry, cells: set[tuple[int, int]], through: tuple[int, int] | None = None) -> bool:
    """Four in a row by looking at every line of four on the board (through one cell, where given)."""
    starts = itertools.product(range(g.cols), range(g.rows)) if through is None else [through]
    for c, r in starts:
        for dc, dr in ((1, 0), (0, 1), (1, 1), (1, -1)):
            for back in range(4 if through is not None else 1):
                line = [(c + (k - back) * dc, r + (k - back) * dr) for k in range(4)]
                if all(0 <= x < g.cols and 0 <= y < g.rows for x, y in line) and set(line) <= cells:
                    return True
    return False


def random_position(g: Geometry, rng: random.Random, plies: int) -> tuple[int, int] | None:
    """(the stones of the player to move, every stone) after ``plies`` random moves, or None where the
    game ended on the way."""
    cur = mask = 0
    for _ in range(plies):
        col = rng.choice([c for c in range(g.cols) if landing(g, mask, c)])
        cell = landing(g, mask, col)
        if has_four(g, cur | cell) or mask | cell == g.full:
            return None
        cur, mask = cur ^ mask, mask | cell
    return cur, mask


@pytest.mark.parametrize(("rows", "cols"), [(6, 7), (4, 4), (8, 9), (5, 8)])
def test_the_bitboard_rules_match_a_grid(rows, cols):
    g, rng = geometry(rows, cols), random.Random(rows * cols)
    for _ in range(12):
        stones = [0, 0]
        for ply in range(rows * cols):
            mask = stones[0] | stones[1]
            free = {(c, len([r for r in range(rows) if (c, r) in grid_of(g, mask)])) for c in range(cols)}
            assert grid_of(g, playable(g, mask)) == {(c, r) for c, r in free if r < rows}
            mine = grid_of(g, stones[ply % 2])
            empty = {(c, r) for c in range(cols) for r in range(rows)} - grid_of(g, mask)
            assert grid_of(g, winning_cells(g, stones[ply % 2], mask)) == {
                cell for cell in empty if grid_four(g, mine | {cell}, cell)
            }
            col = rng.choice([c for c in range(cols) if landing(g, mask, c)])
            stones[ply % 2] |= landing(g, mask, col)
            assert has_four(g, stones[ply % 2]) == grid_four(g, grid_of(g, stones[ply % 2]))
            if has_four(g, stones[ply % 2]):
                break


G = geometry(6, 7)
ORDERS = [tuple(range(7)), tuple(reversed(range(7))), (3, 1, 5, 0, 6, 2, 4)]


def engine_to_move(columns: tuple[int, ...], you_first: bool) -> tuple[int, int]:
    """(the engine's stones, every stone) after ``columns`` from the empty board, the engine to move."""
    you, engine, _ = replay(G, columns, you_first)
    assert (len(columns) % 2 == 0) != you_first  # the engine's turn
    return engine, you | engine


@pytest.mark.parametrize("depth", [1, 2, 4])
@pytest.mark.parametrize("order", ORDERS)
def test_the_engine_wins_now_blocks_and_stays_safe(depth, order):
    # its own three along the bottom: it completes them
    assert reply(G, depth, order, *engine_to_move((0, 0, 1, 1, 2, 5), False)).column == 3
    # your three along the bottom: it blocks
    assert reply(G, depth, order, *engine_to_move((0, 6, 1, 6, 2), True)).column == 3
    # your three along row 2 wait for column 4's second cell: it never fills column 4's first
    assert reply(G, depth, order, *engine_to_move((0, 1, 2, 0, 6, 1, 6, 2), False)).column != 3


def test_the_tie_order_picks_among_equal_moves():
    rng = random.Random(0)
    orders = [*ORDERS, *(tuple(rng.sample(range(7), 7)) for _ in range(12))]
    differ = 0
    for _ in range(60):
        position = random_position(G, rng, rng.randint(2, 14))
        if position is None:
            continue
        replies = {order: reply(G, 2, order, *position).column for order in orders}
        best = set(replies.values())  # columns of the best score: each order plays the first of them it lists
        assert all(column == next(c for c in order if c in best) for order, column in replies.items())
        differ += len(best) > 1
    assert differ >= 5


def forced_win(g: Geometry, you: int, mask: int, moves: int) -> bool:
    """Plain minimax: you, to move, make four within ``moves`` of your moves whatever the other replies."""
    return any(forces(g, you, mask, col, moves) for col in range(g.cols))


def forces(g: Geometry, you: int, mask: int, col: int, moves: int) -> bool:
    """Whether your stone in ``col`` makes four within ``moves`` (this one included) against any defence."""
    cell = landing(g, mask, col)
    if not cell:
        return False
    if has_four(g, you | cell):
        return True
    after = mask | cell
    if moves == 1 or after == g.full:
        return False
    other = you ^ mask
    replies = [landing(g, after, c) for c in range(g.cols) if landing(g, after, c)]
    return all(
        not has_four(g, other | r) and after | r != g.full and forced_win(g, you | cell, after | r, moves - 1)
        for r in replies
    )


def win_against(g: Geometry, depth: int, order: tuple[int, ...], you: int, mask: int, moves: int) -> bool:
    """Plain search of your moves against the engine's actual replies: a win within ``moves``."""
    return any(beats(g, depth, order, you, mask, col, moves) for col in range(g.cols))


def beats(g: Geometry, depth: int, order: tuple[int, ...], you: int, mask: int, col: int, moves: int) -> bool:
    """Whether your stone in ``col`` wins within ``moves`` (this one included) against the engine."""
    cell = landing(g, mask, col)
    if not cell:
        return False
    if has_four(g, you | cell):
        return True
    after = mask | cell
    if moves == 1 or after == g.full:
        return False
    engine = you ^ mask
    answer = landing(g, after, reply(g, depth, order, engine, after).column)
    if has_four(g, engine | answer) or after | answer == g.full:
        return False
    return win_against(g, depth, order, you | cell, after | answer, moves - 1)


def fewest(test, most: int) -> int | None:
    return next((n for n in range(1, most + 1) if test(n)), None)


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_the_shortest_win_is_the_engine_replies_and_within_the_horizon_any_defences(depth):
    g, rng = geometry(5, 6), random.Random(depth)
    order = tuple(rng.sample(range(6), 6))
    checked = found = 0
    while checked < 25:
        position = random_position(g, rng, rng.randint(10, 20))
        if position is None:
            continue
        you, mask = position
        most = horizon(depth) + (1 if depth <= 2 else 0)  # one past the horizon: the engine's replies
        outcome = shortest_win(g, depth, order, you, mask, most, 10**7)
        assert outcome.complete
        against = fewest(lambda n, you=you, mask=mask: win_against(g, depth, order, you, mask, n), most)
        assert outcome.moves == against
        within = fewest(lambda n, you=you, mask=mask: forced_win(g, you, mask, n), horizon(depth))
        assert (against if against is not None and against <= horizon(depth) else None) == within
        if outcome.moves is not None:  # its first column wins that fast
            assert beats(g, depth, order, you, mask, outcome.column, outcome.moves)
            if outcome.moves <= horizon(depth):
                assert forces(g, you, mask, outcome.column, outcome.moves)
            found += 1
        checked += 1
    assert found >= 5


def test_late_positions_are_searched_to_the_end_and_a_small_budget_gives_up():
    g, rng = geometry(4, 4), random.Random(7)
    unreachable = won = 0
    while unreachable < 5 or won < 5:
        position = random_position(g, rng, rng.randint(9, 13))
        if position is None:
            continue
        you, mask = position
        left = ((g.full ^ mask).bit_count() + 1) // 2
        outcome = shortest_win(g, 1, (0, 1, 2, 3), you, mask, left, 10**6)
        assert outcome.complete
        assert outcome.moves == fewest(
            lambda n, you=you, mask=mask: win_against(g, 1, (0, 1, 2, 3), you, mask, n), left
        )
        unreachable += outcome.moves is None
        won += outcome.moves is not None
    empty = shortest_win(geometry(8, 9), 4, tuple(range(9)), 0, 0, 40, 200)
    assert not empty.complete and empty.moves is None


# ----- the env -----


@pytest.mark.parametrize("level", ["easy", "medium", "hard"])
def test_the_oracle_wins_every_seed_in_the_fewest_moves_one_less_a_turn(level):
    env = build_env(TARGET, difficulty=level)
    cfg = env.config
    for seed in range(60):
        _, info = env.reset(seed=seed)
        assert cfg.min_win <= info["optimal_moves"] <= cfg.max_win and info["attempt"] < MAX_GAMES
        distance, done = env.distance_to_goal(), False
        assert distance == info["optimal_moves"]
        while not done:
            _, done, step = env.step(env.oracle_response())
            assert env.distance_to_goal() == distance - 1
            distance -= 1
        assert step.metrics["success"] is True and step.metrics["moves"] == info["optimal_moves"]
        assert env.episode_reward() == 1.0


@pytest.mark.parametrize("level", ["easy", "hard"])
def test_starts_replay_their_opening_and_leave_you_to_move(level):
    env = build_env(TARGET, difficulty=level)
    boards = set()
    for seed in range(30):
        _, info = env.reset(seed=seed)
        ep = env._ep
        you, engine, _ = replay(G, tuple(c - 1 for c in info["opening"]), info["first"] == "you")
        assert (you, engine) == (ep.you, ep.engine) and not has_four(G, you) and not has_four(G, engine)
        assert engine.bit_count() - you.bit_count() == (info["first"] == "engine")
        assert sorted(info["engine_order"]) == list(range(1, 8))
        boards.add(info["board"])
    assert len(boards) == 30


def test_random_play_is_far_below_the_oracle_and_hard_is_harder():
    easy = success_rate(TARGET, {"difficulty": "easy"}, "random", range(100))
    hard = success_rate(TARGET, {"difficulty": "hard"}, "random", range(100))
    assert hard < easy <= 0.3


def test_invalid_moves_change_nothing_and_cost_the_turn():
    env = build_env(TARGET, render_mode="text")
    env.reset(seed=2)
    key, board = env.state_key(), env._ep.mask
    full = next((c for c in range(7) if not landing(G, board, c)), None)
    replies = ["<answer>0</answer>", "<answer>8</answer>", "<answer>four</answer>", "column 4"]
    if full is not None:
        replies.append(f"<answer>{full + 1}</answer>")
    for turn, reply_text in enumerate(replies, 1):
        obs, done, step = env.step(reply_text)
        assert not done and env.state_key() == key and env._ep.turns == turn
        assert step.metrics["action_valid"] is False and "No stone was dropped this turn." in obs.text
        assert step.metrics["format_valid"] == (
            reply_text.startswith("<answer>") and "four" not in reply_text
        )
    assert "not on the board (columns 1 to 7)" in env.step("<answer>8</answer>")[0].text


def test_a_loss_ends_the_episode_with_nothing_and_no_way_back():
    env = build_env(TARGET, difficulty="hard")
    lost = 0
    for seed in range(20):
        env.reset(seed=seed)
        rng, done = random.Random(seed), False
        while not done:
            _, done, step = env.step(env.random_response(rng))
        if step.metrics["lost"]:
            lost += 1
            assert env.episode_reward() == 0.0 and step.terminated and not step.truncated
            assert env.distance_to_goal() == UNREACHABLE and "Game over: the engine won." in env.state_text()
    assert lost >= 10


def test_the_engine_replies_in_the_same_step_and_the_state_says_who_and_what():
    env = build_env(TARGET, render_mode="vision+text")
    for seed in range(10):
        env.reset(seed=seed)
        before = env._ep.mask.bit_count()
        column = next(c for c in range(7) if landing(G, env._ep.mask, c))
        obs, done, step = env.step(f"<answer>{column + 1}</answer>")
        played = step.info["played"]
        assert played[0] == column + 1 and env._ep.mask.bit_count() == before + len(played)
        assert len(played) == 2 or step.metrics["success"] or step.metrics["drawn"]
        if len(played) == 2:
            assert f"The engine played column {played[1]}." in obs.text
        text = env.state_text()
        order = " ".join(str(c + 1) for c in env._ep.order)
        assert f"Engine: depth 2, tie order {order}." in text and "Turns" not in text
        assert ("Your move." in text) == (not done)


def test_the_image_shows_the_text_boards_stones():
    env = build_env(TARGET, render_mode="vision+text", cell_size=40)
    obs, _ = env.reset(seed=5)
    image, text = obs.images[0], env.state_text().splitlines()
    rows = [line.split()[1:] for line in text[1:7]]
    for r, row in enumerate(rows):  # top row first
        for c, mark in enumerate(row):
            x, y = 10 + c * 40 + 20, 30 + r * 40 + 20 - 12  # the stone's upper part, clear of any ring
            pixel = image.getpixel((x, y))
            assert (pixel == YOURS) == (mark == "X") and (pixel == ENGINES) == (mark == "O"), (r, c)


def test_answers_name_one_column():
    assert parse_column("<answer>4</answer>").column == 3
    assert parse_column("<answer> Column 7. </answer>").column == 6
    assert parse_column("<answer>col 1</answer>").column == 0
    assert parse_column("<answer>12</answer>").column == 11  # off the board: the env says so
    for reply_text, says in [
        ("<answer>4 5</answer>", "is not a column number"),
        ("<answer>٣</answer>", "is not a column number"),
        ("<answer></answer>", "the answer is empty"),
        ("4", "no <answer>"),
    ]:
        assert says in parse_column(reply_text).error


def test_seed_exact_in_any_process():
    assert_seed_exact(TARGET, {}, 3)
    assert_seed_exact(TARGET, {"difficulty": "hard", "render_mode": "vision+text"}, 7)


def test_hostile_replies_and_malformed_streams():
    assert_hostile_never_raise(build_env(TARGET), 0)
    assert_malformed_replies_end_at_the_cap(TARGET, 3)


def test_presets_and_their_levels():
    assert build_env(TARGET, difficulty="hard").config.engine_depth == 4
    for level, moves in (("easy", {1, 2}), ("medium", {2}), ("hard", {3})):
        env = build_env(TARGET, difficulty=level)
        assert {env.reset(seed=s)[1]["optimal_moves"] for s in range(12)} <= moves
    assert ConnectFourConfig().turn_limit == 21 and ConnectFourConfig(rows=4, cols=5).turn_limit == 10


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"min_win": 3, "max_win": 2}, "min_win 3 exceeds max_win 2"),
        ({"engine_depth": 1, "max_win": 3}, r"set engine_depth >= 3 or max_win <= 2"),
        ({"engine_depth": 4, "max_win": 4}, r"set engine_depth >= 5 or max_win <= 3"),
        ({"rows": 3}, "greater than or equal to 4"),
        ({"cols": 10}, "less than or equal to 9"),
    ],
)
def test_configs_the_generator_cannot_keep_are_refused(config, says):
    with pytest.raises(ValueError, match=says):
        build_env(TARGET, **config)


def test_random_replies_are_columns_and_the_oracle_is_stuck_only_off_its_line():
    env = build_env(TARGET)
    env.reset(seed=4)
    rng = random.Random(0)
    assert {parse_column(env.random_response(rng)).column for _ in range(200)} == set(range(7))
    assert env.oracle_rationale().startswith(("No column", "The engine", "Column"))
