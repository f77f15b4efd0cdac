"""Geo3k data: local parquet files in the hub's and slime's schemas, and slime-ready parquet output."""

import io

import datasets
import pyarrow.parquet as pq
import pytest
from PIL import Image

from vlm_envs import build_env
from vlm_envs.data.geo3k import generated_problems, load_problems, load_rows, slime_rows, write_slime_parquet
from vlm_envs.envs.geo3k import Geo3kEnv

HIYOUGA_FEATURES = datasets.Features(
    {
        "images": datasets.Sequence(datasets.Image()),
        "problem": datasets.Value("string"),
        "answer": datasets.Value("string"),
        "id": datasets.Value("int64"),
        "choices": datasets.Sequence(datasets.Value("string")),
        "ground_truth": datasets.Value("string"),
    }
)
TOOL_PROMPT = (
    ' Check answers with <tool_call>{"name": "calc_score", "arguments": {"answer": "..."}}</tool_call>.'
)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def diagram(shade: int) -> Image.Image:
    return Image.new("RGB", (28, 28), (shade, shade, shade))


def hiyouga_rows(n: int, split: str) -> dict:
    return {
        "images": [[diagram(10 * i)] for i in range(n)],
        "problem": [f"<image>Find x in figure {split}-{i}." for i in range(n)],
        "answer": [str(3 + i) for i in range(n)],
        "id": list(range(n)),
        "choices": [[str(3 + i), "1", "2", "4"] for i in range(n)],
        "ground_truth": ["A"] * n,
    }


def write_hub_layout(root, splits=("train", "test"), n=4):
    for split in splits:
        (root / "data").mkdir(parents=True, exist_ok=True)
        table = datasets.Dataset.from_dict(hiyouga_rows(n, split), features=HIYOUGA_FEATURES)
        table.to_parquet(str(root / "data" / f"{split}-00000-of-00001.parquet"))
    return root


def test_load_hiyouga_schema_from_a_local_hub_layout(tmp_path):
    root = write_hub_layout(tmp_path / "geometry3k")
    problems = load_problems(root, split="test")
    assert [p.text for p in problems] == [f"<image>Find x in figure test-{i}." for i in range(4)]
    assert [p.answer for p in problems] == ["3", "4", "5", "6"]
    assert problems[2].images[0].getpixel((0, 0)) == (20, 20, 20)
    assert problems[0].source == "geometry3k" and problems[1].id == "1"
    assert len(load_problems(root, split="train", limit=2)) == 2


def test_rows_build_envs_for_their_problem(tmp_path):
    root = write_hub_layout(tmp_path / "geometry3k", splits=("train",))
    row = load_rows(root, split="train")[1]
    env = build_env("geo3k", sample=row)
    obs, info = env.reset()
    assert info["ground_truth"] == "4" and obs.to_dict()["obs_str"].startswith(
        "<image>Find x in figure train-1."
    )
    assert obs.images[0].getpixel((0, 0)) == (10, 10, 10)
    assert env.step("\\boxed{4}")[2].reward == 1.0


def test_env_over_a_dataset_picks_rows_by_seed(tmp_path):
    root = write_hub_layout(tmp_path / "geometry3k", splits=("train",))
    env = build_env("geo3k", dataset=str(root), split="train", max_turns=2)
    assert [env.reset(seed)[1]["ground_truth"] for seed in (0, 1, 5)] == ["3", "4", "4"]
    assert env.max_turns == 2


def test_slime_processed_layout_keeps_its_tool_prompt(tmp_path):
    root = tmp_path / "geo3k_imgurl_processed"
    root.mkdir()
    rows = {"images": [[diagram(5)]], "problem": ["<image>Find x." + TOOL_PROMPT], "answer": ["2\\sqrt{3}"]}
    features = datasets.Features({k: HIYOUGA_FEATURES[k] for k in rows})
    datasets.Dataset.from_dict(rows, features=features).to_parquet(str(root / "train.parquet"))
    (problem,) = load_problems(root)
    env = Geo3kEnv(problem=problem)
    obs, _ = env.reset()
    assert obs.to_dict()["obs_str"] == "<image>Find x." + TOOL_PROMPT


def test_missing_split_is_a_clear_error(tmp_path):
    root = write_hub_layout(tmp_path / "geometry3k", splits=("train",))
    with pytest.raises(FileNotFoundError, match="validation"):
        load_rows(root, split="validation")


def test_write_slime_parquet_round_trip(tmp_path):
    problems = generated_problems(6, seed=100, image_size=112)
    path = write_slime_parquet(problems, tmp_path / "out" / "train.parquet", max_turns=4)
    table = pq.read_table(path)
    assert {"problem", "images", "answer", "metadata"} <= set(table.column_names)
    rows = table.to_pylist()
    assert [r["answer"] for r in rows] == [p.answer for p in problems]
    for row, problem in zip(rows, problems, strict=True):
        assert row["problem"].count("<image>") == len(row["images"]) == 1
        assert "calc_score" in row["problem"] and "4 replies" in row["problem"]
        png = Image.open(io.BytesIO(row["images"][0]["bytes"]))
        assert png.format == "PNG" and png.convert("RGB").tobytes() == problem.images[0].tobytes()
        assert row["metadata"]["env"] == "geo3k" and row["metadata"]["env_config"] == {"max_turns": 4}
        assert row["metadata"]["tools"] == Geo3kEnv.tools()
    loaded = load_rows(path)
    env = build_env("geo3k", sample=loaded[0])
    obs, info = env.reset()
    assert obs.to_dict()["obs_str"] == rows[0]["problem"] and env.max_turns == 4
    assert env.step(f"\\boxed{{{info['ground_truth']}}}")[2].reward == 1.0


def test_slime_rows_prompt_is_the_envs_first_observation():
    (problem,) = generated_problems(1, seed=7)
    (row,) = slime_rows([problem], max_turns=3)
    obs, _ = Geo3kEnv(problem=problem, max_turns=3).reset()
    assert row["problem"] == obs.to_dict()["obs_str"]


def test_write_refuses_an_empty_set(tmp_path):
    with pytest.raises(ValueError, match="no problems"):
        write_slime_parquet([], tmp_path / "x.parquet")
