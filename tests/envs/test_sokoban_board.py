"""Sokoban rules: moves, pushes, and the ASCII / slime-grid views of a level."""

import pytest

from vlm_envs.envs.sokoban.board import (
    LevelError,
    State,
    apply_move,
    boxes_on_target,
    from_slime_grid,
    is_solved,
    parse_level,
    replay,
    to_ascii,
    to_slime_grid,
)

U, D, L, R = range(4)


def test_walk_onto_floor_and_into_wall():
    layout, state = parse_level("#####\n#@ .#\n# $ #\n#####")
    moved = apply_move(layout, state, R)
    assert moved.moved and not moved.pushed and moved.state.player == state.player + 1
    blocked = apply_move(layout, state, U)
    assert not blocked.moved and blocked.state == state


def test_push_box_into_wall_is_blocked():
    layout, state = parse_level("#####\n# @ #\n# $ #\n# . #\n#####")
    two = replay(layout, state, "DD")
    assert to_ascii(layout, two) == "#####\n#   #\n# @ #\n# * #\n#####"
    third = apply_move(layout, two, D)  # the box is on the target, a wall lies behind it
    assert not third.moved and third.state == two


def test_push_box_into_box_is_blocked():
    layout, state = parse_level("######\n#@$$.#\n#   .#\n######")
    result = apply_move(layout, state, R)
    assert not result.moved and result.state == state


def test_push_onto_and_off_a_target():
    layout, state = parse_level("######\n#@$. #\n######")
    on = apply_move(layout, state, R)
    assert on.pushed and boxes_on_target(layout, on.state) == 1 and is_solved(layout, on.state)
    off = apply_move(layout, on.state, R)
    assert off.pushed and boxes_on_target(layout, off.state) == 0 and not is_solved(layout, off.state)
    assert to_ascii(layout, off.state) == "######\n#  +$#\n######"


def test_grid_edge_counts_as_wall():
    layout, state = parse_level("@$.")
    assert not apply_move(layout, state, L).moved
    assert not apply_move(layout, state, U).moved
    assert apply_move(layout, state, R).pushed


def test_ascii_round_trip_keeps_all_seven_symbols():
    text = "#######\n#. $* #\n# @   #\n#######"
    layout, state = parse_level(text)
    assert to_ascii(layout, state) == text
    on_target = "#####\n#+$ #\n#####"
    assert to_ascii(*parse_level(on_target)) == on_target


def test_short_lines_are_padded_with_floor():
    layout, state = parse_level("####\n#@$.#\n#####")
    assert (layout.rows, layout.cols) == (3, 5)
    assert to_ascii(layout, state).splitlines()[0] == "#### "


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("#$.#", "exactly one player"),
        ("#@@$.#", "exactly one player"),
        ("#@$$.#", "target"),
        ("#@ . #", "at least one box"),
        ("#@$.x#", "unknown symbol"),
    ],
)
def test_malformed_levels_are_rejected(text, message):
    with pytest.raises(LevelError, match=message):
        parse_level(text)


def test_slime_grid_round_trip():
    text = "######\n#@ $ #\n#  . #\n######"
    layout, state = parse_level(text)
    keys = to_slime_grid(layout, state)
    assert keys["initial_player"] == [1, 1] and keys["initial_boxes"] == [[1, 3]]
    assert keys["initial_base_grid"][2] == [0, 1, 1, 2, 1, 0]
    assert to_ascii(*from_slime_grid(**_slime_args(keys))) == text


def _slime_args(keys):
    return {
        "base_grid": keys["initial_base_grid"],
        "boxes": keys["initial_boxes"],
        "player": keys["initial_player"],
    }


def test_slime_grid_rejects_bad_positions_and_codes():
    grid = [[0, 0, 0, 0], [0, 1, 2, 0], [0, 0, 0, 0]]
    with pytest.raises(LevelError, match="outside"):
        from_slime_grid(grid, [[1, 2]], [5, 5])
    with pytest.raises(LevelError, match="codes"):
        from_slime_grid([[0, 7, 2, 0]], [[0, 2]], [0, 1])
    with pytest.raises(LevelError, match="player stands on a box"):
        from_slime_grid(grid, [[1, 1]], [1, 1])


def test_state_is_hashable_and_ordered():
    assert State(3, (5, 7)) == State(3, (5, 7))
    assert len({State(3, (5, 7)), State(3, (5, 7))}) == 1
