"""Inside a serve worker process: hold env sessions, answer reset/step/state/close for them.

The server side is :class:`~vlm_envs.serve.pool.EnvWorkers`. Messages are pickled tuples: to the
worker ``(op, call_id, session_id, payload)``; back ``(call_id, answer)``, an :class:`Answer` whose
``body`` is the JSON bytes of the reply (``status`` 200) or a one-line error (any other status), each
one frame on the pipe (:mod:`vlm_envs.serve.pipe`). Every piece of env work (building, reset, step,
rendering, PNG and JSON encoding) happens here, never on the server's loop. The main thread reads a
call and runs it, with no hand-off between threads: the server's end of the pipe never blocks on
writing (it queues what the pipe does not take), so nothing needs to keep the pipe drained.

Each call runs under the session's bounds (:mod:`vlm_envs.serve.limits`): past its deadline it answers
504, out of memory (an allocation past the cap, or a session holding more than its budget afterwards)
503, and either way that session's env is dropped (its state may be half-changed) while the worker and
its other sessions go on. A worker without room for one more session's budget refuses new ones (503).
A client's config is checked before anything is built (:func:`vlm_envs.envs.config.check_client_config`,
422), and rewards pass :func:`vlm_envs.rewards.check_reward` (a refused one answers null and
``reward_error``). The internal op ``stats`` answers the worker's session count and memory; ``random``
answers the env's own random reply drawn from a client's generator state, ``snapshot`` the episode's
snapshot, and a reset that carries a snapshot continues its episode (:mod:`vlm_envs.serve.env_calls`).
Every reset and step reply carries where the episode stands after it (``signal_fields``), read under the
call's bounds: a signal method that fails answers null and its reason, the episode goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pickle
import signal
import socket
import uuid
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from vlm_envs.configured import EnvConfigError, build_configured_env
from vlm_envs.envs.config import ClientConfigError, check_client_config
from vlm_envs.errors import one_line
from vlm_envs.plain_json import json_safe
from vlm_envs.protocol import EpisodeFinishedError, check_seed
from vlm_envs.registry import get_spec
from vlm_envs.rewards import RewardError, call_reward, check_reward
from vlm_envs.serve.config import ServeConfig
from vlm_envs.serve.env_calls import (
    check_snapshot,
    random_reply,
    restore_episode,
    signal_fields,
    snapshot_reply,
)
from vlm_envs.serve.limits import MIB, DeadlineExceeded, MemoryBudget, Watchdog
from vlm_envs.serve.pipe import BlockingPipe
from vlm_envs.serve.wire import State, reply_body
from vlm_envs.snapshot import SnapshotError

#: Added to a worker's niceness: the server's loop (every session's I/O) gets a core first.
WORKER_NICENESS = 5
#: A closed session that held this much (MiB) has its memory handed back at once: a full collection
#: and ``malloc_trim`` cost 35-90 ms in a worker of 64-1,024 Sokoban sessions, so a smaller one's is
#: handed back only when a new session would not fit without it.
RELEASE_MIB = 8
#: The causes of refusals the server counts (:attr:`Answer.cause`).
DEADLINE, MEMORY, CONFIG = "deadline", "memory", "config"
#: What a reply that ended its session adds: how to go on.
_CLOSED = "so this session is closed: reset (over HTTP without a session_id) to open a new one"


class Answer(NamedTuple):
    """A worker's answer to one call."""

    status: int
    body: bytes
    #: What refused the call (``deadline``, ``memory``, ``config``), or ``None``. A ``deadline`` or
    #: ``memory`` refusal means the worker holds no env for the session any more.
    cause: str | None = None


@dataclasses.dataclass(frozen=True)
class WorkerSettings:
    """The bounds a worker holds its calls to, and whether ``state`` runs the oracle."""

    call_deadline_s: float = 10.0
    session_memory_mib: int = 512
    worker_memory_mib: int = 4096
    oracle: bool = False

    @classmethod
    def of(cls, config: ServeConfig) -> WorkerSettings:
        return cls(config.call_deadline_s, config.session_memory_mib, config.worker_memory_mib, config.oracle)


class _Session:
    """One session's env, where its episode stands and the memory it holds."""

    def __init__(self) -> None:
        self.env: Any = None
        self.key: str | None = None  # the env name and config it was built with
        self.env_name: str | None = None
        self.episode_id: str | None = None
        self.seed: int | None = None
        self.steps = 0
        self.done = False
        self.started = False
        self.held = 0  # bytes: what its calls left resident

    def close(self) -> None:
        if self.env is not None:
            with contextlib.suppress(Exception):  # an env that fails to close loses nothing here
                self.env.close()
        self.env = None


class Worker:
    """The sessions of one worker process and the answers to their calls."""

    def __init__(
        self, served: Mapping[str, str], settings: WorkerSettings, watchdog: Watchdog, budget: MemoryBudget
    ) -> None:
        self.served = dict(served)
        self.settings = settings
        self.watchdog = watchdog
        self.budget = budget
        self.sessions: dict[str, _Session] = {}
        self._targets: dict[str, Any] = {}

    def handle(self, op: str, session_id: str, payload: Any) -> Answer:
        if op == "stats":
            return Answer(200, json.dumps(self.stats()).encode())
        if op == "close":
            self.drop(session_id)
            return Answer(200, b"{}")
        if op not in ("reset", "step", "state", "random", "snapshot"):
            return Answer(400, f"unknown operation {op[:40]!r}".encode())
        session = self.sessions.get(session_id)
        if session is None and op != "reset":
            return Answer(409, b"no episode in this session yet: reset first")
        if op == "reset" and (session is None or session.env is None) and not self._room_for_session():
            held, budget = self.budget.used() // MIB, self.settings.worker_memory_mib
            message = f"this worker holds {held} MiB of its {budget} MiB: no room for a new session"
            return Answer(503, f"{message}; try again later".encode(), MEMORY)
        if session is None:
            session = self.sessions[session_id] = _Session()
        return self._bounded(op, session, session_id, payload)

    def stats(self) -> dict[str, Any]:
        """The worker's session count and memory (MiB)."""
        return {
            "pid": os.getpid(),
            "sessions": len(self.sessions),
            "rss_mib": round(self.budget.rss() / MIB, 1),
            "used_mib": round(self.budget.used() / MIB, 1),
            "budget_mib": self.settings.worker_memory_mib,
        }

    def drop(self, session_id: str, release: bool = False) -> None:
        """Forget a session and close its env (under a deadline too); its memory is handed back at once
        if ``release`` or it held :data:`RELEASE_MIB` or more, else when a new session needs the room."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            return
        with contextlib.suppress(DeadlineExceeded, MemoryError), self.watchdog.deadline(self._deadline):
            session.close()
        if release or session.held >= RELEASE_MIB * MIB:
            self.budget.release()

    def _room_for_session(self) -> bool:
        """Whether a new session fits, once memory freed and not handed back yet is (if it must be)."""
        if self.budget.room_for_session():
            return True
        self.budget.release()
        return self.budget.room_for_session()

    @property
    def _deadline(self) -> float:
        return self.settings.call_deadline_s

    def _bounded(self, op: str, session: _Session, session_id: str, payload: Any) -> Answer:
        """One call under the session's deadline and memory budget; past either, the session is dropped."""
        before = self.budget.rss()
        try:
            with self.budget.call(), self.watchdog.deadline(self._deadline):
                answer = self._run(op, session, session_id, payload)
        except DeadlineExceeded:
            answer = _refusal(504, f"the call ran past its deadline of {self._deadline:g} s", DEADLINE)
        except MemoryError:
            budget = self.settings.session_memory_mib
            answer = _refusal(503, f"the call ran out of its memory budget of {budget} MiB", MEMORY)
        else:
            session.held = max(0, session.held + self.budget.rss() - before)
            if session.held > self.budget.session_bytes:
                held, budget = session.held // MIB, self.settings.session_memory_mib
                why = f"this session holds {held} MiB, past its budget of {budget} MiB"
                answer = _refusal(503, why, MEMORY)
        if answer.cause in (DEADLINE, MEMORY):
            self.drop(session_id, release=True)
        return answer

    def _run(self, op: str, session: _Session, session_id: str, payload: Any) -> Answer:
        if op == "reset":
            return self._reset(session, session_id, payload)
        if not session.started:
            return Answer(409, b"no episode in this session yet: reset first")
        if op == "step":
            return self._step(session, session_id, payload)
        if op == "random":
            return Answer(*random_reply(session.env, payload))
        if op == "snapshot":
            return Answer(*snapshot_reply(session.env))
        return self._state(session)

    def _reset(self, session: _Session, session_id: str, payload: Mapping[str, Any]) -> Answer:
        """A new episode, or (``payload["snapshot"]``) the snapshot's episode continued."""
        name, config, options = payload["env"], payload["config"], payload.get("options")
        snapshot = payload.get("snapshot")
        try:
            target = self._target(name)
            check_client_config(target, config)
            check_client_config(target, options or {})
            if snapshot is not None:
                check_snapshot(target, snapshot)
        except SnapshotError as err:
            return Answer(422, f"snapshot refused: {one_line(str(err))}".encode())
        except ClientConfigError as err:  # a key that names a file, a folder, a server...: never a client's
            return Answer(422, one_line(str(err)).encode(), CONFIG)
        except MemoryError:
            raise
        except Exception as err:  # an env that cannot be loaded
            return Answer(422, f"env {name!r} refused its config: {one_line(err, typed=True)}".encode())
        key = json.dumps([name, json_safe(config)], sort_keys=True)
        if session.key != key:
            if session.env is not None:  # a new config: the old env goes, and its memory with it
                session.close()
                if session.held >= RELEASE_MIB * MIB:
                    self.budget.release()
            session.key, session.started = None, False
            try:
                session.env = build_configured_env(self.served[name], None, config)
            except EnvConfigError as err:  # a config the env refuses (the keys it takes): the client's to fix
                return Answer(422, str(err).encode())
            except MemoryError:
                raise
            except Exception as err:  # an env that cannot be loaded
                return Answer(422, f"env {name!r} refused its config: {one_line(err, typed=True)}".encode())
            session.key, session.env_name = key, name
        try:
            if snapshot is None:
                seed, steps = check_seed(payload.get("seed")), 0
                obs, info = session.env.reset(seed) if options is None else session.env.reset(seed, options)
            else:
                restored, info = restore_episode(session.env, snapshot), {}
                obs, seed, steps = restored.obs, restored.seed, restored.steps
        except MemoryError:
            raise
        except SnapshotError as err:  # refused, the env and its episode left as they were
            return Answer(422, f"snapshot refused: {one_line(str(err))}".encode())
        except Exception as err:  # a seed or options the env refuses
            session.started = False
            return Answer(422, f"reset failed: {one_line(err, typed=True)}".encode())
        session.episode_id = payload.get("episode_id") or uuid.uuid4().hex
        session.seed, session.steps, session.done, session.started = seed, steps, False, True
        episode_reward, reward_error = self._episode_reward(session)
        extra = {
            "session_id": session_id,
            "episode_id": session.episode_id,
            "env": name,
            "system_prompt": session.env.system_prompt(),
            "tools": json_safe(session.env.tools()),
            "has_episode_reward": bool(session.env.has_episode_reward),
            "reset_info": json_safe(info),
            **signal_fields(session.env),
        }
        if snapshot is not None:  # where the restored episode stands
            extra.update(restored=True, step=steps)
        body = reply_body(obs, None, False, episode_reward, extra, reward_error=reward_error)
        return Answer(200, body)

    def _step(self, session: _Session, session_id: str, text: str) -> Answer:
        if session.done:
            return Answer(409, b"the episode is done: reset to start another")
        try:
            obs, done, info = session.env.step(text)
        except EpisodeFinishedError:
            session.done = True
            return Answer(409, b"the episode is done: reset to start another")
        except MemoryError:
            raise
        except Exception as err:  # an env that raises on a reply: the episode cannot go on
            session.done = True
            return Answer(
                500, f"the env failed on this step, episode ended: {one_line(err, typed=True)}".encode()
            )
        session.steps += 1
        session.done = bool(done)
        reward, step_error = _checked(lambda: check_reward(info.reward, "the step reward"))
        episode_reward, episode_error = self._episode_reward(session)
        error = "; ".join(e for e in (step_error, episode_error) if e) or None
        extra = {
            "session_id": session_id,
            "episode_id": session.episode_id,
            "step": session.steps,
            **signal_fields(session.env),
        }
        body = reply_body(obs, info, done, episode_reward, extra, reward=reward, reward_error=error)
        return Answer(200, body)

    def _state(self, session: _Session) -> Answer:
        oracle = None
        if self.settings.oracle and not session.done:
            try:
                oracle = session.env.oracle_response()
            except MemoryError:
                raise
            except Exception:  # an oracle that fails is no oracle for this state
                oracle = None
        episode_reward, reward_error = self._episode_reward(session)
        state = State(
            episode_id=session.episode_id,
            step_count=session.steps,
            env=session.env_name,
            seed=session.seed,
            done=session.done,
            episode_reward=episode_reward,
            reward_error=reward_error,
            oracle_response=oracle,
        )
        return Answer(200, state.model_dump_json().encode())

    def _target(self, name: str) -> Any:
        """What builds the served env ``name`` (its module or class), loaded once."""
        if name not in self._targets:
            self._targets[name] = get_spec(self.served[name]).load()
        return self._targets[name]

    @staticmethod
    def _episode_reward(session: _Session) -> tuple[float | None, str | None]:
        """The episode reward, checked, and why it was refused (both ``None`` for an env without one)."""
        if not session.env.has_episode_reward:
            return None, None
        return _checked(lambda: call_reward(session.env.episode_reward, "the episode reward"))


def _refusal(status: int, why: str, cause: str) -> Answer:
    """The answer to a call that ended its session."""
    return Answer(status, f"{why}, {_CLOSED}".encode(), cause)


def _checked(reward: Callable[[], float]) -> tuple[float | None, str | None]:
    """``(reward(), None)``, or ``(None, why)`` for a reward the check refused (a MemoryError stays one)."""
    try:
        return reward(), None
    except RewardError as err:
        if isinstance(err.__cause__, MemoryError):
            raise err.__cause__ from None
        return None, one_line(str(err))


def worker_main(sock: socket.socket, served: Mapping[str, str], settings: WorkerSettings) -> None:
    """A worker process: answer the calls its pipe (``sock``) brings, each on this thread as it comes,
    until the pipe closes or ``stop`` arrives."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle: it drains, then stops us
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)
    for target in set(served.values()):  # imported now, so no call's deadline or budget pays for it
        with contextlib.suppress(Exception):  # an env that cannot load says why when a reset names it
            get_spec(target).load()
    pipe = BlockingPipe(sock)
    watchdog = Watchdog(settings.call_deadline_s)  # one watch for every call: a call never waits on it
    budget = MemoryBudget(settings.session_memory_mib, settings.worker_memory_mib)  # after the imports
    worker = Worker(served, settings, watchdog, budget)
    pipe.send(pickle.dumps((-1, Answer(200, b"ready"))))
    while True:
        try:
            op, call_id, session_id, payload = pickle.loads(pipe.recv())
        except (EOFError, OSError, MemoryError):  # the server is gone (or the pipe cannot be read)
            break
        if op == "stop":
            break
        try:
            answer = worker.handle(op, session_id, payload)
        except (Exception, DeadlineExceeded) as err:  # a bug of ours must not end the other sessions
            answer = Answer(500, f"worker error: {one_line(err, typed=True)}".encode())
        try:
            data = pickle.dumps((call_id, answer), protocol=5)
        except MemoryError:
            refusal = Answer(503, b"the reply did not fit in the worker's memory", MEMORY)
            data = pickle.dumps((call_id, refusal))
        try:
            pipe.send(data)
        except OSError:
            break
    for session in worker.sessions.values():
        session.close()
