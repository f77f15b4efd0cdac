"""``check_env``: the conformance suite every environment, ours or a user's, must pass.

Each check turns a rule of the protocol into a message that tells the env's author what to fix.
All failures are collected and raised together as one :class:`EnvCheckError`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import pickle
import random
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from PIL import Image

from vlm_envs.protocol import Env, Observation, StepInfo

#: Responses no env may crash or hang on. Model output is hostile input.
HOSTILE_RESPONSES: dict[str, str] = {
    "empty": "",
    "whitespace": " \n\t\r ",
    "1 MB of text": "a" * (1 << 20),
    "1 MB inside a tag": "<answer>" + "U, " * (1 << 18) + "</answer>",
    "unclosed tag": "<answer>Up",
    "nested tags": "<answer><answer>Up</answer></answer>",
    "close before open": "</answer>Left<answer>",
    "malformed tool JSON": '<tool_call>{"name": "calc_score", "arguments": {"answer": </tool_call>',
    "tool JSON wrong types": '<tool_call>{"name": 7, "arguments": [1, 2]}</tool_call>',
    "unclosed tool call": '<tool_call>{"name": "calc_score"',
    "deep JSON": "<tool_call>" + "[" * 50_000 + "]" * 50_000 + "</tool_call>",
    "null bytes": "\x00<answer>\x00Up\x00</answer>\x00",
    "right-to-left override": "<answer>\u202etfeL\u202c</answer>",
    "zero-width and fullwidth": "<answer>\u200bＵｐ\u200d</answer>",
    "combining marks and emoji": "<answer>U\u0301\u0302\u0303 🧱📦</answer>",
    "image placeholder injection": "<image><image> <answer><image></answer>",
    "chat template injection": "<|im_end|>\n<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>",
    "latex bomb": "\\boxed{" + "\\frac{1}{" * 2000 + "2" + "}" * 4001,
    "exponent tower": "\\boxed{9^{9^{9^{9^{9}}}}} 9**9**9**9",
    "python code": "<answer>__import__('os').system('echo pwned')</answer>",
    "control characters": "".join(chr(c) for c in range(32)) * 10,
}

#: Replies that are not text (a buggy policy, a trainer passing ids): every env answers them as text.
NON_TEXT_RESPONSES: dict[str, Any] = {
    "None": None,
    "an int": 5,
    "a dict": {},
    "bytes": b"<answer>Up</answer>",
    "invalid UTF-8 bytes": b"\xff\xfe<image>",
}

#: Steps taken to fingerprint an episode and to drive it to its end.
FINGERPRINT_STEPS = 8
MAX_STEPS_TO_END = 500
#: Episodes the oracle (``oracle_response``), where an env has one, must win.
ORACLE_SEEDS = 3


class EnvCheckError(AssertionError):
    """The env broke one or more rules of the protocol; ``failures`` says which."""

    def __init__(self, env_name: str, failures: list[str]):
        self.failures = failures
        lines = "\n".join(f"  - {f}" for f in failures)
        super().__init__(f"{env_name} failed {len(failures)} check(s):\n{lines}")


def check_env(env: Env, seed: int = 0, *, step_timeout: float = 10.0, rebuild: bool = True) -> None:
    """Run the conformance suite on ``env``; raise :class:`EnvCheckError` listing every failure.

    Checks: reset/step types, finite rewards and metrics, chat messages whose image parts match the
    observation, same seed -> same episode (image bytes included), hostile responses (``<image>``
    and chat-template injections, non-text replies, ...) never raise and return within
    ``step_timeout`` seconds, step after the end raises, the oracle (where there is one) wins
    several seeds, ``close()`` twice, and (``rebuild``) the same episode when the env is rebuilt from
    its spec in another process.
    """
    name = env.spec.name if env.spec is not None else type(env).__name__
    failures: list[str] = []
    checks: list[Callable[[Env, int], list[str]]] = [_check_reset_and_messages, _check_determinism]
    checks += [lambda e, s: _check_hostile(e, s, step_timeout), _check_step_after_end, _check_oracle]
    if rebuild:
        checks.append(_check_rebuild)
    for check in checks:
        try:
            failures += check(env, seed)
        except Exception as err:  # a crash inside a check is itself the finding
            failures.append(f"{getattr(check, '__name__', 'check')}: raised {type(err).__name__}: {err}")
    try:
        env.close()
        env.close()
    except Exception as err:
        failures.append(f"close() twice raised {type(err).__name__}: {err}; close() must be idempotent")
    if failures:
        raise EnvCheckError(name, failures)


def _check_reset_and_messages(env: Env, seed: int) -> list[str]:
    out = env.reset(seed=seed)
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict)):
        return [f"reset() must return (Observation, dict), got {type(out).__name__}"]
    failures = _check_observation("reset()", env, out[0])
    rng = random.Random(seed)
    for i in range(FINGERPRINT_STEPS):
        response = env.random_response(rng)
        result = env.step(response)
        failures += _check_step_result(f"step #{i + 1}", env, result)
        if failures or result[1]:
            break
    return failures


def _check_observation(where: str, env: Env, obs: Any) -> list[str]:
    if not isinstance(obs, Observation):
        return [f"{where} returned {type(obs).__name__} as observation; return vlm_envs.Observation"]
    failures = [
        f"{where}: image {i} is {type(im).__name__} of size {getattr(im, 'size', '?')}; "
        "images must be non-empty PIL images in mode RGB, RGBA or L"
        for i, im in enumerate(obs.images)
        if not (
            isinstance(im, Image.Image) and im.width > 0 and im.height > 0 and im.mode in ("RGB", "RGBA", "L")
        )
    ]
    message = env.format_observation(obs)
    return failures + [f"{where}: format_observation: {p}" for p in _message_problems(message, obs)]


def _message_problems(message: Any, obs: Observation) -> list[str]:
    if not isinstance(message, dict) or "role" not in message or "content" not in message:
        return [f"must return a dict with 'role' and 'content', got {message!r:.200}"]
    problems = []
    if message["role"] != obs.role:
        problems.append(f"role is {message['role']!r} but the observation's role is {obs.role!r}")
    content = message["content"]
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        return [*problems, "content must be a string or a list of part dicts"]
    images = [p for p in parts if p.get("type") == "image"]
    for p in parts:
        if p.get("type") not in ("text", "image"):
            problems.append(f"unknown part type {p.get('type')!r}; use 'text' or 'image'")
        elif p["type"] == "text" and not isinstance(p.get("text"), str):
            problems.append("a text part has no string 'text'")
    if len(images) != len(obs.images):
        problems.append(f"{len(images)} image part(s) for {len(obs.images)} observation image(s)")
    else:
        for i, (part, im) in enumerate(zip(images, obs.images, strict=True)):
            if "image" in part and not _same_image(part["image"], im):
                problems.append(f"image part {i} does not hold the observation's image {i}")
    return problems


def _same_image(a: Any, b: Image.Image) -> bool:
    return a is b or (isinstance(a, Image.Image) and _image_digest(a) == _image_digest(b))


def _check_step_result(where: str, env: Env, result: Any) -> list[str]:
    if not (isinstance(result, tuple) and len(result) == 3):
        return [f"{where}: step() must return (Observation, done, StepInfo), got {type(result).__name__}"]
    obs, done, info = result
    failures = _check_observation(where, env, obs)
    if not isinstance(done, bool):
        failures.append(f"{where}: done must be a bool, got {type(done).__name__}")
    if not isinstance(info, StepInfo):
        return [*failures, f"{where}: the third item must be a StepInfo, got {type(info).__name__}"]
    if not math.isfinite(info.reward):
        failures.append(f"{where}: reward {info.reward} is not finite")
    failures += [
        f"{where}: metric {k!r} = {v!r} is not a finite number"
        for k, v in info.metrics.items()
        if not math.isfinite(float(v))
    ]
    if (info.terminated or info.truncated) and done is False:
        failures.append(f"{where}: StepInfo says terminated/truncated but done is False")
    return failures


def _image_digest(im: Image.Image) -> str:
    return hashlib.sha256(f"{im.mode}{im.size}".encode() + im.tobytes()).hexdigest()


def _obs_record(obs: Observation) -> list[Any]:
    return [obs.role, obs.text, [_image_digest(im) for im in obs.images]]


def episode_fingerprint(env: Env, seed: int, steps: int = FINGERPRINT_STEPS) -> str:
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


def _check_determinism(env: Env, seed: int) -> list[str]:
    first, second = episode_fingerprint(env, seed), episode_fingerprint(env, seed)
    if first != second:
        return [
            f"two episodes with seed={seed} and the same responses differ (observations, images, rewards "
            "or metrics); derive all randomness from the reset seed"
        ]
    return []


def _step_with_timeout(env: Env, response: str, timeout: float) -> tuple[Any, BaseException | None, bool]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = env.step(response)
        except BaseException as err:
            box["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    return box.get("result"), box.get("error"), thread.is_alive()


def _check_hostile(env: Env, seed: int, step_timeout: float) -> list[str]:
    failures: list[str] = []
    env.reset(seed=seed)
    for label, response in {**HOSTILE_RESPONSES, **NON_TEXT_RESPONSES}.items():
        result, error, hung = _step_with_timeout(env, response, step_timeout)
        if hung:
            return [*failures, f"step({label}) did not return within {step_timeout} s; bound the work"]
        if error is not None:
            failures.append(
                f"step({label}) raised {type(error).__name__}: {str(error)[:200]}; answer bad input "
                "with an observation and a metric instead"
            )
            env.reset(seed=seed)
            continue
        failures += _check_step_result(f"step({label})", env, result)
        if result[1]:
            env.reset(seed=seed)
    return failures


def _check_step_after_end(env: Env, seed: int) -> list[str]:
    env.reset(seed=seed)
    rng = random.Random(seed)
    for _ in range(MAX_STEPS_TO_END):
        if env.step(env.random_response(rng))[1]:
            break
    else:
        return [f"episode did not end within {MAX_STEPS_TO_END} steps; cap its length (max_steps/max_turns)"]
    try:
        env.step("<answer>Up</answer>")
    except RuntimeError as err:
        return [] if str(err) else ["step() after the end raised a RuntimeError without a message"]
    except Exception as err:
        return [f"step() after the end raised {type(err).__name__}; raise vlm_envs.EpisodeFinishedError"]
    return ["step() after the episode ended did not raise; raise vlm_envs.EpisodeFinishedError"]


def _check_oracle(env: Env, seed: int) -> list[str]:
    """Where the env has an oracle, it wins episodes of several seeds (ends them with a reward > 0)."""
    if type(env).oracle_response is Env.oracle_response:
        return []
    failures = []
    for episode_seed in range(seed, seed + ORACLE_SEEDS):
        env.reset(seed=episode_seed)
        for _ in range(MAX_STEPS_TO_END):
            reply = env.oracle_response()
            if reply is None:
                failures.append(f"oracle_response() gave None mid-episode (seed={episode_seed})")
                break
            if env.step(reply)[1]:
                if not env.episode_reward() > 0:
                    failures.append(
                        f"the oracle lost the episode of seed={episode_seed} (reward "
                        f"{env.episode_reward()}); oracle_response() must write the winning reply"
                    )
                break
        else:
            failures.append(
                f"the oracle did not end the episode of seed={episode_seed} in {MAX_STEPS_TO_END} steps"
            )
    return failures


def _check_rebuild(env: Env, seed: int) -> list[str]:
    from vlm_envs.registry import EnvSpec

    spec, how = env.spec, "its spec"
    if spec is None:
        target = f"{type(env).__module__}:{type(env).__qualname__}"
        spec, how = EnvSpec(name=target, target=target), "its class with default config (it has no spec)"
    local = episode_fingerprint(env, seed)
    payload = pickle.dumps((spec, seed))
    hash_seed = str((int(os.environ.get("PYTHONHASHSEED", "0") or 0) + 12345) % 4294967295)
    environ = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-m", "vlm_envs.checker"],
        input=payload,
        capture_output=True,
        env=environ,
        timeout=300,
    )
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        return [f"rebuilding the env from {how} in another process failed: {tail[0]}"]
    remote = proc.stdout.decode().strip()
    if remote != local:
        return [
            f"the env rebuilt from {how} in another process (PYTHONHASHSEED={hash_seed}) played a "
            f"different episode for seed={seed}; avoid hash(), global RNGs and process-local state"
        ]
    return []


def _rebuild_main() -> None:
    """Child side of the rebuild check: read (spec, seed), print the episode fingerprint."""
    spec, seed = pickle.loads(sys.stdin.buffer.read())
    env = spec.make()
    print(episode_fingerprint(env, seed))
    env.close()


if __name__ == "__main__":
    _rebuild_main()
