"""make-sft as a whole: seed-exact bytes, a manifest that tells the truth, and ``--from`` keeping
exactly the episodes over ``--min-reward`` (the folder's safety: test_folder.py; hostile runs:
test_hostile_runs.py)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

from vlm_envs.sft import OracleSource, RunSource, SftError, make_sft


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("fmt", ["trl", "llamafactory", "swift"])
def test_same_arguments_write_the_same_bytes_and_the_manifest_lists_them(tmp_path: Path, fmt: str) -> None:
    source = OracleSource(("sokoban",), 3, seed=5, max_turns=12)
    first = make_sft(source, tmp_path / "a", fmt=fmt)
    make_sft(source, tmp_path / "b", fmt=fmt)
    a, b = _digests(tmp_path / "a"), _digests(tmp_path / "b")
    assert a == b  # image paths are relative: no file names its own folder
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest == first.manifest
    files = _digests(tmp_path / "a")
    assert manifest["files"] == {k: v for k, v in files.items() if k != "manifest.json"}
    entry = manifest["envs"]["sokoban"]
    assert entry["kept_seeds"] == [5, 6, 7] and entry["episodes"] == 3 and entry["source_success_rate"] == 1.0
    assert manifest["source"] == {
        "kind": "oracle",
        "seeds": [5, 7],
        "max_turns": 12,
        "rationale": False,
        "kept": "successes",
    }
    assert manifest["made_by"] == "vlm-envs make-sft" and manifest["failed"] == 0


def test_mixed_envs_and_bad_requests(tmp_path: Path) -> None:
    files = make_sft(OracleSource(("sokoban", "jigsaw"), 2), tmp_path / "mixed", fmt="llamafactory")
    assert sorted(files.manifest["envs"]) == ["jigsaw", "sokoban"]
    assert files.conversations == 4
    with pytest.raises(SftError, match="sokoban named twice"):
        OracleSource(("sokoban", "jigsaw", "sokoban"), 2)
    with pytest.raises(SftError, match="one env"):
        OracleSource(("sokoban", "jigsaw"), 2, env_config={"num_boxes": 1})
    with pytest.raises(SftError, match="-n"):
        OracleSource(("sokoban",), 0)
    with pytest.raises(SftError, match="--seed"):
        OracleSource(("sokoban",), 2, seed=-1)
    with pytest.raises(SftError, match="--format"):
        make_sft(OracleSource(("sokoban",), 1), tmp_path / "x", fmt="alpaca")
    with pytest.raises(SftError, match="window"):
        make_sft(OracleSource(("sokoban",), 1), tmp_path / "x", history="window:-1")


@pytest.fixture(scope="module")
def random_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ``vlm-envs eval`` folder with wins and losses: the oracle, cut to two turns, loses the
    Sokoban levels that need more moves."""
    out = tmp_path_factory.mktemp("eval") / "run"
    subprocess.run(
        [sys.executable, "-m", "vlm_envs.cli", "eval", "sokoban", "--policy", "oracle", "--max-turns", "2",
         "-n", "16", "--out", str(out), "--quiet"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return out


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


def test_from_a_run_keeps_exactly_the_episodes_over_min_reward(random_run: Path, tmp_path: Path) -> None:
    records = _records(random_run)
    wins = sorted(r["seed"] for r in records if r["success"])
    assert 0 < len(wins) < len(records), "the run should hold wins and losses"
    files = make_sft(RunSource(random_run), tmp_path / "wins", fmt="swift")
    assert files.manifest["envs"]["sokoban"]["kept_seeds"] == wins
    files = make_sft(RunSource(random_run), tmp_path / "wins-trl", fmt="trl")
    assert files.rows == files.conversations == len(wins)  # exactly the winning episodes, one row each
    rows = datasets.load_dataset("parquet", data_files=str(tmp_path / "wins-trl" / "train.parquet"))["train"]
    assert rows["seed"] == wins
    assert files.manifest["envs"]["sokoban"]["source_success_rate"] == len(wins) / len(records)
    over = sorted(r["seed"] for r in records)  # every reward is >= 0
    files = make_sft(RunSource(random_run, min_reward=0.0), tmp_path / "over", fmt="llamafactory")
    assert files.manifest["envs"]["sokoban"]["kept_seeds"] == over
    # the replies are the model's, as recorded
    data = json.loads((tmp_path / "over" / "data.json").read_text())
    recorded = {r["seed"]: [t["model_text"] for t in r["turns"][1:]] for r in records}
    for seed, record in zip(over, data, strict=True):
        assert [m["content"] for m in record["messages"] if m["role"] == "assistant"] == recorded[seed]


def test_a_record_the_env_does_not_replay_is_refused(random_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_bytes((random_run / "run.json").read_bytes())
    records = _records(random_run)
    records[0]["turns"][0]["observation"]["text"] = "another task"
    records[0]["success"], records[0]["status"] = True, "completed"
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(SftError, match="differs from the recorded one"):
        make_sft(RunSource(run), tmp_path / "out")
    with pytest.raises(SftError, match=r"run\.json"):
        make_sft(RunSource(tmp_path), tmp_path / "out2")
