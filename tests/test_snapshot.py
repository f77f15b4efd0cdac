"""Snapshots: every registered env pauses and resumes exactly, branches into independent copies, and refuses a
foreign, altered, truncated or hostile snapshot in bounded time, left as it was."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest
from toyenvs import broken
from toyenvs.colors import ColorsEnv

from vlm_envs import Env, EpisodeFinishedError, SnapshotError, build_env, list_envs
from vlm_envs.configured import build_configured_env
from vlm_envs.snapshot import MAX_CHARS, MAX_REPLIES, digest_of, loads

ENV_NAMES = [spec.name for spec in list_envs()]


def turn(env: Env, result: tuple[Any, ...]) -> tuple[Any, ...]:
    """What a turn showed and scored: text, role, image bytes, done, reward, ends, metrics, episode reward."""
    obs = result[0]
    images = [hashlib.sha256(f"{im.mode}{im.size}".encode() + im.tobytes()).hexdigest() for im in obs.images]
    shown = (obs.text, obs.role, obs.image_slots, images)
    if len(result) == 3:
        _, done, info = result
        shown += (done, info.reward, info.terminated, info.truncated, info.metrics)
    return (*shown, env.episode_reward())


def play(env: Env, replies: list[str]) -> list[tuple[Any, ...]]:
    return [turn(env, env.step(reply)) for reply in replies]


def reseal(snapshot: dict[str, Any]) -> dict[str, Any]:
    """``snapshot`` with its digest computed again: a forgery that passes the digest."""
    content = {k: v for k, v in snapshot.items() if k != "digest"}
    return {**content, "digest": digest_of(content)}


@pytest.mark.parametrize("name", ENV_NAMES)
def test_every_env_resumes_an_unseeded_episode_exactly_in_a_fresh_env(name):
    env = build_env(name)
    obs, _ = env.reset()  # unseeded: the snapshot holds the seed the env played
    rng = random.Random(7)
    replies = [env.random_response(rng) for _ in range(6)]
    first = [turn(env, result) for result in _steps_until_done(env, replies[:1])]
    snapshot = json.loads(json.dumps(env.snapshot()))
    assert snapshot == env.snapshot() and snapshot["env"] == name
    first_state = where_it_stands(env)
    assert first_state[0] is not None
    finished = bool(first) and first[-1][4]
    uninterrupted = [] if finished else [turn(env, r) for r in _steps_until_done(env, replies[1:])]

    fresh = build_env(name)
    restored = fresh.restore(snapshot)
    last = first[-1] if first else turn(env, (obs,))
    assert turn(fresh, (restored,))[:4] == last[:4] and fresh.episode_reward() == last[-1]
    assert where_it_stands(fresh) == first_state
    if not finished:
        assert [turn(fresh, r) for r in _steps_until_done(fresh, replies[1:])] == uninterrupted
    assert fresh.snapshot() == env.snapshot()
    assert where_it_stands(fresh) == where_it_stands(env)


def where_it_stands(env: Env) -> tuple[Any, Any, Any]:
    """The env's state key, state text and distance to the goal."""
    return env.state_key(), env.state_text(), env.distance_to_goal()


def _steps_until_done(env: Env, replies: list[str]):
    for reply in replies:
        result = env.step(reply)
        yield result
        if result[1]:
            return


@pytest.mark.parametrize("name", ENV_NAMES)
def test_a_finished_episode_restores_finished_from_its_own_config(name):
    env = build_env(name)
    env.reset(seed=3)
    done, steps = False, 0
    while not done:
        reply = env.oracle_response() or env.random_response(random.Random(steps))
        obs, done, _ = env.step(reply)
        steps += 1
    snapshot = env.snapshot()
    fresh = build_env(
        snapshot["env"], **snapshot["config"]
    )  # what a server that holds only the snapshot does
    assert turn(fresh, (fresh.restore(snapshot),)) == turn(env, (obs,))
    assert where_it_stands(fresh) == where_it_stands(env)
    with pytest.raises(EpisodeFinishedError):
        fresh.step("anything")


def test_n_restores_of_one_state_are_n_independent_branches_and_the_original_is_untouched():
    env = build_env("sokoban")
    env.reset(seed=0)
    env.step("<answer>Left</answer>")
    state = env.snapshot()
    moves = ["Up", "Down", "Left", "Right"]
    branches = [build_env("sokoban") for _ in moves]
    for branch in branches:
        branch.restore(state)
    nexts = [turn(b, b.step(f"<answer>{m}</answer>")) for b, m in zip(branches, moves, strict=True)]
    assert len({n[2][0] for n in nexts}) == len(moves)  # four different boards
    assert [b.snapshot()["state"]["replies"][-1] for b in branches] == [
        f"<answer>{m}</answer>" for m in moves
    ]
    assert env.snapshot() == state  # the original: same state, and it plays on as if never copied
    again = build_env("sokoban")
    again.restore(state)
    assert play(env, ["<answer>Up</answer>"]) == play(again, ["<answer>Up</answer>"]) == [nexts[0]]


def test_one_env_restored_twice_from_one_snapshot_gives_the_same_turn_each_time():
    env = build_env("frozen_lake")
    env.reset(seed=1)
    state = env.snapshot()
    first = play(env, ["<answer>Down</answer>"])
    env.restore(state)
    assert play(env, ["<answer>Down</answer>"]) == first


def test_the_config_is_the_effective_one_so_a_trainer_turn_cap_is_part_of_it():
    env = build_configured_env("sokoban", 5, {})
    env.reset(seed=0)
    other = build_configured_env("sokoban", 6, {})
    with pytest.raises(SnapshotError, match=r"another 'sokoban' config: max_turns=5 there, 6 here$"):
        other.restore(env.snapshot())
    build_configured_env("sokoban", 5, {}).restore(env.snapshot())


def test_geo3k_snapshots_name_the_problems_of_a_sample():
    env = build_env("geo3k", problem="<image>Find x.", answer="12", images=[_square("white")])
    env.reset(seed=0)
    same = build_env("geo3k", problem="<image>Find x.", answer="12", images=[_square("white")])
    same.restore(env.snapshot())
    other = build_env("geo3k", problem="<image>Find x.", answer="12", images=[_square("black")])
    with pytest.raises(SnapshotError, match="another 'geo3k' config: problems="):
        other.restore(env.snapshot())


def _square(color: str):
    from PIL import Image

    return Image.new("RGB", (16, 16), color)


def test_async_resets_and_steps_are_recorded_too():
    async def episode(env: Env) -> None:
        await env.areset(seed=4)
        await env.astep(env.tool_call("3"))  # geo3k's astep is its own, graded off the loop

    env = build_env("geo3k")
    asyncio.run(episode(env))
    snapshot = env.snapshot()
    assert snapshot["state"] == {"seed": 4, "options": None, "replies": [env.tool_call("3")]}
    fresh = build_env("geo3k")
    fresh.restore(snapshot)
    assert play(fresh, ["\\boxed{3}"]) == play(env, ["\\boxed{3}"])


def test_what_is_recorded_a_subclass_reset_once_options_and_no_failed_step():
    env = broken.HashSeeded()  # its reset calls ColorsEnv's: one reset, with the seed it was given
    env.reset(seed=5)
    replies = ["<answer>nothing</answer>"] * 3
    play(env, replies)
    with pytest.raises(EpisodeFinishedError):
        env.step("<answer>blue</answer>")
    assert env.snapshot()["state"] == {"seed": 5, "options": None, "replies": replies}
    sokoban = build_env("sokoban")
    obs, _ = sokoban.reset(seed=1, options={"num_boxes": 2})
    assert sokoban.snapshot()["state"]["options"] == {"num_boxes": 2}
    fresh = build_env("sokoban")
    assert turn(fresh, (fresh.restore(sokoban.snapshot()),)) == turn(sokoban, (obs,))


def test_what_cannot_be_snapshot_says_why():
    env = ColorsEnv()
    with pytest.raises(SnapshotError, match=r"^no episode to snapshot: call reset\(\) first$"):
        env.snapshot()
    env.reset()  # unseeded, and ColorsEnv does not say which seed it played
    with pytest.raises(SnapshotError, match=r"reset without a seed .* \(episode_seed\(\)\)"):
        env.snapshot()
    env.reset(seed=1)
    assert env.snapshot()["state"]["seed"] == 1


def _colors_mid_episode() -> tuple[Env, dict[str, Any]]:
    env = build_env("toyenvs.colors", max_turns=3)
    env.reset(seed=2)
    env.step("<answer>nothing</answer>")
    return env, env.snapshot()


def _altered(snapshot: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    forms = []
    for label, change in [
        ("a reply changed", lambda s: s["state"]["replies"].__setitem__(0, "<answer>red</answer>")),
        ("a reply dropped", lambda s: s["state"]["replies"].pop()),
        ("the seed changed", lambda s: s["state"].__setitem__("seed", 3)),
        ("the env renamed", lambda s: s.__setitem__("env", "sokoban")),
        ("the config changed", lambda s: s["config"].__setitem__("max_turns", 9)),
        ("the digest cut", lambda s: s.__setitem__("digest", s["digest"][:-1])),
    ]:
        forged = copy.deepcopy(snapshot)
        change(forged)
        forms.append((label, forged))
    return forms


def assert_untouched(env: Env, before: dict[str, Any]) -> None:
    """``env`` holds the episode of ``before`` and plays on as a fresh restore of it does."""
    assert env.snapshot() == before
    twin = build_env(before["env"], **before["config"])
    twin.restore(before)
    assert play(env, ["<answer>blue</answer>"]) == play(twin, ["<answer>blue</answer>"])


@pytest.mark.parametrize("form", range(6))
def test_an_altered_or_truncated_snapshot_is_refused_and_the_env_left_as_it_was(form):
    env, snapshot = _colors_mid_episode()
    label, forged = _altered(snapshot)[form]
    with pytest.raises(SnapshotError, match="altered or truncated: its digest does not match") as err:
        env.restore(forged)
    assert "\n" not in str(err.value), label
    assert_untouched(env, snapshot)


def test_a_whole_snapshot_of_something_else_is_refused_naming_what_differs(monkeypatch):
    env, snapshot = _colors_mid_episode()
    sokoban = build_env("sokoban")
    sokoban.reset(seed=0)
    with pytest.raises(SnapshotError, match=r"^a snapshot of env 'sokoban', not of 'toyenvs.colors'$"):
        env.restore(sokoban.snapshot())
    other = build_env("toyenvs.colors", max_turns=4)
    with pytest.raises(SnapshotError, match=r"config: max_turns=3 there, 4 here$"):
        other.restore(snapshot)
    monkeypatch.setattr(ColorsEnv, "rules_version", "2")
    with pytest.raises(SnapshotError, match=r"rules version '1'; this env plays rules version '2'$"):
        env.restore(snapshot)
    monkeypatch.undo()
    assert_untouched(env, snapshot)


def test_truncated_text_and_unknown_keys_are_refused():
    _, snapshot = _colors_mid_episode()
    text = json.dumps(snapshot)
    assert loads(text) == snapshot and loads(text.encode()) == snapshot
    with pytest.raises(SnapshotError, match=r"^the snapshot is not JSON: "):
        loads(text[:-7])
    with pytest.raises(SnapshotError, match=r"^a snapshot is a JSON object, got list$"):
        loads("[1]")
    with pytest.raises(SnapshotError, match=r"^not a whole vlm-envs snapshot: it has no 'state'$"):
        build_env("toyenvs.colors").restore({k: v for k, v in snapshot.items() if k != "state"})
    with pytest.raises(SnapshotError, match=r"^not a vlm-envs snapshot: unknown key\(s\) 'path'$"):
        build_env("toyenvs.colors").restore({**snapshot, "path": "/etc/passwd"})


def _deep(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


HOSTILE: dict[str, Any] = {
    "a million replies": lambda s: s["state"].__setitem__("replies", ["x"] * 1_000_000),
    "a reply over the size cap": lambda s: s["state"]["replies"].append("x" * (MAX_CHARS + 1)),
    "nesting 100,000 deep": lambda s: s["config"].__setitem__("deep", _deep(100_000)),
    "a huge int": lambda s: s["state"].__setitem__("seed", 10**5000),
    "a tuple": lambda s: s["state"].__setitem__("replies", ("x",)),
    "a path": lambda s: s["config"].__setitem__("image_dir", Path("/etc")),
    "bytes": lambda s: s["state"]["replies"].append(b"x"),
    "a nan": lambda s: s["config"].__setitem__("max_turns", float("nan")),
    "an int key": lambda s: s["config"].__setitem__(1, 1),
}


@pytest.mark.parametrize("label", sorted(HOSTILE))
def test_a_hostile_snapshot_is_refused_in_bounded_time_before_its_digest_is_taken(label):
    env, snapshot = _colors_mid_episode()
    forged = copy.deepcopy(snapshot)
    HOSTILE[label](forged)
    start = time.perf_counter()
    with pytest.raises(SnapshotError) as err:
        env.restore(forged)
    assert time.perf_counter() - start < 1.0, label
    assert "digest" not in str(err.value) and "\n" not in str(err.value), str(err.value)
    assert_untouched(env, snapshot)


@pytest.mark.parametrize(
    "state, message",
    [
        ({"seed": True, "options": None, "replies": []}, "seed must be an int in"),
        ({"seed": 1, "options": [], "replies": []}, "options must be an object or null, got list"),
        ({"seed": 1, "options": None, "replies": [1]}, "replies must all be strings"),
        ({"seed": 1, "options": None}, "holds exactly seed, options and replies"),
        ({"seed": 1, "options": None, "replies": ["x"] * (MAX_REPLIES + 1)}, "at most 10000 strings"),
    ],
)
def test_a_forged_replay_state_with_a_good_digest_is_refused_by_its_types(state, message):
    env, snapshot = _colors_mid_episode()
    with pytest.raises(SnapshotError, match=message):
        env.restore(reseal({**snapshot, "state": state}))
    assert_untouched(env, snapshot)


def test_a_forged_episode_that_does_not_replay_is_refused_and_rolled_back():
    env, snapshot = _colors_mid_episode()
    forged = copy.deepcopy(snapshot)
    forged["state"]["replies"] = ["<answer>nothing</answer>"] * 5  # more turns than max_turns
    with pytest.raises(SnapshotError, match=r"^the snapshot does not replay: EpisodeFinishedError: "):
        env.restore(reseal(forged))
    assert_untouched(env, snapshot)
    fresh = build_env("toyenvs.colors", max_turns=3)
    with pytest.raises(SnapshotError, match="does not replay"):
        fresh.restore(reseal(forged))
    with pytest.raises(SnapshotError, match=r"^no episode to snapshot"):  # as before: no episode
        fresh.snapshot()
