"""``vlm-envs eval`` records where every reply stood, for every registered env: the state's key and
distance before the reply and the distance after, as the env says in this process; the summary and the
page report the share of optimal replies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from standing_helpers import STANDING, oracle_standings

from vlm_envs import list_envs
from vlm_envs.cli import main

SEED = 5


@pytest.mark.parametrize("env", [spec.name for spec in list_envs()])
def test_the_oracles_replies_are_recorded_where_they_stood(env: str, tmp_path: Path) -> None:
    out = tmp_path / env
    assert (
        main(
            ["eval", env, "--policy", "oracle", "-n", "1", "--seed", str(SEED), "--out", str(out), "--quiet"]
        )
        == 0
    )
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert record["status"] == "completed" and record["success"], record["error"]
    expected = oracle_standings(env, SEED)
    replies = record["turns"][1:]
    assert [{k: t[k] for k in STANDING} for t in replies] == expected
    assert all(t["state_key"] is not None for t in replies)  # every bundled env keys its states
    summary = json.loads((out / "summary.json").read_text())
    known = [e["action_optimal"] for e in expected if e["action_optimal"] is not None]
    if known:  # an env with a distance: the oracle is optimal at every reply, and the page says so
        assert all(known) and summary["action_optimal_rate"] == 1.0
        assert summary["action_optimal_turns"] == len(known) and replies[-1]["next_distance_to_goal"] == 0
        assert f"100.0% of {len(known)} replies lowered the distance" in (out / "index.html").read_text()
    else:
        assert summary["action_optimal_rate"] is None and summary["action_optimal_turns"] == 0


def test_a_random_players_replies_are_judged(tmp_path: Path) -> None:
    """Random Sokoban moves: some replies are not optimal, and the summary's share counts them."""
    out = tmp_path / "random"
    argv = [
        "eval",
        "sokoban",
        "--policy",
        "random",
        "-n",
        "4",
        "--max-turns",
        "4",
        "--out",
        str(out),
        "--quiet",
    ]
    assert main(argv) == 0
    turns = [
        t for line in (out / "results.jsonl").read_text().splitlines() for t in json.loads(line)["turns"][1:]
    ]
    judged = [t["action_optimal"] for t in turns if t["action_optimal"] is not None]
    summary = json.loads((out / "summary.json").read_text())
    assert judged and not all(judged)
    assert summary["action_optimal_rate"] == pytest.approx(sum(judged) / len(judged))
