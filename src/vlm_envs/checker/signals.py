"""The check of where an episode stands (:mod:`vlm_envs.state_signals`): ``state_key()``, ``state_text()``
and ``distance_to_goal()`` are of the protocol's types; the same episode gives the same keys, texts and
distances in another process; equal keys come with equal texts and distances; some state comes back at
another turn (a malformed reply changes nothing in most envs, so a key that counts turns shows); and each
of the oracle's turns lowers the distance by exactly one, down to 0.

``python -m vlm_envs.checker.signals`` is the other process.
"""

from __future__ import annotations

import json
import pickle
import random
import sys
from typing import Any

from vlm_envs.checker.calls import MALFORMED_REPLY, MAX_STEPS_TO_END, error_text
from vlm_envs.checker.replay import last_error_line, rebuild_spec, run_other_process
from vlm_envs.protocol import Env
from vlm_envs.state_signals import UNREACHABLE

#: Episodes played (seeds ``seed`` on), and the most replies each: a malformed reply, a random one, again.
SIGNAL_SEEDS = 3
SIGNAL_TURNS = 8
#: Episodes the oracle plays to check that each of its turns lowers the distance by one.
DISTANCE_SEEDS = 2

#: One turn's signals: the turn, the key, the text and the distance.
Record = tuple[int, Any, Any, Any]
Case = tuple[int, list[str]]

_KEY_HINT = (
    "Build the key and the text from the state alone (board, positions, hidden cells, what was revealed), "
    "never from the turn number, a budget left or the history."
)


def signals(env: Env) -> tuple[Any, Any, Any]:
    """The env's ``state_key()``, ``state_text()`` and ``distance_to_goal()`` now."""
    return env.state_key(), env.state_text(), env.distance_to_goal()


def gives_signals(env: Env) -> bool:
    """Whether ``env`` says anything of where its episode stands now; one that raises from a signal
    method says something (the check then reports the raise)."""
    try:
        return any(value is not None for value in signals(env))
    except Exception:
        return True


def play(env: Env, seed: int, replies: list[str] | None = None) -> tuple[list[str], list[Record]]:
    """One episode of ``replies`` (else malformed and random ones in turn, :data:`SIGNAL_TURNS` at most)
    and its signals at every turn, reset included."""
    env.reset(seed=seed)
    records: list[Record] = [(0, *signals(env))]
    rng, played = random.Random(seed), []
    for turn in range(1, (SIGNAL_TURNS if replies is None else len(replies)) + 1):
        if replies is None:
            reply = MALFORMED_REPLY if turn % 2 else env.random_response(rng)
        else:
            reply = replies[turn - 1]
        played.append(reply)
        _, done, _ = env.step(reply)
        records.append((turn, *signals(env)))
        if done:
            break
    return played, records


def type_errors(records: list[Record]) -> list[str]:
    """What in ``records`` is not of the protocol's types."""
    failures = []
    for turn, key, text, distance in records:
        if not (key is None or (isinstance(key, str) and key)):
            failures.append(f"state_key() gave {key!r:.60} at turn {turn}: give a non-empty str or None.")
        if not (text is None or isinstance(text, str)):
            failures.append(f"state_text() gave a {type(text).__name__} at turn {turn}: give a str or None.")
        if not (distance is None or (type(distance) is int and (distance >= 0 or distance == UNREACHABLE))):
            failures.append(
                f"distance_to_goal() gave {distance!r:.60} at turn {turn}: give an int >= 0, UNREACHABLE "
                f"({UNREACHABLE}) where the goal cannot be reached, or None."
            )
    return failures[:3]


def clashes(records: list[Record]) -> list[str]:
    """Keys met twice with another text or distance."""
    first: dict[str, Record] = {}
    failures = []
    for record in records:
        key = record[1]
        if key is None:
            continue
        seen = first.setdefault(key, record)
        for index, what in ((2, "text"), (3, "distance")):
            if seen[index] != record[index]:
                failures.append(
                    f"The key {key:.24}... came at turns {seen[0]} and {record[0]} with another {what} "
                    f"({seen[index]!r:.60} and {record[index]!r:.60}). Equal keys are equal states: give "
                    "them equal texts and distances."
                )
                break
    return failures[:3]


def revisit_failure(env: Env, episodes: list[list[Record]]) -> str | None:
    """Why no state came back at another turn, or None: one did, or none can (``states_recur`` false, or
    every episode ended at its first reply)."""
    turns_of: dict[str, set[int]] = {}
    for records in episodes:
        for turn, key, _, _ in records:
            if key is not None:
                turns_of.setdefault(key, set()).add(turn)
    if any(len(turns) > 1 for turns in turns_of.values()) or not turns_of:
        return None
    if not type(env).states_recur or all(len(records) <= 2 for records in episodes):
        return None
    return (
        f"No state came back at another turn in {len(episodes)} episodes of malformed and random replies "
        f"(a malformed reply, {MALFORMED_REPLY!r}, changes nothing in most envs). {_KEY_HINT} Where every "
        "reply moves the episode on, set the class attribute states_recur = False."
    )


def oracle_distance_failures(env: Env, seed: int) -> list[str]:
    """Each oracle turn lowers the distance by exactly one, to 0 where the episode ends; episodes whose
    distance is not known at reset are passed over."""
    if type(env).oracle_response is Env.oracle_response:
        return []
    failures = []
    for episode_seed in range(seed, seed + DISTANCE_SEEDS):
        env.reset(seed=episode_seed)
        distance = env.distance_to_goal()
        if distance is not None and distance != UNREACHABLE:
            failure = oracle_walk(env, distance)
            if failure is not None:
                failures.append(f"With seed={episode_seed} {failure}")
    return failures


def oracle_walk(env: Env, distance: int) -> str | None:
    """What went wrong as the oracle played from ``distance``, or None: one less a turn, 0 at the end."""
    for turn in range(1, MAX_STEPS_TO_END + 1):
        reply = env.oracle_response()
        if reply is None:
            break
        _, done, _ = env.step(reply)
        after = env.distance_to_goal()
        if after != distance - 1:
            return (
                f"the oracle's turn {turn} took the distance from {distance} to {after!r}, not "
                f"{distance - 1}: count the turns an optimal player (the oracle) needs."
            )
        if after == 0 and not done:
            return f"the oracle's turn {turn} reached distance 0, but the episode goes on: 0 is the goal."
        distance = after
        if done:
            break
    return None if distance == 0 else f"the oracle's episode ended at distance {distance}, not 0."


def check_signals(env: Env, seed: int, other_process: bool = True) -> list[str]:
    """The state signals of :data:`SIGNAL_SEEDS` episodes: types, the same in another process (when
    ``other_process``), equal keys with equal texts and distances, a state met at two turns, and the
    oracle's distance going down by one a turn."""
    cases: list[Case] = []
    episodes: list[list[Record]] = []
    for episode_seed in range(seed, seed + SIGNAL_SEEDS):
        replies, records = play(env, episode_seed)
        cases.append((episode_seed, replies))
        episodes.append(records)
    flat = [record for records in episodes for record in records]
    failures = type_errors(flat)
    if failures:  # the checks below compare and count distances: of other types they say nothing true
        return failures
    failures += clashes(flat)
    if other_process:
        failures += other_process_failures(env, cases, episodes)
    if (revisit := revisit_failure(env, episodes)) is not None:
        failures.append(revisit)
    return failures + oracle_distance_failures(env, seed)


def other_process_failures(env: Env, cases: list[Case], episodes: list[list[Record]]) -> list[str]:
    """The episodes of ``cases`` replayed in another process give the same signals, turn by turn."""
    spec, how = rebuild_spec(env)
    proc = run_other_process("vlm_envs.checker.signals", (spec, cases))
    if proc.returncode != 0:
        return [f"Replaying episodes in the env rebuilt from {how} failed ({last_error_line(proc)})."]
    remote = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    for (episode_seed, _), here, there in zip(cases, episodes, remote, strict=True):
        if len(here) != len(there):
            return [f"With seed={episode_seed} the episode replayed in another process ran another length."]
        for mine, theirs in zip(here, there, strict=True):
            if list(mine) != theirs:
                field = ("state_key()", "state_text()", "distance_to_goal()")[
                    next(i for i in (1, 2, 3) if mine[i] != theirs[i]) - 1
                ]
                return [
                    f"With seed={episode_seed}, {field} at turn {mine[0]} differs in another process "
                    f"({mine[1:]!r:.80} here, {theirs[1:]!r:.80} there). {_KEY_HINT} Use no hash(), id() or "
                    "set order."
                ]
    return []


def signals_main() -> None:
    """Child side of the check: read (spec, cases), replay each, print the signals as JSON."""
    spec, cases = pickle.loads(sys.stdin.buffer.read())
    env = spec.make()
    out = []
    for episode_seed, replies in cases:
        try:
            out.append([list(r) for r in play(env, episode_seed, replies)[1]])
        except Exception as err:  # any failure of the env is the finding
            raise SystemExit(f"the replay raised {error_text(err)}") from err
    print(json.dumps(out))
    env.close()


if __name__ == "__main__":
    signals_main()
