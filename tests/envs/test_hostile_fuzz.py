"""Hostile input for every registered env (a new env inherits these tests): generated replies never make
``step`` raise or hang, and generated reset options and configs are accepted or refused with a ValueError.

An accepted config plays an episode whose images are at most ``MAX_IMAGE_SIDE`` a side.

Replies mix each env's own grammar (its random and oracle replies) mutated, tool calls of its own tools with
hostile JSON (huge integers, NaN, 1e999, deep nesting, wrong types), malformed tags, unicode tricks, long text
and nested brackets. Options and configs take each env's config keys (and unknown ones) with bools,
negatives, huge numbers, floats, NaN, wrong types and numpy values. The deadline only guards against a hang:
how fast a step is belongs to ``benchmarks/``.
"""

from __future__ import annotations

import json
import math
import random
import re
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vlm_envs import Env, Observation, StepInfo, build_env, list_envs
from vlm_envs.envs.config import MAX_IMAGE_SIDE
from vlm_envs.envs.episodic import EpisodicEnv

ENV_NAMES = [spec.name for spec in list_envs()]
#: A hang guard, far above any step or reset the envs take (well under a second each).
DEADLINE_S = 30.0
#: Examples per env and test: the whole file stays near a minute on two busy cores.
EXAMPLES = 30
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # the same examples on every run: a failure reproduces
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_envs: dict[str, Env] = {}


def env_named(name: str) -> Env:
    """One env per name for the whole module (building some is slow); each example resets it."""
    if name not in _envs:
        _envs[name] = build_env(name)
    return _envs[name]


def within_deadline(call: Callable[[], Any], what: str) -> Any:
    """``call()``'s result, its exception re-raised, or a failure if it runs past :data:`DEADLINE_S`."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = call()
        except BaseException as err:
            box["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), f"{what} did not return within {DEADLINE_S} s"
    if "error" in box:
        raise box["error"]
    return box["result"]


# -- replies ----------------------------------------------------------------------------------------

#: Number texts no JSON number parser should take on trust.
HOSTILE_NUMBERS = [
    "9" * 400,
    "-" + "9" * 309,
    "1" + "0" * 308,
    "9" * 5000,
    "1e999",
    "-1e999",
    "NaN",
    "Infinity",
    "-0",
    "1e-400",
    "0x1F",
    "1_000",
]
UNICODE_TRICKS = [
    "\u202e",  # right-to-left override
    "\u200b\u200d\ufeff",  # zero-width characters
    "Ｕｐ１２",  # fullwidth letters and digits
    "U\u0301\u0302\u0303",  # combining marks
    "🧱📦\U0001f600",
    "\ud800",  # a lone surrogate
    "\x00\x1b[31m",
    "<|im_end|>\n<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>",
    "<image>",
]
TAGS = ["<answer>", "</answer>", "<tool_call>", "</tool_call>", "<think>", "</think>", "\\boxed{", "}"]


def json_value(depth: int = 2) -> st.SearchStrategy[str]:
    """JSON-ish value texts: hostile numbers, strings, nesting; not always valid JSON."""
    leaves = st.one_of(
        st.sampled_from(HOSTILE_NUMBERS),
        st.integers(-(10**6), 10**6).map(str),
        st.sampled_from(["true", "false", "null", '""', '"x"', '"9**9**9**9"', '"(((((1)))))"']),
        st.text(max_size=30).map(json.dumps),
        st.sampled_from(UNICODE_TRICKS).map(lambda t: json.dumps(t, ensure_ascii=False)),
    )
    if depth == 0:
        return leaves
    inner = json_value(depth - 1)
    return st.one_of(
        leaves,
        st.lists(inner, max_size=5).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
        st.dictionaries(st.sampled_from(["bbox", "answer", "expression", "x"]), inner, max_size=3).map(
            lambda d: "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in d.items()) + "}"
        ),
    )


@st.composite
def tool_calls(draw: st.DrawFn, env: Env) -> str:
    """A call of one of the env's tools (or another name) whose arguments are hostile."""
    tools = [t.get("function", t) for t in env.tools()]
    names = [t.get("name", "") for t in tools] or ["calc"]
    keys = [k for t in tools for k in t.get("parameters", {}).get("properties", {})] or ["answer"]
    name = draw(st.sampled_from([*names, "", "x" * 200, "zoom\u202e"]))
    key = draw(st.sampled_from([*keys, "bbox_2d", "parameters"]))
    value = draw(
        st.one_of(
            json_value(),
            st.lists(st.sampled_from(HOSTILE_NUMBERS), min_size=4, max_size=4).map(
                lambda xs: f"[{', '.join(xs)}]"
            ),
        )
    )
    payload = f'{{"name": {json.dumps(name)}, "arguments": {{{json.dumps(key)}: {value}}}}}'
    if draw(st.booleans()):  # arguments as a JSON string holding the object, as some templates write it
        payload = json.dumps({"name": name, "arguments": f"{{{json.dumps(key)}: {value}}}"})
    call = f"<tool_call>{payload}</tool_call>"
    before, after = draw(
        st.sampled_from(
            [("", ""), ("Let me check. ", ""), ("<tool_call>", ""), ("<tool_call>", "</tool_call>")]
        )
    )
    return before + call + after + draw(st.sampled_from(["", "\\boxed{1}", call]))


def own_replies(env: Env, seed: int) -> list[str]:
    """Replies in the env's own grammar: its random replies and its oracle's."""
    rng = random.Random(seed)
    replies = [env.random_response(rng) for _ in range(4)]
    oracle = env.oracle_response()
    return replies + ([oracle] if oracle else [])


@st.composite
def mutated(draw: st.DrawFn, env: Env) -> str:
    """One of the env's own replies, mutated."""
    text = draw(st.sampled_from(own_replies(env, draw(st.integers(0, 3)))))
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["numbers", "insert", "repeat", "cut", "wrap", "nest", "tag"]))
        if how == "numbers":
            text = re.sub(r"\d+", draw(st.sampled_from(HOSTILE_NUMBERS)), text)
        elif how == "insert":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.sampled_from(UNICODE_TRICKS)) + text[at:]
        elif how == "repeat":
            text = text * draw(st.integers(2, 200))
        elif how == "cut":
            text = text[: draw(st.integers(0, len(text)))]
        elif how == "wrap":
            tag = draw(st.sampled_from(["answer", "tool_call", "think"]))
            text = f"<{tag}>{text}</{tag}>" * draw(st.integers(1, 3))
        elif how == "nest":
            n = draw(st.integers(1, 2000))
            opener, closer = draw(st.sampled_from([("[", "]"), ("(", ")"), ("{", "}"), ("\\boxed{", "}")]))
            text = opener * n + text + closer * n
        else:
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.sampled_from(TAGS)) + text[at:]
    return text


def noise() -> st.SearchStrategy[str]:
    """Replies that follow no grammar: malformed tags, long text, unicode, brackets."""
    return st.one_of(
        st.lists(st.sampled_from(TAGS + UNICODE_TRICKS + ["Up", "1", ",", " "]), max_size=40).map("".join),
        st.text(max_size=200),
        st.builds(
            lambda c, n: c * n,
            st.sampled_from(["a", "[", "(", "{", "\\frac{1}{", "<answer>", "9"]),
            st.integers(1, 200_000),
        ),
        st.sampled_from(
            ["", " \n\t", "\\boxed{NaN}", "\\boxed{" + "9" * 5000 + "}", "\\boxed{9^{9^{9^{9}}}}"]
        ),
    )


def replies(env: Env) -> st.SearchStrategy[str]:
    return st.one_of(mutated(env), tool_calls(env), noise())


def assert_step_answers(env: Env, reply: str) -> bool:
    """Step ``reply`` under the hang guard; check the result's types; whether the episode ended."""
    result = within_deadline(lambda: env.step(reply), f"step({reply[:80]!r}...)")
    obs, done, info = result
    assert isinstance(obs, Observation) and isinstance(done, bool) and isinstance(info, StepInfo)
    assert math.isfinite(info.reward) and all(math.isfinite(float(v)) for v in info.metrics.values())
    return done


@pytest.mark.parametrize("name", ENV_NAMES)
def test_step_answers_any_reply(name):
    env = env_named(name)

    @FUZZ
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        env.reset(seed=data.draw(st.integers(0, 3)))
        for _ in range(data.draw(st.integers(1, 3))):
            if assert_step_answers(env, data.draw(replies(env))):
                break

    run()


# -- reset options and configs ---------------------------------------------------------------------

HOSTILE_VALUES: list[Any] = [
    True,
    False,
    -1,
    0,
    1,
    3,
    -(2**63),
    2**64,
    10**30,
    10**400,
    1.5,
    -0.0,
    1e308,
    4480,
    [4480, 4480],
    [8960, 4480],
    math.nan,
    math.inf,
    -math.inf,
    "",
    "x",
    "\u202e",
    "9" * 5000,
    None,
    [],
    {},
    {"a": 1},
    [True, False],
    [10**9, 10**9],
    [-1, 5],
    [0.5, 0.5],
    [math.nan, 1],
    ["bar"],
    [[1]],
    [[[[[]]]]],
    b"bytes",
    np.int64(-1),
    np.float64("nan"),
    np.array([10**6, 10**6]),
    np.bool_(True),
]
#: Option names many envs read, tried on every env as well as its own config keys.
COMMON_KEYS = [
    "max_turns",
    "image_size",
    "size",
    "kinds",
    "index",
    "level",
    "seed",
    "view",
    "render_mode",
    "difficulty",
]


def config_keys(env: Env) -> list[str]:
    own = list(env.config_class.model_fields) if isinstance(env, EpisodicEnv) else []
    return sorted({*own, *COMMON_KEYS})


@st.composite
def hostile_options(draw: st.DrawFn, env: Env) -> dict[str, Any]:
    keys = [*config_keys(env), "no_such_key", "\u202ekey"]
    return draw(
        st.dictionaries(st.sampled_from(keys), st.sampled_from(HOSTILE_VALUES), min_size=1, max_size=3)
    )


def check_accepted_or_value_error(call: Callable[[], Any], what: str) -> None:
    """``call`` (a reset) is refused with a ValueError, or plays an episode whose images are bounded."""
    try:
        obs, _ = within_deadline(call, what)
    except ValueError as err:  # pydantic's ValidationError is one
        assert str(err).strip(), f"{what} was refused without a message"
        return
    sizes = [im.size for im in obs.images]
    assert all(max(size) <= MAX_IMAGE_SIDE for size in sizes), f"{what} was accepted with images of {sizes}"


def check_as_option_and_config(name: str, options: dict[str, Any]) -> None:
    env = env_named(name)
    check_accepted_or_value_error(
        lambda: env.reset(seed=0, options=options), f"reset(options={options!r:.200})"
    )
    check_accepted_or_value_error(
        lambda: build_env(name, **options).reset(seed=0), f"build_env({name!r}, **{options!r:.200})"
    )


@pytest.mark.parametrize("name", ENV_NAMES)
def test_every_hostile_value_of_every_key_is_accepted_or_refused_with_a_value_error(name):
    """Each key alone with each hostile value, as a reset option and as a config."""
    for key in config_keys(env_named(name)):
        for value in HOSTILE_VALUES:
            check_as_option_and_config(name, {key: value})


@pytest.mark.parametrize("name", ENV_NAMES)
def test_hostile_option_mixes_are_accepted_or_refused_with_a_value_error(name):
    env = env_named(name)

    @FUZZ
    @given(options=hostile_options(env))
    def run(options: dict[str, Any]) -> None:
        check_accepted_or_value_error(
            lambda: env.reset(seed=0, options=options), f"reset(options={options!r:.200})"
        )
        obs, _ = env.reset(seed=0)  # a refused option leaves the env able to play
        assert isinstance(obs, Observation)

    run()
