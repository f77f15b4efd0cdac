"""Curricula: ``make-dataset --difficulty`` mixes levels by share or orders them easy to hard, each row
records its level for every trainer's layout, the plan is deterministic by seed, and each row is the
episode of its own level."""

from __future__ import annotations

import io
import json
import pickle
from pathlib import Path
from typing import Any

import datasets
import pytest
from PIL import Image

from vlm_envs import build_env
from vlm_envs.cli import main
from vlm_envs.datasets.curriculum import Curriculum, parse_curriculum
from vlm_envs.envs.config import LEVELS
from vlm_envs.episode_carrier import find
from vlm_envs.rollout.rows import RowSpec

MIX = "easy:0.4,medium:0.3,hard:0.3"
N, SEED = 9, 5


def test_a_mix_gives_each_level_its_share_exactly_in_an_order_drawn_from_the_seed():
    mix = parse_curriculum("easy:0.5,medium:0.3,hard:0.2")
    assert mix == Curriculum((("easy", 0.5), ("medium", 0.3), ("hard", 0.2)))
    for n in (1, 7, 10, 101):
        counts = mix.counts(n)
        assert sum(counts.values()) == n
        assert all(abs(counts[level] - share * n) < 1 for level, share in mix.shares)
    plan = list(mix.plan(100, seed=0))
    assert [plan.count(level) for level in LEVELS] == [50, 30, 20]
    assert plan == list(mix.plan(100, seed=0)) and plan != list(mix.plan(100, seed=1))
    assert plan != sorted(plan, key=LEVELS.index)  # mixed, not in blocks


def test_a_rows_level_comes_from_its_index_alone_so_no_list_of_levels_is_held():
    mix = parse_curriculum("easy:0.5,medium:0.3,hard:0.2")
    for n in (1, 2, 3, 17, 64, 257):  # a permutation of the positions: exact counts for every n
        plan = mix.plan(n, seed=n)
        assert [list(plan).count(level) for level in LEVELS] == [mix.counts(n)[lv] for lv in LEVELS]
    huge = mix.plan(10**12, seed=7)  # a typo'd -n costs nothing until rows are built
    assert len(pickle.dumps(huge)) < 400 and huge[10**12 - 1] in LEVELS
    shard = [huge[i] for i in range(5000, 5100)]  # a Ray shard computes its own range
    assert shard == [mix.plan(10**12, seed=7)[i] for i in range(5000, 5100)]
    with pytest.raises(IndexError):
        huge[10**12]


def test_a_schedule_orders_rows_from_easy_to_hard():
    assert (
        list(parse_curriculum("schedule:easy..hard").plan(7, seed=3))
        == ["easy"] * 3 + ["medium"] * 2 + ["hard"] * 2
    )
    assert list(parse_curriculum("schedule:medium..hard").plan(4, seed=0)) == ["medium"] * 2 + ["hard"] * 2
    shares = list(parse_curriculum("schedule:hard:0.25,easy:0.75").plan(4, seed=9))
    assert shares == ["easy", "easy", "easy", "hard"]
    assert list(parse_curriculum("hard").plan(3, seed=0)) == ["hard"] * 3


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("extreme", "'extreme' is not a level"),
        ("easy:0.5,hard:0.4", "sum to 0.9, not 1"),
        ("easy:0.5,easy:0.5", "names 'easy' twice"),
        ("easy:nan,hard:1", "share of 'easy' must be a number"),
        ("easy:0,hard:1", "share of 'easy' must be a number"),
        ("easy:-1,hard:2", "share of 'easy'"),
        ("schedule:hard..easy", "from easier to harder"),
        ("schedule:easy..", "'' is not a level"),
        ("", "'' is not a level"),
    ],
)
def test_a_bad_spec_is_a_value_error_saying_why(spec, says):
    with pytest.raises(ValueError, match=says):
        parse_curriculum(spec)


def images_of(row_images: list[dict[str, Any]]) -> list[bytes]:
    return [Image.open(io.BytesIO(im["bytes"])).convert("RGB").tobytes() for im in row_images]


def episodes(trainer: str, path: Path) -> list[tuple[int, str, list[bytes]]]:
    """``(seed, level, images)`` of each row, read as the trainer's own path reads the row's episode."""
    rows = datasets.Dataset.from_parquet(str(path)).cast_column(
        "images", datasets.Sequence(datasets.Image(decode=False))
    )
    read = []
    for row in rows:
        if trainer == "trl":
            spec = find(row["prompt"])
            seed, config = spec.seed, dict(spec.env_config)
        else:
            spec = RowSpec.of(row["metadata" if trainer == "slime" else "extra_info"])
            assert spec.generated
            seed, config = spec.seed, spec.build_inputs(None)[1]
        assert set(config) == {"difficulty"}
        read.append((seed, config["difficulty"], images_of(row["images"])))
    return read


@pytest.mark.parametrize("trainer", ["slime", "verl", "trl"])
def test_make_dataset_mixes_levels_and_each_row_is_the_episode_of_its_level(trainer, tmp_path, capsys):
    out = tmp_path / "train.parquet"
    args = ["make-dataset", "sokoban", "-n", str(N), "--seed", str(SEED), "--trainer", trainer]
    assert main([*args, "--out", str(out), "--difficulty", MIX]) == 0, capsys.readouterr().err
    rows = episodes(trainer, out)
    plan = list(parse_curriculum(MIX).plan(N, SEED))
    assert [(seed, level) for seed, level, _ in rows] == list(zip(range(SEED, SEED + N), plan, strict=True))
    env = {level: build_env("sokoban", difficulty=level) for level in LEVELS}
    for seed, level, images in rows:
        obs, _ = env[level].reset(seed=seed)
        assert images == [im.convert("RGB").tobytes() for im in obs.images], (seed, level)
    pixels = {level: [len(im[0]) for _, lv, im in rows if lv == level] for level in LEVELS}
    assert max(pixels["easy"]) < min(pixels["hard"])  # a 5x5 board against an 8x8 one

    again = tmp_path / "again.parquet"
    assert main([*args, "--out", str(again), "--difficulty", MIX]) == 0
    assert episodes(trainer, again) == rows  # deterministic by seed


@pytest.mark.parametrize("trainer", ["slime", "verl", "trl"])
def test_make_dataset_schedule_orders_rows_easy_to_hard(trainer, tmp_path, capsys):
    out = tmp_path / "train.parquet"
    args = ["make-dataset", "jigsaw", "-n", "6", "--trainer", trainer, "--out", str(out)]
    assert main([*args, "--difficulty", "schedule:easy..hard"]) == 0, capsys.readouterr().err
    levels = [level for _, level, _ in episodes(trainer, out)]
    assert levels == ["easy", "easy", "medium", "medium", "hard", "hard"]


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--difficulty", "easy:0.5,hard:0.6"], "sum to 1.1, not 1"),
        (["--difficulty", "brutal"], "'brutal' is not a level"),
        (["--difficulty", "hard", "--config", "difficulty=easy"], "not both"),
    ],
)
def test_make_dataset_refuses_a_bad_curriculum_in_one_line(extra, says, tmp_path, capsys):
    out = tmp_path / "train.parquet"
    assert main(["make-dataset", "sokoban", "-n", "3", "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err and "Traceback" not in err
    assert not out.exists()


def test_geo3k_slime_rows_with_a_curriculum_are_seeded_episodes_of_their_level(tmp_path, capsys):
    out = tmp_path / "train.parquet"
    args = ["make-dataset", "geo3k", "-n", "4", "--out", str(out), "--difficulty", "schedule:easy..hard"]
    assert main(args) == 0, capsys.readouterr().err
    rows = datasets.Dataset.from_parquet(str(out))
    metadata = [json.loads(json.dumps(row["metadata"])) for row in rows]
    assert [m["env_config"]["difficulty"] for m in metadata] == ["easy", "easy", "medium", "hard"]
    for m in metadata:  # built from the row alone: the level's kinds
        env = build_env("geo3k", **m["env_config"])
        _, info = env.reset(seed=m["seed"])
        assert info["kind"] in env.PRESETS[m["env_config"]["difficulty"]]["kinds"]


def test_eval_takes_a_level_as_config_and_its_summary_reports_success_per_level(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["eval", "sokoban", "--policy", "oracle", "-n", "3", "--config", "difficulty=hard", "--quiet"]
    assert main([*args, "--out", str(out)]) == 0, capsys.readouterr().err
    assert "success by difficulty: hard 100.0% of 3\n" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["by_difficulty"] == {
        "hard": {"episodes": 3, "successes": 3, "success_rate": 1.0, "success_ci95": summary["success_ci95"]}
    }
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {tuple(r["reset_info"]["grid_size"]) for r in records} == {(8, 8)}  # the hard preset's board
    assert main(["eval", "sokoban", "--policy", "oracle", "-n", "1", "--config", "difficulty=brutal"]) == 2
    assert "difficulty must be one of" in capsys.readouterr().err


def test_eval_takes_make_datasets_mixes_each_episode_the_seed_of_its_level(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["eval", "sokoban", "--policy", "oracle", "-n", str(N), "--seed", str(SEED), "--quiet"]
    assert main([*args, "--difficulty", MIX, "--out", str(out)]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "success by difficulty: easy 100.0% of 3, medium 100.0% of 3, hard 100.0% of 3" in printed
    plan = list(parse_curriculum(MIX).plan(N, SEED))  # the rows make-dataset would write, in order
    records = sorted(
        (json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()),
        key=lambda r: r["episode"],
    )
    assert [(r["seed"], r["reset_info"]["difficulty"]) for r in records] == list(
        zip(range(SEED, SEED + N), plan, strict=True)
    )
    for record in records:  # each episode is that seed's episode of its level
        _, info = build_env("sokoban", difficulty=record["reset_info"]["difficulty"]).reset(
            seed=record["seed"]
        )
        assert record["reset_info"]["level"] == info["level"], record["seed"]
    assert json.loads((out / "run.json").read_text())["difficulty"] == MIX
    assert main([*args, "--difficulty", "hard", "--out", str(out), "--resume"]) == 2  # not the same run
    assert "difficulty differ" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("env", "extra", "says"),
    [
        ("sokoban", ["--difficulty", "easy:0.5,hard:0.6"], "sum to 1.1, not 1"),
        ("sokoban", ["--difficulty", "brutal"], "'brutal' is not a level"),
        ("sokoban", ["--difficulty", "hard", "--config", "difficulty=easy"], "not both"),
        ("toyenvs.colors", ["--difficulty", "easy:0.5,hard:0.5"], "difficulty"),  # an env without levels
    ],
)
def test_eval_refuses_a_bad_curriculum_in_one_line(env, extra, says, tmp_path, capsys):
    assert main(["eval", env, "--policy", "random", "-n", "3", "--out", str(tmp_path / "r"), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err and "Traceback" not in err, err


def test_summary_groups_episodes_by_their_level_easiest_first():
    from vlm_envs.eval.summary import summarize

    records = [
        {"success": True, "reset_info": {"difficulty": "hard"}},
        {"success": False, "reset_info": {"difficulty": "hard"}},
        {"success": True, "reset_info": {"difficulty": "easy"}},
        {"success": True, "reset_info": {}},  # the run's level
        {"success": True, "reset_info": {"difficulty": ["hostile"]}},  # not a level: counted in none
    ]
    levels = summarize(records, {"env_config": {"difficulty": "medium"}})["by_difficulty"]
    assert list(levels) == ["easy", "medium", "hard"]
    assert [(v["episodes"], v["successes"]) for v in levels.values()] == [(1, 1), (1, 1), (2, 1)]
    assert levels["hard"]["success_rate"] == 0.5 and 0 < levels["hard"]["success_ci95"][0] < 0.5
    assert summarize(records[2:3])["by_difficulty"] == {
        "easy": summarize(records[2:3])["by_difficulty"]["easy"]
    }
    assert summarize([{"success": True}])["by_difficulty"] == {}
