"""Sokoban data: Boxoban files, slime-processed rows, training rows and their parquet round trip."""

import base64
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vlm_envs import build_env
from vlm_envs.data.sokoban import (
    generated_rows,
    level_from_row,
    load_boxoban,
    load_slime_levels,
    parse_boxoban,
    rows_for_levels,
    write_parquet,
)
from vlm_envs.envs.sokoban.board import is_solved, parse_level, replay

BOXOBAN_FILE = """; 0
#######
#     #
# $ . #
#  @  #
#######

; 1
######
#@$. #
#    #
######
"""


def test_parse_boxoban_blocks():
    levels = parse_boxoban(BOXOBAN_FILE)
    assert levels == [
        "#######\n#     #\n# $ . #\n#  @  #\n#######",
        "######\n#@$. #\n#    #\n######",
    ]
    for level in levels:
        parse_level(level)


def test_load_boxoban_from_a_folder(tmp_path):
    (tmp_path / "b.txt").write_text(BOXOBAN_FILE)
    (tmp_path / "a.txt").write_text("; 0\n#####\n#@$.#\n#####\n")
    levels = load_boxoban(tmp_path)
    assert len(levels) == 3 and levels[0] == "#####\n#@$.#\n#####"
    assert load_boxoban(tmp_path / "b.txt") == levels[1:]


def test_generated_rows_reproduce_the_first_observation():
    rows = generated_rows(3, seed=10, grid_size=(7, 7), num_boxes=2, max_steps=60)
    for i, row in enumerate(rows):
        meta = row["metadata"]
        assert meta["env"] == "sokoban" and meta["seed"] == 10 + i
        assert row["prompt"].count("<image>") == 1 and len(row["images"]) == 1
        assert row["optimal_moves"] == meta["env_config"]["optimal_moves"] == len(meta["solution"])
        assert "grid_size" not in meta["env_config"] and meta["env_config"]["max_steps"] == 60
        env = build_env("vlm_envs.envs.sokoban", sample=row)
        obs, info = env.reset(seed=0)
        assert obs.to_dict()["obs_str"] == row["prompt"] and info["optimal_moves"] == row["optimal_moves"]
        assert base64.b64decode(row["images"][0].split(",", 1)[1]) == env.frame_png()
        layout, start = parse_level(info["level"])
        assert is_solved(layout, replay(layout, start, meta["solution"]))


def test_rows_for_levels_in_text_mode():
    rows = rows_for_levels(parse_boxoban(BOXOBAN_FILE), render_mode="text")
    assert [r["optimal_moves"] for r in rows] == [5, 1]
    assert rows[0]["images"] == [] and "# $ . #" in rows[0]["prompt"]
    assert rows[1]["metadata"]["env_config"] == {
        "render_mode": "text",
        "level": "######\n#@$. #\n#    #\n######",
        "optimal_moves": 1,
        "optimal_exact": True,
    }


def test_parquet_round_trip(tmp_path):
    rows = generated_rows(2, seed=0)
    path = write_parquet(rows, tmp_path / "out" / "train.parquet")
    back = pq.read_table(str(path)).to_pylist()
    assert [r["prompt"] for r in back] == [r["prompt"] for r in rows]
    assert back[0]["metadata"]["env_config"]["level"] == rows[0]["metadata"]["env_config"]["level"]
    assert load_slime_levels(path) == [r["metadata"]["env_config"]["level"] for r in rows]
    slime_style = write_parquet(rows, tmp_path / "extra.parquet", metadata_key="extra_info")
    assert "extra_info" in pq.read_schema(str(slime_style)).names
    assert load_slime_levels(slime_style) == load_slime_levels(path)


def test_slime_processed_rows_load(tmp_path):
    env_config = {
        "grid_size": [4, 6],
        "num_boxes": 1,
        "render_mode": "vision",
        "max_steps": 100,
        "wall_fraction": 0.0,
        "initial_base_grid": [[0] * 6, [0, 1, 1, 1, 1, 0], [0, 1, 1, 1, 2, 0], [0] * 6],
        "initial_boxes": [[2, 2]],
        "initial_player": [2, 1],
    }
    path = tmp_path / "slime.parquet"
    pq.write_table(
        pa.Table.from_pylist([{"prompt": "<image>", "extra_info": {"env_config": env_config}}]), path
    )
    assert load_slime_levels(path) == ["######\n#    #\n#@$ .#\n######"]
    row = pq.read_table(str(path)).to_pandas().iloc[0].to_dict()  # numpy arrays, as slime's loader gives
    assert level_from_row(row) == "######\n#    #\n#@$ .#\n######"
    env = build_env("sokoban", sample=SimpleNamespace(metadata=row["extra_info"]))
    assert env.reset()[1]["optimal_moves"] == 2


def test_rows_without_env_config_are_rejected():
    with pytest.raises(ValueError, match="no env_config"):
        level_from_row({"prompt": "x", "metadata": {"env": "sokoban"}})
    with pytest.raises(ValueError, match="no fixed level"):
        level_from_row({"metadata": {"env_config": {"grid_size": [6, 6]}}})
