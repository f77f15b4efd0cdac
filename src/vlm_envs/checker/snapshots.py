"""The check of snapshots: an episode snapshot at several turns, finished included, and restored in a fresh
env (in another process, with another ``PYTHONHASHSEED``, when the rebuild check runs) goes on exactly as
the uninterrupted episode: observations (image bytes included), rewards, ends, metrics, episode reward.

``python -m vlm_envs.checker.snapshots`` is the other process.
"""

from __future__ import annotations

import json
import pickle
import random
import sys
from typing import Any

from vlm_envs.checker.calls import error_text, image_digest
from vlm_envs.checker.replay import last_error_line, rebuild_spec, run_other_process
from vlm_envs.protocol import Env, Observation, StepInfo

#: The turns an episode is snapshot at (those it reaches), besides its last one.
SNAPSHOT_TURNS = (0, 1, 3)
#: Replies before the oracle (where the env has one) plays the episode to its end.
RANDOM_TURNS = 4
#: The most steps the checked episode runs to reach its end.
MAX_TURNS = 1000
#: Steps compared after each restore.
COMPARED_STEPS = 3

_HINT = (
    "Make restore() give back the whole episode: the base class replays the seed, options and replies, so "
    "derive the episode from them alone; an env with its own snapshot_state() must hold every field its "
    "episode reads."
)

Case = tuple[int, str, list[str]]


def turn_record(env: Env, obs: Observation, step: tuple[bool, StepInfo] | None = None) -> dict[str, Any]:
    """What one turn showed and scored: the observation's fields, the step's, and the episode reward."""
    record: dict[str, Any] = {
        "role": obs.role,
        "text": obs.text,
        "image_slots": list(obs.image_slots),
        "images": [image_digest(im) for im in obs.images],
    }
    if step is not None:
        done, info = step
        record |= {
            "done": done,
            "reward": info.reward,
            "terminated": info.terminated,
            "truncated": info.truncated,
            "metrics": dict(info.metrics),
        }
    record["episode_reward"] = env.episode_reward()
    return record


def play_with_snapshots(env: Env, seed: int) -> tuple[list[dict[str, Any]], list[Case]]:
    """One episode played to its end (random replies, then the oracle's), its turns recorded, and the
    cases to restore: a snapshot (JSON text) at each of :data:`SNAPSHOT_TURNS` and the last turn, with
    the replies that followed it."""
    obs, _ = env.reset(seed=seed)
    records = [turn_record(env, obs)]
    snapshots = {0: json.dumps(env.snapshot())}
    rng, replies, done = random.Random(seed), [], False
    while not done and len(replies) < MAX_TURNS:
        oracle = env.oracle_response() if len(replies) >= RANDOM_TURNS else None
        replies.append(oracle if oracle is not None else env.random_response(rng))
        obs, done, info = env.step(replies[-1])
        records.append(turn_record(env, obs, (done, info)))
        if len(replies) in SNAPSHOT_TURNS or done:
            snapshots[len(replies)] = json.dumps(env.snapshot())
    snapshots.setdefault(len(replies), json.dumps(env.snapshot()))
    cases = [(turn, text, replies[turn : turn + COMPARED_STEPS]) for turn, text in snapshots.items()]
    return records, cases


def restored_records(env: Env, cases: list[Case]) -> list[dict[str, Any]]:
    """Per case, the turns of ``env`` restored from its snapshot and then given its replies; or the
    error the restore raised."""
    results: list[dict[str, Any]] = []
    for _, text, replies in cases:
        try:
            records = [turn_record(env, env.restore(json.loads(text)))]
            for reply in replies:
                obs, done, info = env.step(reply)
                records.append(turn_record(env, obs, (done, info)))
        except Exception as err:  # any failure of the env is the finding
            results.append({"error": error_text(err)})
            continue
        results.append({"records": records})
    return results


def check_snapshots(env: Env, seed: int, other_process: bool = True) -> list[str]:
    """Snapshots at several turns restore into a fresh env (in another process when ``other_process``;
    else into ``env`` itself) that goes on as the uninterrupted episode did."""
    try:
        records, cases = play_with_snapshots(env, seed)
    except Exception as err:
        return [f"snapshot() of an episode of seed={seed} raised {error_text(err)}. {_HINT}"]
    where = "in this process"
    if other_process:
        spec, how = rebuild_spec(env)
        proc = run_other_process("vlm_envs.checker.snapshots", (spec, cases))
        if proc.returncode != 0:
            return [f"Restoring snapshots into the env rebuilt from {how} failed ({last_error_line(proc)})."]
        results, where = json.loads(proc.stdout.decode().strip().splitlines()[-1]), "in another process"
    else:
        results = restored_records(env, cases)
    failures = []
    for (turn, _, _), result in zip(cases, results, strict=True):
        if "error" in result:
            failures.append(
                f"restore() of the snapshot at turn {turn} {where} raised {result['error']}. {_HINT}"
            )
        elif difference := first_difference(records[turn:], result["records"], turn):
            failures.append(f"The snapshot at turn {turn}, restored {where}, {difference}. {_HINT}")
    return failures


def first_difference(expected: list[dict[str, Any]], restored: list[dict[str, Any]], turn: int) -> str | None:
    """Where turns ``restored`` from the snapshot at ``turn`` first differ from the uninterrupted
    ``expected``: the turn and the field."""
    for offset, (want, got) in enumerate(zip(expected, restored, strict=False)):
        for field, value in got.items():
            if want.get(field) != value:
                which = "the observation restore() returned" if offset == 0 else "the next step"
                return (
                    f"differs at turn {turn + offset} ({which}) in {field!r}: {want.get(field)!r:.80} "
                    f"uninterrupted, {value!r:.80} restored"
                )
    return None


def snapshots_main() -> None:
    """Child side of the check: read (spec, cases), build the env, print the restored records as JSON."""
    spec, cases = pickle.loads(sys.stdin.buffer.read())
    env = spec.make()
    print(json.dumps(restored_records(env, cases)))
    env.close()


if __name__ == "__main__":
    snapshots_main()
