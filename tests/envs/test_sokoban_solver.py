"""The A* solver returns move-optimal solutions: checked against a plain breadth-first search."""

from collections import deque

import pytest

from vlm_envs.envs.sokoban import Difficulty, generate_level, solve
from vlm_envs.envs.sokoban.board import Layout, State, apply_move, is_solved, parse_level, replay, to_ascii
from vlm_envs.envs.sokoban.solver import Solver, solve_state


def bfs_optimal(layout: Layout, start: State, limit: int = 400_000) -> int | None:
    """Fewest moves by breadth-first search over every (player, boxes) state."""
    dist = {start: 0}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if is_solved(layout, state):
            return dist[state]
        for d in range(4):
            nxt = apply_move(layout, state, d).state
            if nxt not in dist:
                dist[nxt] = dist[state] + 1
                queue.append(nxt)
        assert len(dist) < limit, "test level too large for the reference search"
    return None


LEVELS = [
    "#######\n#     #\n# $ . #\n#  @  #\n#######",
    "##########\n#      . #\n# $  # # #\n#  # $ $.#\n###   .@ #\n##########",
    "#######\n#.@ # #\n#$* $ #\n#   $ #\n# ..  #\n#  *  #\n#######",
]


@pytest.mark.parametrize("text", LEVELS)
def test_solution_is_valid_and_as_short_as_bfs(text):
    layout, state = parse_level(text)
    moves = solve(text)
    assert moves is not None and set(moves) <= set("UDLR")
    assert is_solved(layout, replay(layout, state, moves))
    assert len(moves) == bfs_optimal(layout, state)


def test_generated_levels_match_bfs_optimum():
    for seed in range(12):
        level = generate_level(Difficulty(rows=7, cols=7, num_boxes=2), seed)
        assert level.optimal_exact
        assert level.optimal_moves == bfs_optimal(level.layout, level.state), to_ascii(
            level.layout, level.state
        )


def test_already_solved_level_needs_no_moves():
    assert solve("#####\n#@* #\n#####") == ""


def test_unsolvable_level_returns_none_and_is_complete():
    text = "#####\n#$  #\n#  .#\n# @ #\n#####"  # the box sits in a corner
    assert solve(text) is None
    layout, state = parse_level(text)
    result = solve_state(layout, state)
    assert result.moves is None and result.complete
    assert bfs_optimal(layout, state) is None


def test_node_budget_stops_the_search_without_a_claim():
    layout, state = parse_level(LEVELS[2])
    result = Solver(layout).solve(state, max_nodes=3)
    assert result.moves is None and not result.complete and result.nodes > 3


def test_lower_bound_never_exceeds_the_optimum():
    for text in LEVELS:
        layout, state = parse_level(text)
        assert Solver(layout).lower_bound(state) <= len(solve(text))
