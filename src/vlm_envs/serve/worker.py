"""Inside a serve worker process: hold env sessions, answer reset/step/state/close for them.

The server side is :class:`~vlm_envs.serve.pool.EnvWorkers`. Messages are pickled tuples: to the
worker ``(op, call_id, session_id, payload)``; back ``(call_id, status, body)``, ``body`` the JSON
bytes of the reply (``status`` 200) or a one-line error (any other status). Every piece of env work
(building, reset, step, rendering, PNG and JSON encoding) happens here, never on the server's loop.
A thread keeps the pipe drained while the main thread works, so the server never blocks writing.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import queue
import threading
import uuid
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import Any

from vlm_envs.plain_json import json_safe
from vlm_envs.protocol import EpisodeFinishedError, check_seed
from vlm_envs.registry import build_env
from vlm_envs.serve.wire import State, one_line, reply_body

#: Added to a worker's niceness: the server's loop (every session's I/O) gets a core first.
WORKER_NICENESS = 5


class _Session:
    """One session's env and where its episode stands."""

    def __init__(self) -> None:
        self.env: Any = None
        self.key: str | None = None  # the env name and config it was built with
        self.env_name: str | None = None
        self.episode_id: str | None = None
        self.seed: int | None = None
        self.steps = 0
        self.done = False
        self.started = False

    def close(self) -> None:
        if self.env is not None:
            with contextlib.suppress(Exception):  # an env that fails to close loses nothing here
                self.env.close()
        self.env = None


class Worker:
    """The sessions of one worker process and the answers to their calls."""

    def __init__(self, served: Mapping[str, str]) -> None:
        self.served = dict(served)
        self.sessions: dict[str, _Session] = {}

    def handle(self, op: str, session_id: str, payload: Any) -> tuple[int, bytes]:
        if op == "close":
            session = self.sessions.pop(session_id, None)
            if session is not None:
                session.close()
            return 200, b"{}"
        session = self.sessions.setdefault(session_id, _Session())
        if op == "reset":
            return self._reset(session, session_id, payload)
        if not session.started:
            return 409, b"no episode in this session yet: reset first"
        if op == "step":
            return self._step(session, session_id, payload)
        if op == "state":
            return self._state(session)
        return 400, f"unknown operation {op!r}".encode()

    def _reset(self, session: _Session, session_id: str, payload: Mapping[str, Any]) -> tuple[int, bytes]:
        name, config = payload["env"], payload["config"]
        key = json.dumps([name, json_safe(config)], sort_keys=True)
        if session.key != key:
            session.close()
            session.key = None
            try:
                session.env = build_env(self.served[name], **config)
            except Exception as err:  # a config the env refuses: the client's to fix
                return 422, f"env {name!r} refused its config: {one_line(err)}".encode()
            session.key, session.env_name = key, name
        try:
            seed = check_seed(payload.get("seed"))
            options = payload.get("options")
            obs, info = session.env.reset(seed) if options is None else session.env.reset(seed, options)
        except Exception as err:  # a seed or options the env refuses
            session.started = False
            return 422, f"reset failed: {one_line(err)}".encode()
        session.episode_id = payload.get("episode_id") or uuid.uuid4().hex
        session.seed, session.steps, session.done, session.started = seed, 0, False, True
        extra = {
            "session_id": session_id,
            "episode_id": session.episode_id,
            "env": name,
            "system_prompt": session.env.system_prompt(),
            "tools": json_safe(session.env.tools()),
            "has_episode_reward": bool(session.env.has_episode_reward),
            "reset_info": json_safe(info),
        }
        return 200, reply_body(obs, None, False, self._episode_reward(session), extra)

    def _step(self, session: _Session, session_id: str, text: str) -> tuple[int, bytes]:
        if session.done:
            return 409, b"the episode is done: reset to start another"
        try:
            obs, done, info = session.env.step(text)
        except EpisodeFinishedError:
            session.done = True
            return 409, b"the episode is done: reset to start another"
        except Exception as err:  # an env that raises on a reply: the episode cannot go on
            session.done = True
            return 500, f"the env failed on this step, episode ended: {one_line(err)}".encode()
        session.steps += 1
        session.done = bool(done)
        extra = {"session_id": session_id, "episode_id": session.episode_id, "step": session.steps}
        return 200, reply_body(obs, info, done, self._episode_reward(session), extra)

    def _state(self, session: _Session) -> tuple[int, bytes]:
        try:
            oracle = None if session.done else session.env.oracle_response()
        except Exception:  # an oracle that fails is no oracle for this state
            oracle = None
        state = State(
            episode_id=session.episode_id,
            step_count=session.steps,
            env=session.env_name,
            seed=session.seed,
            done=session.done,
            episode_reward=self._episode_reward(session),
            oracle_response=oracle,
        )
        return 200, state.model_dump_json().encode()

    @staticmethod
    def _episode_reward(session: _Session) -> float | None:
        try:
            return json_safe(float(session.env.episode_reward()))
        except Exception:  # an env with no reward yet (slime-shaped envs) says so with None
            return None


def worker_main(conn: Connection, served: Mapping[str, str]) -> None:
    """A worker process: answer calls until the pipe closes or ``stop`` arrives."""
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)
    inbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

    def drain() -> None:
        while True:
            try:
                inbox.put(conn.recv_bytes())
            except (EOFError, OSError):  # the server is gone
                inbox.put(None)
                return

    threading.Thread(target=drain, daemon=True, name="vlm-envs-serve-inbox").start()
    worker = Worker(served)
    conn.send_bytes(pickle.dumps((-1, 200, b"ready")))
    while (message := inbox.get()) is not None:
        op, call_id, session_id, payload = pickle.loads(message)
        if op == "stop":
            break
        try:
            status, body = worker.handle(op, session_id, payload)
        except Exception as err:  # a bug of ours must not end the worker's other sessions
            status, body = 500, f"worker error: {one_line(err)}".encode()
        try:
            conn.send_bytes(pickle.dumps((call_id, status, body), protocol=5))
        except (EOFError, OSError):
            break
    for session in worker.sessions.values():
        session.close()
