"""A scripted stand-in for ``vlm-envs serve``'s WebSocket, on a loopback port, for RemoteEnv's tests: a
real websockets server whose every answer a test chooses, well-formed (the real server's own encoder,
:func:`vlm_envs.serve.wire.reply_body`) or hostile."""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Callable
from typing import Any

from PIL import Image
from websockets.sync.server import ServerConnection, serve

from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.serve.wire import reply_body

#: What a script answers one request with: the frames to send (text or bytes), in order.
Script = Callable[[dict[str, Any], "Session"], list[str | bytes]]
SESSION_ID = "5" * 32


class Session:
    """One connection's view of its episode, as the real server keeps it."""

    def __init__(self) -> None:
        self.episode_id: str | None = None
        self.steps = 0
        self.requests: list[dict[str, Any]] = []

    def reset_reply(self, request: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """A well-formed reply to ``request`` (a reset), its metadata updated with ``extra``."""
        self.episode_id, self.steps = request["data"].get("episode_id") or "e" * 32, 0
        meta = {
            "session_id": SESSION_ID,
            "episode_id": self.episode_id,
            "env": "probe",
            "system_prompt": "Play.",
            "tools": [],
            "has_episode_reward": True,
            "reset_info": {"seed": request["data"].get("seed")},
            "reward_error": None,
            **extra,
        }
        return _body(obs_with_image("start"), None, False, 0.0, meta)

    def step_reply(self, done: bool = False, reward: float | None = 0.5, **extra: Any) -> dict[str, Any]:
        """A well-formed reply to the next step, its metadata updated with ``extra``."""
        self.steps += 1
        meta = {"session_id": SESSION_ID, "episode_id": self.episode_id, "step": self.steps, **extra}
        body = _body(obs_with_image(f"step {self.steps}"), StepInfo(reward=0.0), done, 0.5, meta)
        body["reward"] = reward
        return body

    def state_reply(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "step_count": self.steps,
            "done": False,
            "oracle_response": "ok",
        }


def obs_with_image(text: str) -> Observation:
    return Observation.compose(text, Image.new("RGB", (8, 8), "red"))


def _body(obs: Observation, info: StepInfo | None, done: bool, episode_reward: float, meta: dict) -> dict:
    body = json.loads(reply_body(obs, info, done, episode_reward, {}))
    body["metadata"].update(meta)
    return body


def frame(kind: str, data: Any) -> str:
    """A frame as the server sends it (``NaN`` written as Python writes it: a hostile server may)."""
    return json.dumps({"type": kind, "data": data})


def well_behaved(request: dict[str, Any], session: Session) -> list[str | bytes]:
    """What the real server answers: one reply of the right type per request."""
    if request["type"] == "reset":
        return [frame("observation", session.reset_reply(request))]
    if request["type"] == "step":
        return [frame("observation", session.step_reply())]
    return [frame("state", session.state_reply())]


def png_of_zeros(width: int, height: int) -> bytes:
    """An RGBA PNG of zeros, written row by row (never held decoded): 13000x13000 is under 1 MB."""
    packer = zlib.compressobj(9)
    row = b"\0" * (1 + 4 * width)  # filter byte, then the pixels
    data = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()

    def chunk(kind: bytes, payload: bytes) -> bytes:
        crc = zlib.crc32(kind + payload)
        return len(payload).to_bytes(4, "big") + kind + payload + crc.to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 6, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b"")


class HostileServer:
    """``with HostileServer(script) as url:`` answers every request of every connection with
    ``script(request, session)``; ``script`` may be swapped between calls (``server.script = ...``)."""

    def __init__(self, script: Script = well_behaved) -> None:
        self.script = script
        self.connections = 0
        self.requests: list[dict[str, Any]] = []  # every request of every connection, in order
        self.authorizations: list[str | None] = []  # each connection's Authorization header
        self._server = serve(self._handle, "127.0.0.1", 0, max_size=None)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="hostile-ws")

    def __enter__(self) -> str:
        self._thread.start()
        return f"http://127.0.0.1:{self._server.socket.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join(10)

    def _handle(self, ws: ServerConnection) -> None:
        self.connections += 1
        self.authorizations.append(ws.request.headers.get("Authorization") if ws.request else None)
        session = Session()
        try:
            for message in ws:
                request = json.loads(message)
                session.requests.append(request)
                self.requests.append(request)
                if request["type"] == "close":
                    break
                for out in self.script(request, session):
                    ws.send(out)
        except Exception:  # the client closed on us: what these tests expect of it
            pass
