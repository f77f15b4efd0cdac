"""The checks of replay: a seeded episode plays the same every time, in this process and in
another one; ``reset()`` without a seed plays another episode each time (gymnasium's rule: it
continues from the last seed).

``python -m vlm_envs.checker.replay`` is the other process of the rebuild check.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import subprocess
import sys
from typing import Any

from vlm_envs.checker.calls import SCRIPTED_STEPS, error_text, image_digest
from vlm_envs.protocol import SEED_LIMIT, Env, Observation

#: The largest seed the protocol allows: numpy's ``RandomState`` and ``np.random.seed`` reject it.
LARGE_SEED = SEED_LIMIT - 1
#: Unseeded resets tried before concluding that they all replay one episode.
UNSEEDED_RESETS = 8


def determinism_seeds(seed: int) -> tuple[int, ...]:
    """The seeds whose episodes must replay: ``seed``, the next two and the largest allowed."""
    return tuple(dict.fromkeys([seed, (seed + 1) % SEED_LIMIT, (seed + 2) % SEED_LIMIT, LARGE_SEED]))


def _obs_record(obs: Observation) -> list[Any]:
    return [obs.role, obs.text, list(obs.image_slots), [image_digest(im) for im in obs.images]]


def episode_fingerprint(env: Env, seed: int, steps: int = SCRIPTED_STEPS) -> str:
    """A digest of one scripted episode: observations (image bytes included), rewards, metrics."""
    obs, info = env.reset(seed=seed)
    record: list[Any] = [
        _obs_record(obs),
        json.dumps(info, sort_keys=True, default=lambda o: type(o).__name__),
    ]
    rng = random.Random(seed)
    for _ in range(steps):
        obs, done, step_info = env.step(env.random_response(rng))
        record += [_obs_record(obs), done, step_info.model_dump(mode="json", exclude={"info"})]
        if done:
            break
    record.append(env.episode_reward())
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


_SEED_HINT = (
    "Derive all randomness of an episode from its reset seed (numpy.random.default_rng(seed) or "
    "random.Random(seed)) and keep no random state across resets."
)


def check_determinism(env: Env, seed: int) -> list[str]:
    """Every seeded episode replays: several seeds, the largest allowed among them."""
    failures = []
    for s in determinism_seeds(seed):
        try:
            first, second = episode_fingerprint(env, s), episode_fingerprint(env, s)
        except Exception as err:
            failures.append(
                f"The episode of seed={s} raised {error_text(err)}. Accept every seed in [0, 2**64): "
                "numpy.random.default_rng and random.Random take them all, numpy.random.seed and "
                "RandomState stop at 2**32."
            )
            continue
        if first != second:
            failures.append(
                f"Two episodes with seed={s} and the same replies differ (observations, images, rewards "
                f"or metrics). {_SEED_HINT}"
            )
    return failures


#: What a reset without a seed does, by gymnasium's rule (its reset(seed=None) continues the generator
#: the last seed set): the bundled envs keep it with vlm_envs.envs.config.EpisodeSeeds.
_UNSEEDED_HINT = (
    "Without a seed, continue from the last one: after reset(seed=s), reset() plays seed s + 1, then s + 2 "
    "(vlm_envs.envs.config.EpisodeSeeds does this; before any seed, draw one at random)."
)


def check_unseeded(env: Env, seed: int) -> list[str]:
    """``reset()`` without a seed plays another episode each time and does not change what a seed means."""
    before = episode_fingerprint(env, seed)
    seeded = {json.dumps(_obs_record(env.reset(seed=s)[0])) for s in determinism_seeds(seed)}
    unseeded: list[str] = []
    try:
        while len(unseeded) < UNSEEDED_RESETS and len(set(unseeded)) < 2:
            unseeded.append(json.dumps(_obs_record(env.reset()[0])))
    except Exception as err:
        return [f"reset() without a seed raised {error_text(err)}. {_UNSEEDED_HINT}"]
    failures = []
    if len(seeded) > 1 and len(set(unseeded)) == 1:
        failures.append(
            f"{len(unseeded)} resets without a seed all gave the same first observation, though the seeds "
            f"{', '.join(map(str, determinism_seeds(seed)))} give different ones. {_UNSEEDED_HINT}"
        )
    if episode_fingerprint(env, seed) != before:
        failures.append(f"The episode of seed={seed} changed after resets without a seed. {_SEED_HINT}")
    return failures


def rebuild_spec(env: Env) -> tuple[Any, str]:
    """The spec another process rebuilds ``env`` from, and how to say it: its own, else its class with
    default config."""
    from vlm_envs.registry import EnvSpec

    if env.spec is not None:
        return env.spec, "its spec"
    target = f"{type(env).__module__}:{type(env).__qualname__}"
    return EnvSpec(name=target, target=target), "its class with default config (it has no spec)"


def other_process_hash_seed() -> str:
    """The ``PYTHONHASHSEED`` of the other process: another one than this process's."""
    return str((int(os.environ.get("PYTHONHASHSEED", "0") or 0) + 12345) % 4294967295)


def run_other_process(module: str, payload: Any) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m module`` with ``payload`` pickled on its stdin, this ``sys.path`` and another
    ``PYTHONHASHSEED`` (:func:`other_process_hash_seed`)."""
    environ = {
        **os.environ,
        "PYTHONHASHSEED": other_process_hash_seed(),
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    return subprocess.run(
        [sys.executable, "-m", module],
        input=pickle.dumps(payload),
        capture_output=True,
        env=environ,
        timeout=300,
    )


def last_error_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    """The last line the other process wrote to stderr."""
    return (proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["(no output)"])[0]


def check_rebuild(env: Env, seed: int) -> list[str]:
    """The env rebuilt from its spec in another process (another ``PYTHONHASHSEED``) plays the
    same episodes for the determinism seeds."""
    spec, how = rebuild_spec(env)
    seeds = determinism_seeds(seed)
    local = [episode_fingerprint(env, s) for s in seeds]
    proc = run_other_process("vlm_envs.checker.replay", (spec, seeds))
    if proc.returncode != 0:
        return [
            f"Rebuilding the env from {how} in another process failed ({last_error_line(proc)}). Make the "
            "env importable by module path and its config picklable."
        ]
    remote = proc.stdout.decode().split()
    differ = [s for s, a, b in zip(seeds, local, remote, strict=False) if a != b]
    if differ or len(remote) != len(local):
        return [
            f"The env rebuilt from {how} in another process (PYTHONHASHSEED={other_process_hash_seed()}) "
            f"played a different episode for seed={(differ or seeds)[0]}. Avoid hash(), global RNGs and "
            "random state drawn when the env is built."
        ]
    return []


def rebuild_main() -> None:
    """Child side of the rebuild check: read (spec, seeds), print one episode fingerprint per seed."""
    spec, seeds = pickle.loads(sys.stdin.buffer.read())
    env = spec.make()
    for seed in seeds:
        print(episode_fingerprint(env, seed))
    env.close()


if __name__ == "__main__":
    rebuild_main()
