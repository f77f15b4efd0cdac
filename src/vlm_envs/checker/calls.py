"""The checks of single calls: what ``reset``, ``step`` and ``format_observation`` return, replies
no env may fail on, the end of an episode, the oracle and ``close``."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import threading
from typing import Any

from PIL import Image
from pydantic import ValidationError

from vlm_envs.envs.config import MAX_TURNS
from vlm_envs.imaging import attached_png
from vlm_envs.imaging.decode import decode_png
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
    "Arabic-Indic digits": "<answer>6+1=7\u0663</answer><answer>A\u0663 \u0663:\u0664\u0665</answer>",
    "fullwidth digits": "<answer>\uff16 + \uff13 = \uff19, B\uff12, swap(\uff11,\uff12)</answer>",
    "superscript digits": "<answer>6\u00b2+1=7\u00b3 C\u00b3 swap(\u00b9,\u00b2)</answer>",
    "case-folding letters": "<answer>\u212a3, \u0130 up 2, \u017f1</answer>",
}

#: Replies that are not text (a buggy policy, a trainer passing ids or bytes): the protocol refuses each
#: with ``TypeError`` before the env's ``step`` runs (:func:`vlm_envs.protocol.check_response_text`).
NON_TEXT_RESPONSES: dict[str, Any] = {
    "None": None,
    "an int": 5,
    "a dict": {},
    "a list": ["<answer>Up</answer>"],
    "bytes": b"<answer>Up</answer>",
    "invalid UTF-8 bytes": b"\xff\xfe<image>",
}
#: Digits a model may write that are not ASCII (``\d`` matches the first two, ``str.isdigit`` all three, and
#: ``int()`` reads the first two): tried in place of the digits of the env's own replies.
UNICODE_DIGITS: dict[str, str] = {
    "Arabic-Indic": "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669",
    "fullwidth": "\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19",
    "superscript": "\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079",
}
#: Letters that are not ASCII but match ``[A-Za-z]`` under ``re.IGNORECASE`` (Kelvin sign, long s, dotted
#: capital I, dotless i); the ``upper()`` of the Kelvin sign and of the dotted I is not ASCII.
CASE_FOLDING_LETTERS = str.maketrans(
    {"K": "\u212a", "k": "\u212a", "S": "\u017f", "s": "\u017f", "I": "\u0130", "i": "\u0131"}
)

_TAG = re.compile(r"(<[^<>]*>)")

#: Numbers past what a float holds, as a model may write them in a tool call's JSON.
HUGE_NUMBERS = ("9" * 400, "-" + "9" * 309, "1e999", "NaN")
#: Steps taken to drive an episode to its end before calling it endless: the most turns a config may give
#: an episode, so every turn cap a config validates ends within it.
MAX_STEPS_TO_END = MAX_TURNS
#: The malformed reply :func:`check_malformed_replies_end` sends again and again.
MALFORMED_REPLY = "<answer></answer><tool_call></tool_call>"
#: Episodes the oracle (``oracle_response``), where an env has one, must win.
ORACLE_SEEDS = 3
#: Steps of a scripted episode: the types check reads each result, replay fingerprints them.
SCRIPTED_STEPS = 8
#: How much of an exception's text a message quotes (an error may echo a megabyte of reply).
ERROR_CHARS = 500

#: What to change when an env raises where it should answer.
RAISE_HINT = "Make reset and step answer every input with an observation; raise only after the end."


def error_text(err: BaseException) -> str:
    """``Type: message``, whole: pydantic's errors as their messages, long texts cut at a word."""
    if isinstance(err, ValidationError):
        text = "; ".join(str(e["msg"]) for e in err.errors())
    else:
        text = " ".join(str(err).split())
    if len(text) > ERROR_CHARS:
        text = text[:ERROR_CHARS].rsplit(" ", 1)[0] + " [... cut]"
    return f"{type(err).__name__}: {text.rstrip('.')}" if text else type(err).__name__


def image_digest(im: Image.Image) -> str:
    """A digest of an image's mode, size and pixels."""
    return hashlib.sha256(f"{im.mode}{im.size}".encode() + im.tobytes()).hexdigest()


def check_reset_and_messages(env: Env, seed: int) -> list[str]:
    out = env.reset(seed=seed)
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict)):
        return [f"reset() returned {type(out).__name__}. Return a tuple (Observation, info dict)."]
    failures = _check_observation("reset()", env, out[0])
    rng = random.Random(seed)
    for i in range(SCRIPTED_STEPS):
        response = env.random_response(rng)
        result = env.step(response)
        failures += _check_step_result(f"step #{i + 1}", env, result)
        if failures or result[1]:
            break
    return failures


def _check_observation(where: str, env: Env, obs: Any) -> list[str]:
    if not isinstance(obs, Observation):
        return [f"{where} returned {type(obs).__name__} as its observation. Return a vlm_envs.Observation."]
    failures = [
        f"{where}: image {i} is {type(im).__name__} of size {getattr(im, 'size', '?')}. "
        "Give non-empty PIL images in mode RGB, RGBA or L."
        for i, im in enumerate(obs.images)
        if not (
            isinstance(im, Image.Image) and im.width > 0 and im.height > 0 and im.mode in ("RGB", "RGBA", "L")
        )
    ]
    failures += [
        f"{where}: image {i}'s attached PNG (attach_png) does not decode to the image's pixels. "
        "Attach the bytes of exactly this image, or none."
        for i, im in enumerate(obs.images)
        if not failures and not _attached_png_holds(im)
    ]
    message = env.format_observation(obs)
    hint = "Return one chat message with the observation's parts, as Env.format_observation does."
    return failures + [f"{where}: format_observation {p}. {hint}" for p in _message_problems(message, obs)]


def _attached_png_holds(image: Image.Image) -> bool:
    """Whether the PNG attached to ``image`` (if any) decodes to its pixels, in its mode or a palette."""
    png = attached_png(image)
    if png is None:
        return True
    try:
        decoded = decode_png(png)
    except ValueError:
        return False
    return decoded.mode in (image.mode, "P") and decoded.convert(image.mode).tobytes() == image.tobytes()


def _message_problems(message: Any, obs: Observation) -> list[str]:
    if not isinstance(message, dict) or "role" not in message or "content" not in message:
        return [f"gave {message!r:.200}, not a dict with 'role' and 'content'"]
    problems = []
    if message["role"] != obs.role:
        problems.append(f"gave the role {message['role']!r}, but the observation's role is {obs.role!r}")
    content = message["content"]
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        return [*problems, "gave content that is neither a string nor a list of part dicts"]
    images = [p for p in parts if p.get("type") == "image"]
    for p in parts:
        if p.get("type") not in ("text", "image"):
            problems.append(f"gave the unknown part type {p.get('type')!r} (use 'text' or 'image')")
        elif p["type"] == "text" and not isinstance(p.get("text"), str):
            problems.append("gave a text part without a string 'text'")
    if len(images) != len(obs.images):
        problems.append(f"gave {len(images)} image part(s) for {len(obs.images)} observation image(s)")
    else:
        for i, (part, im) in enumerate(zip(images, obs.images, strict=True)):
            if "image" in part and not _same_image(part["image"], im):
                problems.append(f"gave an image part {i} that does not hold the observation's image {i}")
    return problems


def _same_image(a: Any, b: Image.Image) -> bool:
    return a is b or (isinstance(a, Image.Image) and image_digest(a) == image_digest(b))


def _check_step_result(where: str, env: Env, result: Any) -> list[str]:
    if not (isinstance(result, tuple) and len(result) == 3):
        return [f"{where} returned {type(result).__name__}. Return a tuple (Observation, done, StepInfo)."]
    obs, done, info = result
    failures = _check_observation(where, env, obs)
    if not isinstance(done, bool):
        failures.append(f"{where}: done is a {type(done).__name__}. Return done as a bool.")
    if not isinstance(info, StepInfo):
        return [*failures, f"{where}: the third item is a {type(info).__name__}. Return a vlm_envs.StepInfo."]
    if not math.isfinite(info.reward):
        failures.append(f"{where}: reward {info.reward} is not finite. Give every step a finite reward.")
    failures += [
        f"{where}: metric {k!r} = {v!r} is not a finite number. Give metrics finite numbers or bools."
        for k, v in info.metrics.items()
        if not math.isfinite(float(v))
    ]
    if (info.terminated or info.truncated) and done is False:
        failures.append(f"{where}: StepInfo says the episode ended but done is False. Return done=True.")
    return failures


#: What to change when the placeholder reply breaks an env: text is literal, images are placed apart.
_PLACEHOLDER_HINT = (
    "Observation text is literal, so quoting a reply is safe: build the observation with "
    'Observation(text=...) or Observation.compose("You wrote: ", reply, image), which places images '
    "itself, and never read <image> in model text (Observation.with_placeholders and from_dict are for "
    "trusted dataset text only)."
)


def _step_with_timeout(env: Env, response: Any, timeout: float) -> tuple[Any, BaseException | None, bool]:
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


def tool_probes(env: Env) -> dict[str, str]:
    """Calls of each of the env's own tools (:meth:`Env.tools`) with a huge number for every argument, alone
    and as a list of four (a bbox of 400-digit integers once broke a zoom tool's ``float()``)."""
    probes = {}
    for tool in env.tools():
        function = tool.get("function", tool)
        name, keys = function.get("name"), list(function.get("parameters", {}).get("properties", {}))
        for number in HUGE_NUMBERS:
            for value, shape in ((number, ""), (f"[{', '.join([number] * 4)}]", " in a list")):
                arguments = ", ".join(f"{json.dumps(key)}: {value}" for key in keys)
                call = f'{{"name": {json.dumps(name)}, "arguments": {{{arguments}}}}}'
                probes[f"tool {name!r} given {number:.8}{shape}"] = f"<tool_call>{call}</tool_call>"
    return probes


def lookalike_probes(env: Env, seed: int) -> dict[str, str]:
    """The env's own replies (its random reply and, where it has one, its oracle's) with their ASCII digits
    swapped for each family of :data:`UNICODE_DIGITS` and their letters for :data:`CASE_FOLDING_LETTERS`:
    replies that parse like real ones but must not be read as them (``6+1=7\u0663`` once broke a parser).
    Tags (``<answer>``) are kept as written."""
    env.reset(seed=seed)
    own = {"random": env.random_response(random.Random(seed)), "oracle": env.oracle_response()}
    probes = {}
    for source, reply in own.items():
        if not isinstance(reply, str):
            continue
        tables = {f"{family} digits": str.maketrans("0123456789", d) for family, d in UNICODE_DIGITS.items()}
        for kind, table in {**tables, "case-folding letters": CASE_FOLDING_LETTERS}.items():
            changed = "".join(p if _TAG.fullmatch(p) else p.translate(table) for p in _TAG.split(reply))
            if changed != reply:
                probes[f"the {source} reply with {kind}"] = changed
    return probes


def check_hostile(env: Env, seed: int, step_timeout: float) -> list[str]:
    failures: list[str] = []
    probes = {**HOSTILE_RESPONSES, **tool_probes(env), **lookalike_probes(env, seed)}
    env.reset(seed=seed)
    for label, response in {**probes, **NON_TEXT_RESPONSES}.items():
        result, error, hung = _step_with_timeout(env, response, step_timeout)
        if hung:
            return [
                *failures,
                f"step({label}) did not return within {step_timeout} s. Bound the work a reply can cause "
                "(cap its length, cap parsing and checking in time).",
            ]
        if label in NON_TEXT_RESPONSES:
            failures += _non_text_problems(label, error)
        elif error is not None:
            hint = _PLACEHOLDER_HINT if "<image>" in str(response) else "Answer it with an observation."
            failures.append(f"step({label}) raised {error_text(error)}. A reply is untrusted text. {hint}")
        else:
            failures += _check_step_result(f"step({label})", env, result)
        if error is not None or result[1]:
            env.reset(seed=seed)
    return failures


def _non_text_problems(label: str, error: BaseException | None) -> list[str]:
    """A reply that is not a str must be refused with ``TypeError`` (the protocol's guard of ``step``)."""
    hint = (
        "Define step as a method of your Env subclass (the protocol then refuses a reply that is not a str "
        "with TypeError before your step runs), and never make text of other types."
    )
    if error is None:
        return [f"step({label}) was answered, not refused with TypeError. {hint}"]
    if not isinstance(error, TypeError):
        return [f"step({label}) raised {error_text(error)}, not TypeError. {hint}"]
    return []


def check_step_after_end(env: Env, seed: int) -> list[str]:
    env.reset(seed=seed)
    rng = random.Random(seed)
    for _ in range(MAX_STEPS_TO_END):
        if env.step(env.random_response(rng))[1]:
            break
    else:
        return [f"The episode did not end within {MAX_STEPS_TO_END} steps. Cap its length (max_turns)."]
    hint = "Raise vlm_envs.EpisodeFinishedError with a message saying to call reset()."
    try:
        env.step("<answer>Up</answer>")
    except RuntimeError as err:
        return [] if str(err) else [f"step() after the end raised a RuntimeError without a message. {hint}"]
    except Exception as err:
        return [f"step() after the end raised {type(err).__name__}. {hint}"]
    return [f"step() after the episode ended did not raise. {hint}"]


def check_malformed_replies_end(env: Env, seed: int) -> list[str]:
    """A stream of malformed replies ends the episode (a policy stuck on garbage must not loop forever)."""
    env.reset(seed=seed)
    for _ in range(MAX_STEPS_TO_END):
        if env.step(MALFORMED_REPLY)[1]:
            return []
    return [
        f"The episode did not end within {MAX_STEPS_TO_END} malformed replies ({MALFORMED_REPLY!r}). Cap the "
        "turns, malformed ones included (a max_turns, or a cap on invalid replies)."
    ]


def check_oracle(env: Env, seed: int) -> list[str]:
    """Where the env has an oracle, it wins episodes of several seeds (ends them with a reward > 0)."""
    if type(env).oracle_response is Env.oracle_response:
        return []
    failures = []
    for episode_seed in range(seed, seed + ORACLE_SEEDS):
        env.reset(seed=episode_seed)
        for _ in range(MAX_STEPS_TO_END):
            reply = env.oracle_response()
            if reply is None:
                failures.append(
                    f"oracle_response() gave None mid-episode (seed={episode_seed}). Return the winning "
                    "reply whenever an episode is running."
                )
                break
            if env.step(reply)[1]:
                if not env.episode_reward() > 0:
                    failures.append(
                        f"The oracle lost the episode of seed={episode_seed} (reward "
                        f"{env.episode_reward()}). Make oracle_response() write the winning reply."
                    )
                break
        else:
            failures.append(
                f"The oracle did not end the episode of seed={episode_seed} in {MAX_STEPS_TO_END} steps. "
                "Make oracle_response() write replies that finish the task."
            )
    return failures


def check_close(env: Env, seed: int) -> list[str]:
    try:
        env.close()
        env.close()
    except Exception as err:
        return [f"close() twice raised {error_text(err)}. Make close() idempotent."]
    return []
