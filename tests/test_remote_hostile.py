"""RemoteEnv treats its server as hostile: against a real WebSocket server on loopback that answers
each request with a malformed reply (a missing key, a wrong type, ``done: "no"``, NaN, deep nesting, a
decompression bomb, an extra frame, a binary frame, text that is not JSON, a reply to another
request...), every call raises a one-line RemoteEnvError, the session is closed, and a bomb is refused
at its PNG header: the client's memory does not move."""

from __future__ import annotations

import base64
import json
import struct
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from hostile_ws_server import HostileServer, Session, frame, png_of_zeros, well_behaved

from vlm_envs.envs.config import MAX_IMAGE_SIDE
from vlm_envs.imaging.decode import png_header
from vlm_envs.protocol import EpisodeFinishedError
from vlm_envs.remote import RemoteEnv, RemoteEnvError
from vlm_envs.remote_wire import MAX_REPLY_PIXELS
from vlm_envs.rewards import RewardError
from vlm_envs.serve.wire import MAX_STATE_KEY_CHARS, MAX_STATE_TEXT_CHARS

#: The issue's bomb: a 13000x13000 RGBA PNG of zeros, under 1 MB, 676 MB decoded.
BOMB_SIDE = 13000


@pytest.fixture(scope="module")
def bomb() -> str:
    data = png_of_zeros(BOMB_SIDE, BOMB_SIDE)
    assert len(data) < 1 << 20 and png_header(data) == (BOMB_SIDE, BOMB_SIDE)
    return base64.b64encode(data).decode()


def png_b64(width: int, height: int) -> str:
    return base64.b64encode(png_of_zeros(width, height)).decode()


def corrupt_idat(width: int, height: int) -> bytes:
    """A PNG whose every chunk's CRC holds, its image data not a deflate stream."""
    png = png_of_zeros(width, height)
    at = png.index(b"IDAT") - 4
    (length,) = struct.unpack(">I", png[at : at + 4])
    junk = b"\xff" * length
    idat = struct.pack(">I", length) + b"IDAT" + junk + struct.pack(">I", zlib.crc32(b"IDAT" + junk))
    return png[:at] + idat + png[at + 12 + length :]


def mutate(change: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any], Session], dict[str, Any]]:
    """A reply builder applying ``change`` to the well-formed reply (reset or step, as asked)."""

    def build(request: dict[str, Any], session: Session) -> dict[str, Any]:
        body = session.reset_reply(request) if request["type"] == "reset" else session.step_reply()
        change(body)
        return body

    return build


def on(op: str, answer: Callable[[dict[str, Any], Session], list[str | bytes]]):
    """A script answering ``op`` with ``answer`` and everything else well."""

    def script(request: dict[str, Any], session: Session) -> list[str | bytes]:
        return answer(request, session) if request["type"] == op else well_behaved(request, session)

    return script


def as_frame(build: Callable[[dict[str, Any], Session], dict[str, Any]], raw: Callable[[str], str] = str):
    return lambda request, session: [raw(frame("observation", build(request, session)))]


def setter(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """``body[a][b] = value`` for ``path`` ``"a.b"``."""
    *parents, last = path.split(".")

    def change(body: dict[str, Any]) -> None:
        for key in parents:
            body = body[key]
        body[last] = value

    return change


def deleter(path: str) -> Callable[[dict[str, Any]], None]:
    *parents, last = path.split(".")

    def change(body: dict[str, Any]) -> None:
        for key in parents:
            body = body[key]
        del body[last]

    return change


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = {"x": value}
    return value


#: Each malformed reply (to the reset unless named), and what the error must say.
MALFORMED: dict[str, tuple[str, Any, str]] = {
    "no observation": ("reset", as_frame(mutate(deleter("observation"))), "observation: Field required"),
    "no metadata": ("reset", as_frame(mutate(deleter("metadata"))), "metadata: Field required"),
    "no session id": (
        "reset",
        as_frame(mutate(deleter("metadata.session_id"))),
        "session_id: Field required",
    ),
    "no tools": ("reset", as_frame(mutate(deleter("metadata.tools"))), "tools: Field required"),
    "done is 'no'": ("step", as_frame(mutate(setter("done", "no"))), "done: Input should be a valid boolean"),
    "done is 0": ("step", as_frame(mutate(setter("done", 0))), "done: Input should be a valid boolean"),
    "terminated is 1": ("step", as_frame(mutate(setter("metadata.terminated", 1))), "terminated: Input"),
    "reward is text": (
        "step",
        as_frame(mutate(setter("reward", "1"))),
        "reward: Input should be a valid number",
    ),
    "reward is true": (
        "step",
        as_frame(mutate(setter("reward", True))),
        "reward: Input should be a valid number",
    ),
    "reward beyond floats": ("step", as_frame(mutate(setter("reward", 10**400))), "reward: Input should be"),
    "reward NaN": ("step", as_frame(mutate(setter("reward", float("nan")))), "not JSON: NaN"),
    "Infinity in info": ("step", as_frame(mutate(setter("metadata.info", {"a": float("inf")}))), "Infinity"),
    "1e999 in info": (
        "step",
        as_frame(mutate(setter("metadata.info", {"a": 1.5})), lambda t: t.replace("1.5", "1e999")),
        "beyond any float",
    ),
    "text is a number": ("reset", as_frame(mutate(setter("observation.text", 5))), "text: Input should be"),
    "images is a string": ("reset", as_frame(mutate(setter("observation.images", "iVBOR"))), "images: Input"),
    "image is a number": ("reset", as_frame(mutate(setter("observation.images", [7]))), "images.0: Input"),
    "image slot is text": (
        "reset",
        as_frame(mutate(setter("observation.image_slots", ["0"]))),
        "image_slots.0",
    ),
    "image slot past the text": (
        "reset",
        as_frame(mutate(setter("observation.image_slots", [10**6]))),
        "observation: image slots (1000000,) must be non-decreasing",
    ),
    "role is system": (
        "reset",
        as_frame(mutate(setter("observation.role", "system"))),
        "role: Input should be",
    ),
    "metric is text": ("step", as_frame(mutate(setter("metadata.metrics", {"a": "1"}))), "metrics.a"),
    "has_episode_reward is 'yes'": (
        "reset",
        as_frame(mutate(setter("metadata.has_episode_reward", "yes"))),
        "has_episode_reward: Input should be a valid boolean",
    ),
    "tools is a dict": ("reset", as_frame(mutate(setter("metadata.tools", {}))), "tools: Input should be"),
    "status unknown": ("step", as_frame(mutate(setter("metadata.status", "won"))), "status: Input should be"),
    "nested 100 deep": (
        "step",
        as_frame(mutate(setter("metadata.info", nested(100)))),
        "nested deeper than 32",
    ),
    "nested 5000 deep": (
        "step",
        lambda request, session: ["[" * 5000 + "]" * 5000],
        "nested deeper than 32",
    ),
    "a million values": (
        "step",
        lambda r, s: ["[" + "0," * 1_000_001 + "0]"],
        "more than 1,000,000 JSON values",
    ),
    "not JSON": ("step", lambda r, s: ["{nope"], "not JSON"),
    "a JSON list": ("step", lambda r, s: ["[1, 2]"], "a JSON list, not an object"),
    "no type": ("step", lambda r, s: [json.dumps({"data": {}})], "'type' must be a string, got nothing"),
    "data is a list": (
        "step",
        lambda r, s: [json.dumps({"type": "observation", "data": []})],
        "'data' must be",
    ),
    "a binary frame": (
        "step",
        lambda r, s: [frame("observation", s.step_reply()).encode()],
        "a binary frame",
    ),
    "a state frame for a step": (
        "step",
        lambda r, s: [frame("state", s.state_reply())],
        "'state' frame, not",
    ),
    "an error with a bad status": (
        "step",
        lambda r, s: [json.dumps({"type": "error", "data": {"message": "x", "status": "500"}})],
        "status: Input should be a valid integer",
    ),
    "another episode": (
        "reset",
        as_frame(mutate(setter("metadata.episode_id", "f" * 32))),
        "names episode 'fffff",
    ),
    "a reply to a later step": (
        "step",
        lambda r, s: [frame("observation", s.step_reply(step=2))],
        "the reply is to step 2, not to step 1",
    ),
    "another session": (
        "step",
        as_frame(mutate(setter("metadata.session_id", "6" * 32))),
        "another session or episode",
    ),
    "a reset reply for a step": (
        "step",
        lambda r, s: [frame("observation", s.reset_reply({"data": {"episode_id": s.episode_id}}))],
        "step: Field required",
    ),
    "not base64": ("reset", as_frame(mutate(setter("observation.images", ["@@@"]))), "image 0 is not base64"),
    "not a PNG": (
        "reset",
        as_frame(mutate(setter("observation.images", [base64.b64encode(b"GIF89a" + b"\0" * 40).decode()]))),
        "image 0: not a PNG",
    ),
    "a PNG cut short": (
        "reset",
        as_frame(mutate(setter("observation.images", [png_b64(64, 64)[:80]]))),
        "image 0 does not decode",
    ),
    "a side too long": (
        "reset",
        as_frame(mutate(setter("observation.images", [png_b64(MAX_IMAGE_SIDE + 1, 1)]))),
        f"image 0 is {MAX_IMAGE_SIDE + 1}x1 px",
    ),
    "too many pixels together": (
        "reset",
        as_frame(mutate(setter("observation.images", [png_b64(MAX_IMAGE_SIDE, MAX_IMAGE_SIDE)] * 5))),
        f"more than {MAX_REPLY_PIXELS:,} pixels",
    ),
    "image modes for other images": (
        "reset",
        as_frame(mutate(setter("observation.image_modes", ["RGB", "RGB"]))),
        "'image_modes' must name one of",
    ),
    "an image mode PNG lacks": (
        "reset",
        as_frame(mutate(setter("observation.image_modes", ["CMYK"]))),
        "'image_modes' must name one of",
    ),
    "an image of another mode": (  # png_b64 is RGBA; the reply says RGB
        "reset",
        as_frame(mutate(setter("observation.images", [png_b64(3, 5)]))),
        "image 0 is a RGBA PNG, not the RGB it is said to be",
    ),
    "image data that does not inflate, under good CRCs": (
        "reset",
        as_frame(mutate(setter("observation.images", [base64.b64encode(corrupt_idat(3, 5)).decode()]))),
        "image 0 does not decode: the PNG's image data does not inflate",
    ),
    "state key is a number": (
        "step",
        as_frame(mutate(setter("metadata.state_key", 5))),
        "state_key: Input should be a valid string",
    ),
    "state key too long": (
        "reset",
        as_frame(mutate(setter("metadata.state_key", "k" * (MAX_STATE_KEY_CHARS + 1)))),
        f"state_key: String should have at most {MAX_STATE_KEY_CHARS} characters",
    ),
    "state text is a list": (
        "step",
        as_frame(mutate(setter("metadata.state_text", ["#"]))),
        "state_text: Input should be a valid string",
    ),
    "state text too long": (
        "step",
        as_frame(mutate(setter("metadata.state_text", "#" * (MAX_STATE_TEXT_CHARS + 1)))),
        f"state_text: String should have at most {MAX_STATE_TEXT_CHARS} characters",
    ),
    "distance below unreachable": (
        "step",
        as_frame(mutate(setter("metadata.distance_to_goal", -2))),
        "distance_to_goal: Input should be greater than or equal to -1",
    ),
    "distance is text": (
        "reset",
        as_frame(mutate(setter("metadata.distance_to_goal", "3"))),
        "distance_to_goal: Input should be a valid integer",
    ),
    "distance is true": (
        "step",
        as_frame(mutate(setter("metadata.distance_to_goal", True))),
        "distance_to_goal: Input should be a valid integer",
    ),
    "distance is 2.0": (
        "step",
        as_frame(mutate(setter("metadata.distance_to_goal", 2.0))),
        "distance_to_goal: Input should be a valid integer",
    ),
    "distance past int64": (
        "step",
        as_frame(mutate(setter("metadata.distance_to_goal", 1 << 63))),
        "distance_to_goal: Input should be less than",
    ),
    "a signal error of another name": (
        "step",
        as_frame(mutate(setter("metadata.signal_errors", {"reward": "down"}))),
        "signal_errors.reward.[key]: Input should be",
    ),
    "a signal error too long": (
        "reset",
        as_frame(mutate(setter("metadata.signal_errors", {"state_key": "x" * 301}))),
        "signal_errors.state_key: String should have at most 300 characters",
    ),
    "too many images": (
        "reset",
        as_frame(mutate(setter("observation.images", [png_b64(1, 1)] * 17))),
        "images: List should have at most 16 items",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_each_malformed_reply_is_a_one_line_remote_env_error_that_closes_the_session(case: str) -> None:
    op, answer, reason = MALFORMED[case]
    with HostileServer(on(op, answer)) as url:
        env = RemoteEnv(url, "probe", timeout_s=10)
        with pytest.raises(RemoteEnvError) as caught:
            env.reset(seed=1)
            env.step("go")
        message = str(caught.value)
        assert type(caught.value) is RemoteEnvError and "\n" not in message and len(message) < 500, message
        assert f"malformed reply to {op}, session closed" in message and reason in message, message
        with pytest.raises(RemoteEnvError, match="no episode in this session: reset first"):
            env.step("again")  # the session is gone; nothing later can answer the wrong request
        with pytest.raises(RewardError, match="the episode has no reward: the session ended"):
            env.episode_reward()  # never a score for an episode the server broke off
        env.close()


def test_where_the_episode_stands_is_the_latest_replys() -> None:
    """The signals come from the latest reply (none before a reset, nor from a server before them); one the
    server could not give raises its reason where it is asked for, the others are read."""

    def script(request: dict[str, Any], session: Session) -> list[str | bytes]:
        if request["type"] == "reset" and request["data"]["seed"] == 1:
            reply = session.reset_reply(request, state_key="k1", state_text="A", distance_to_goal=2)
        elif request["type"] == "step":
            failed = {"state_key": "state_key() raised RuntimeError: down\nnow"}
            reply = session.step_reply(state_key=None, distance_to_goal=-1, signal_errors=failed)
        else:
            return well_behaved(request, session)
        return [frame("observation", reply)]

    with HostileServer(script) as url:
        env = RemoteEnv(url, "probe", timeout_s=10)
        assert (env.state_key(), env.state_text(), env.distance_to_goal()) == (None, None, None)
        env.reset(seed=1)
        assert (env.state_key(), env.state_text(), env.distance_to_goal()) == ("k1", "A", 2)
        env.step("go")
        assert (env.state_text(), env.distance_to_goal()) == (None, -1)
        with pytest.raises(RemoteEnvError) as caught:
            env.state_key()
        assert str(caught.value) == f"{url}: the served env failed: state_key() raised RuntimeError: down now"
        env.reset(seed=2)  # a reply without them: an env that does not say
        assert (env.state_key(), env.state_text(), env.distance_to_goal()) == (None, None, None)
        env.close()


def test_after_a_malformed_reply_the_next_reset_opens_a_fresh_session() -> None:
    server = HostileServer(on("step", lambda r, s: ["{nope"]))
    with server as url:
        env = RemoteEnv(url, "probe", timeout_s=10)
        env.reset(seed=1)
        with pytest.raises(RemoteEnvError, match="not JSON"):
            env.step("go")
        server.script = well_behaved
        obs, info = env.reset(seed=2)
        assert obs.text == "start" and info == {"seed": 2} and server.connections == 2
        assert env.step("go")[0].text == "step 1"
        env.close()


def test_an_extra_frame_never_shifts_the_replies() -> None:
    """The server answers the first step twice: the client refuses at once or at the next step, and
    never takes the stale frame as the next step's reply."""

    def twice(request: dict[str, Any], session: Session) -> list[str | bytes]:
        reply = frame("observation", session.step_reply())
        return [reply, reply] if session.steps == 1 else [reply]

    with HostileServer(on("step", twice)) as url:
        env = RemoteEnv(url, "probe", timeout_s=10)
        env.reset(seed=1)
        with pytest.raises(RemoteEnvError, match=r"a second frame for one request|not to step 2"):
            env.step("one")
            env.step("two")
        env.close()


def test_an_unsolicited_error_frame_closes_the_session() -> None:
    """A server's error frame ends the connection, so a reply still queued behind it is never read as
    the answer to a later request."""

    def error_then_reply(request: dict[str, Any], session: Session) -> list[str | bytes]:
        error = json.dumps({"type": "error", "data": {"message": "busy\nreally\x1b[31m", "status": 503}})
        return [error, frame("observation", session.step_reply())]

    with HostileServer(on("step", error_then_reply)) as url:
        env = RemoteEnv(url, "probe", timeout_s=10)
        env.reset(seed=1)
        with pytest.raises(RemoteEnvError) as caught:
            env.step("go")
        assert str(caught.value).endswith(": busy really[31m") and caught.value.status == 503
        with pytest.raises(RemoteEnvError, match="reset first"):
            env.step("go")
        env.close()


def test_a_server_that_never_answers_is_a_timeout() -> None:
    with HostileServer(on("step", lambda r, s: [])) as url:
        env = RemoteEnv(url, "probe", timeout_s=0.5)
        env.reset(seed=1)
        with pytest.raises(RemoteEnvError, match=r"the session on .* ended"):
            env.step("go")
        env.close()


def test_a_step_after_the_end_and_the_state_are_paired_too() -> None:
    def finish(request: dict[str, Any], session: Session) -> list[str | bytes]:
        return [frame("observation", session.step_reply(done=True))]

    server = HostileServer(on("step", finish))
    with server as url:
        env = RemoteEnv(url, "probe", timeout_s=10)
        env.reset(seed=1)
        assert env.oracle_response() == "ok"
        assert env.step("go")[1] is True
        with pytest.raises(EpisodeFinishedError):
            env.step("again")
        server.script = on("state", lambda r, s: [frame("state", {**s.state_reply(), "step_count": 0})])
        with pytest.raises(RemoteEnvError, match="at step 0, not this one at step 1"):
            env.oracle_response()
        env.close()


def test_a_decompression_bomb_is_refused_at_its_header(bomb: str) -> None:
    with HostileServer(on("reset", as_frame(mutate(setter("observation.images", [bomb]))))) as url:
        env = RemoteEnv(url, "probe", timeout_s=30)
        with pytest.raises(RemoteEnvError, match=f"image 0 is {BOMB_SIDE}x{BOMB_SIDE} px; each side may be"):
            env.reset(seed=1)
        env.close()


CHILD = textwrap.dedent(
    """
    import resource, sys
    from vlm_envs.remote import RemoteEnv

    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024

    env = RemoteEnv(sys.argv[1], "probe", timeout_s=60)
    env.reset(seed=0)  # a well-formed reply first: everything imported and warm
    before, refused = peak(), 0
    for seed in range(1, 13):  # the issue's twelve
        try:
            env.reset(seed=seed)
        except Exception as err:
            refused += type(err).__name__ == "RemoteEnvError"
    print(before, peak(), refused)
    """
)


def test_twelve_bombs_leave_the_clients_memory_where_it_was(bomb: str) -> None:
    """In a fresh process (its peak RSS is its own): twelve 676 MB bombs raise the peak by little."""

    def script(request: dict[str, Any], session: Session) -> list[str | bytes]:
        body = session.reset_reply(request)
        if request["data"]["seed"]:
            body["observation"]["images"] = [bomb]
        return [frame("observation", body)]

    with HostileServer(script) as url:
        done = subprocess.run([sys.executable, "-c", CHILD, url], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    before, after, refused = map(int, done.stdout.split())
    print(f"client peak RSS: {before} MB before the bombs, {after} MB after twelve")
    assert refused == 12 and after - before < 50, (before, after)


def test_image_sizes_come_from_the_header_alone() -> None:
    assert png_header(png_of_zeros(3, 5)) == (3, 5)
    bare = mutate(lambda body: body["observation"].update(images=[png_b64(3, 5)], image_modes=None))
    with HostileServer(on("reset", as_frame(bare))) as url:  # a server before image_modes
        env = RemoteEnv(url, "probe", timeout_s=10)
        obs, _ = env.reset(seed=1)
        assert obs.images[0].size == (3, 5) and obs.images[0].mode == "RGBA"
        env.close()
