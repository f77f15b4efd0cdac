"""RemoteEnv: our :class:`~vlm_envs.protocol.Env` protocol played on a ``vlm-envs serve`` server.

One :class:`RemoteEnv` is one WebSocket session (OpenEnv's ``/ws``): ``reset`` and ``step`` go over
it, observations come back with their images decoded from lossless PNG, so a served episode equals
the in-process one (same seed: same text, pixels and rewards). Several URLs spread sessions over
several servers, client-side round robin (each new RemoteEnv takes the next URL); one URL may as
well be a load balancer in front of a pool. Any trainer path that builds envs by name can play
remotely: ``build_env("vlm_envs.remote", url=..., env="sokoban", **config)`` (slime's
``rollout_interaction_env_path: vlm_envs.remote``, the servers in the YAML, ``env`` in the row's env
config; :data:`LOCATION_KEYS`). Replies are read as hostile input (:mod:`vlm_envs.remote_wire`).
``random_response(rng)`` is the served env's own: the server draws it from ``rng``'s state and hands the
state back advanced, so a random player's episodes are the in-process ones (the env's code need not be
installed here). ``state_key()``, ``state_text()`` and ``distance_to_goal()`` are the served env's as the
latest reply gave them (``None`` before a reset), so a remote episode records where it stood as in
process. With several URLs an episode outlives its server: the client keeps the episode's latest snapshot
(:mod:`vlm_envs.remote_failover`), and when the server holding it dies, or answers that the session is
gone (410, its worker died, it is shutting down), restores it on the next server (where the episode
stands then is the restoring reply's) and sends the call again, once; the step's metrics count the
restore (``remote_restores``). Needs the ``serve`` extra (``websockets``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import random
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from vlm_envs.protocol import Env, EpisodeFinishedError, Observation, StepInfo, trainer_env_config
from vlm_envs.remote_failover import RESTORES_METRIC, KeptSnapshot, restore_order, session_gone
from vlm_envs.remote_location import cannot_connect, check_timeout, check_url, next_url, open_websocket
from vlm_envs.remote_wire import (
    MalformedReply,
    Reply,
    ReplyMetadata,
    StateData,
    no_extra_frame,
    one_line,
    parse_error,
    parse_random,
    parse_reply,
    parse_state,
    read_frame,
)
from vlm_envs.rewards import RewardError, check_reward
from vlm_envs.serve.config import token_from_env
from vlm_envs.serve.wire import RandomState, SignalName

__all__ = ["LOCATION_KEYS", "RemoteEnv", "RemoteEnvError", "build_env"]

#: Where the episodes play and with which credentials: keys a dataset row may not set (they are the
#: trainer's: slime's ``vlm_envs_remote_url`` YAML key, verl's ``remote_url``; ``$VLM_ENVS_SERVE_TOKEN``).
LOCATION_KEYS = frozenset({"url", "token", "timeout_s"})
#: The trainer args (slime's YAML keys; verl's loop sets them from its YAML) :func:`build_env` reads.
ARGS_URL, ARGS_TIMEOUT = "vlm_envs_remote_url", "vlm_envs_remote_timeout_s"
#: The frame type that answers each request.
_ANSWERS = {
    "reset": "observation",
    "step": "observation",
    "state": "state",
    "random": "random",
    "snapshot": "snapshot",
}
T = TypeVar("T")


class RemoteEnvError(RuntimeError):
    """The server refused a call or could not be reached; ``status`` is the HTTP-like status, ``lost``
    whether the session is gone with its server (unreachable, closed, 410, its worker died)."""

    def __init__(
        self, message: str, status: int | None = None, code: str | None = None, lost: bool = False
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.lost = lost


@dataclasses.dataclass
class _Episode:
    """The episode a RemoteEnv plays: what each reply must name to answer this episode's request (the
    session changes when the episode is restored on another server)."""

    session_id: str
    episode_id: str
    steps: int = 0
    done: bool = False


class RemoteEnv(Env):
    """Env ``env`` (with ``config``) played on the server at ``url`` (or one of several, in turn).

    ``token``: the server's bearer token (default ``$VLM_ENVS_SERVE_TOKEN``). ``timeout_s`` bounds
    connecting and each reply. Given several URLs, an episode lost with its server is restored on
    another (see the module). Errors the server answers raise :class:`RemoteEnvError`; a step
    after the end raises :class:`~vlm_envs.protocol.EpisodeFinishedError`, as in process.

    The server is hostile input: one reply per request, of the type that answers it and naming this
    session, episode and step (a reset sends a fresh ``episode_id`` the reply must echo), each field of
    its type (:mod:`vlm_envs.remote_wire`), images checked from their headers before decoding. Any
    other frame is a one-line :class:`RemoteEnvError`, and the connection is closed, so no later reply
    can answer the wrong request; the next reset opens a new session.
    """

    description = "an env played on a vlm-envs serve server"

    def __init__(
        self,
        url: str | Sequence[str],
        env: str,
        *,
        token: str | None = None,
        timeout_s: float = 60.0,
        **config: Any,
    ) -> None:
        urls = [url] if isinstance(url, str) else list(url) if isinstance(url, Sequence) else []
        if not urls:
            raise ValueError(f"url must be a server URL or a list of them, got {url!r:.80}")
        self.urls = [check_url(u) for u in urls]
        self.url = next_url(self.urls)
        self.env = env
        self.config = dict(config)
        self.timeout_s = check_timeout(timeout_s)
        self._token = token_from_env(token)
        self._ws: Any = None
        self._lock = threading.Lock()
        self._episode: _Episode | None = None
        self._session_id: str | None = None  # the connection's, once a reset named it
        #: The last reply's episode reward and the server's reason for refusing it (None before a reset).
        self._reward: tuple[float | None, str | None] | None = None
        self._ended: str | None = None  # why the last episode ended before its reply did
        self._system_prompt: str | None = None
        self._tools: list[dict[str, Any]] = []
        self.has_episode_reward = True  # the served env's, once reset
        self.session: dict[str, Any] = {}
        self._kept: KeptSnapshot | None = None  # with several URLs: the episode's latest snapshot
        self._standing: ReplyMetadata | None = None  # the latest reply's: where the episode stands
        self._restores = 0  # restores since the last step's reply (counted in the next step's metrics)

    # ---- the Env protocol -------------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        episode_id = uuid.uuid4().hex
        data: dict[str, Any] = {
            "env": self.env,
            "seed": seed,
            "config": self.config,
            "episode_id": episode_id,
        }
        if options is not None:
            data["options"] = dict(options)

        def check(payload: dict[str, Any]) -> Reply:
            reply = parse_reply(payload, "reset")
            meta = reply.metadata
            if meta.episode_id != episode_id:
                raise MalformedReply(f"the reply names episode {meta.episode_id!r:.80}, not the one reset")
            if self._session_id is not None and meta.session_id != self._session_id:
                raise MalformedReply(f"the reply names session {meta.session_id!r:.80}, not this one")
            return reply

        self._episode, self._reward, self._ended = None, None, None
        self._kept, self._restores, self._standing = None, 0, None
        reply = self._exchange({"type": "reset", "data": data}, check)
        meta = reply.metadata
        self._session_id = meta.session_id
        self._episode = _Episode(meta.session_id, meta.episode_id, done=reply.done)
        self._system_prompt = meta.system_prompt
        self._tools = [dict(tool) for tool in meta.tools]
        self.has_episode_reward = meta.has_episode_reward
        self._reward, self._standing = (meta.episode_reward, meta.reward_error), meta
        self.session = {"session_id": meta.session_id, "episode_id": meta.episode_id}
        if len(self.urls) > 1:
            self._kept = self._keep(seed)
        return reply.obs, dict(meta.reset_info)

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        episode = self._current()
        if episode.done:
            raise EpisodeFinishedError("the episode is done: reset to start another")

        def check(payload: dict[str, Any]) -> Reply:
            reply = parse_reply(payload, "step")
            meta = reply.metadata
            if (meta.session_id, meta.episode_id) != (episode.session_id, episode.episode_id):
                raise MalformedReply("the reply names another session or episode than this one")
            if meta.step != episode.steps + 1:
                raise MalformedReply(f"the reply is to step {meta.step}, not to step {episode.steps + 1}")
            if reply.reward is None and meta.reward_error is None:
                raise MalformedReply("reward: a step reply's reward is null with no reward_error")
            return reply

        reply = self._call({"type": "step", "data": {"text": response_text}}, check)
        meta = reply.metadata
        episode.steps, episode.done = meta.step, reply.done
        self._reward, self._standing = (meta.episode_reward, meta.reward_error), meta
        if self._kept is not None:
            self._kept.played(response_text)
        metrics = dict(meta.metrics)
        if self._restores:
            metrics[RESTORES_METRIC], self._restores = self._restores, 0
        if reply.reward is None:  # the episode cannot go on with a refused reward
            raise RewardError(f"the server refused the step reward: {one_line(meta.reward_error)}")
        info = StepInfo(
            reward=reply.reward,
            terminated=meta.terminated,
            truncated=meta.truncated,
            metrics=metrics,
            info=dict(meta.info),
        )
        return reply.obs, reply.done, info

    def episode_reward(self) -> float:
        """The served env's episode reward; :class:`~vlm_envs.rewards.RewardError` with the server's
        reason when it refused the env's reward, or when it sent none for an env that has one."""
        if self._reward is None:
            raise RewardError(f"the episode has no reward: {self._ended or 'no episode was reset'}")
        if not self.has_episode_reward:  # the trainer's reward model scores it: no value is read
            return 0.0
        value, error = self._reward
        if error is not None:
            raise RewardError(f"the server refused a reward of this episode: {one_line(error)}")
        if value is None:
            raise RewardError("the server sent no episode reward (null) and no reason")
        return check_reward(value, "the served episode reward")

    def oracle_response(self) -> str | None:
        episode = self._current()

        def check(payload: dict[str, Any]) -> StateData:
            state = parse_state(payload)
            if state.episode_id != episode.episode_id or state.step_count != episode.steps:
                raise MalformedReply(
                    f"the state names episode {state.episode_id!r:.80} at step {state.step_count}, "
                    f"not this one at step {episode.steps}"
                )
            return state

        return self._call({"type": "state"}, check).oracle_response

    def random_response(self, rng: random.Random) -> str:
        """The served env's own random reply for where the episode stands, drawn from ``rng`` as in
        process: its state goes to the server and comes back advanced past the draw."""
        self._current()
        state = RandomState.of(rng).model_dump()
        text, advanced = self._call({"type": "random", "data": state}, parse_random)
        rng.setstate(advanced)
        return text

    def state_key(self) -> str | None:
        return self._signal("state_key")

    def state_text(self) -> str | None:
        return self._signal("state_text")

    def distance_to_goal(self) -> int | None:
        return self._signal("distance_to_goal")

    def _signal(self, name: SignalName) -> Any:
        """The served env's ``name()`` as the latest reply gave it (``None`` before a reset); where it failed
        on the server, a :class:`RemoteEnvError` with the server's reason (it raises in process too)."""
        meta = self._standing
        if meta is not None and name in meta.signal_errors:
            raise RemoteEnvError(f"{self.url}: the served env failed: {one_line(meta.signal_errors[name])}")
        return None if meta is None else getattr(meta, name)

    def system_prompt(self) -> str | None:
        return self._system_prompt

    def tools(self) -> list[dict[str, Any]]:
        return list(self._tools)

    def close(self) -> None:
        with self._lock:
            self._drop(send_close=True)

    # ---- transport --------------------------------------------------------------------------------

    def _current(self) -> _Episode:
        if self._episode is None:
            raise RemoteEnvError(f"{self.url}: no episode in this session: reset first", 409)
        return self._episode

    def _connect(self) -> Any:
        try:
            return open_websocket(self.url, self._token, self.timeout_s)
        except Exception as err:
            raise RemoteEnvError(cannot_connect(self.url, err), lost=True) from err

    def _drop(self, send_close: bool = False) -> None:
        """Forget the connection (the server's session and its episode with it); call with the lock."""
        ws, self._ws = self._ws, None
        self._episode, self._session_id = None, None
        if ws is not None:
            with contextlib.suppress(Exception):  # the server may be gone or hostile: closing is still done
                if send_close:
                    ws.send(json.dumps({"type": "close"}))
                ws.close()

    def _call(self, message: dict[str, Any], check: Callable[[dict[str, Any]], T]) -> T:
        """:meth:`_exchange` on the episode; where the session was lost with its server and a snapshot of
        the episode is kept, the episode is restored on another server and ``message`` sent again, once."""
        episode = self._episode
        try:
            return self._exchange(message, check)
        except RemoteEnvError as err:
            if not err.lost or self._kept is None or episode is None:
                raise
            self._restore(episode, self._kept, err)
        return self._exchange(message, check)

    def _keep(self, seed: int | None) -> KeptSnapshot | None:
        """The snapshot of the episode just reset, from its server; ``None`` where it gives none (a
        server without snapshots, an episode it cannot name the seed of, an env keeping its own state)."""
        try:
            kept = self._exchange(
                {"type": "snapshot"}, lambda data: KeptSnapshot(data, seed, fresh=True), keep_session=True
            )
        except RemoteEnvError as err:
            if err.lost:
                raise
            return None
        return kept if kept.replay else None

    def _restore(self, episode: _Episode, kept: KeptSnapshot, lost: RemoteEnvError) -> None:
        """Continue ``episode`` from ``kept`` on the first server of :func:`restore_order` that takes it;
        ``lost`` (with every server's reason) when none can."""
        message = kept.restore_message(self.env, self.config, episode.episode_id)
        check = functools.partial(
            KeptSnapshot.parse_restored, episode_id=episode.episode_id, steps=episode.steps
        )
        reasons = [str(lost)]
        for url in restore_order(self.urls, self.url):
            self.url = url
            try:
                meta = self._exchange(message, check).metadata
            except RemoteEnvError as err:
                if not err.lost:
                    raise
                reasons.append(str(err))
                continue
            episode.session_id = self._session_id = meta.session_id
            self._episode, self._ended = episode, None
            self._reward, self._standing = (meta.episode_reward, meta.reward_error), meta
            self.session = {"session_id": meta.session_id, "episode_id": meta.episode_id}
            self._restores += 1
            return
        raise RemoteEnvError(
            f"the episode was lost and no server restored it: {'; '.join(reasons)}", lost.status, lost.code
        )

    def _exchange(
        self, message: dict[str, Any], check: Callable[[dict[str, Any]], T], keep_session: bool = False
    ) -> T:
        """Send ``message``, read its one reply and return it as ``check`` reads it; a server's error
        frame raises :class:`RemoteEnvError` (or ``EpisodeFinishedError``), as does any frame ``check``
        refuses, and both close the connection (a reply queued behind can answer no later request), but
        an error frame with ``keep_session`` (a call that changes nothing: the session goes on)."""
        from websockets.exceptions import ConnectionClosed

        op = message["type"]
        with self._lock:
            if self._ws is None:
                self._ws = self._connect()
            ws = self._ws
            try:
                ws.send(json.dumps(message))
                kind, data = read_frame(ws.recv(timeout=self.timeout_s))
                if kind == "error":
                    error = parse_error(data)
                    text = one_line(error.message) or "unknown error"
                    if error.status == 409 and "episode is done" in text:
                        self._drop()
                        raise EpisodeFinishedError(text)
                    lost = session_gone(error.status, error.code, text)
                    failed = RemoteEnvError(f"{self.url}: {text}", error.status, error.code, lost)
                    raise failed if keep_session and not lost else self._end(failed)
                if kind != _ANSWERS[op]:
                    raise MalformedReply(f"a {one_line(kind)[:40]!r} frame, not {_ANSWERS[op]!r}")
                no_extra_frame(ws)
                return check(data)
            except (ConnectionClosed, TimeoutError, OSError) as err:
                ended = RemoteEnvError(f"the session on {self.url} ended: {one_line(err)}", lost=True)
                raise self._end(ended) from err
            except MalformedReply as err:
                message = f"{self.url}: malformed reply to {op}, session closed: {err}"
                raise self._end(RemoteEnvError(message)) from None

    def _end(self, err: RemoteEnvError) -> RemoteEnvError:
        """``err``, the connection closed after it: the episode is over, unscored (its reward says why)."""
        self._drop()
        self._reward, self._ended = None, f"the session ended ({err})"
        return err


def build_env(sample: Any = None, args: Any = None, **config: Any) -> RemoteEnv:
    """A :class:`RemoteEnv` from a trainer's sample and args. ``url``, ``token`` and ``timeout_s``
    (:data:`LOCATION_KEYS`, which dataset rows may not set) come from ``config`` or the trainer's args
    (``args.vlm_envs_remote_url``, ``args.vlm_envs_remote_timeout_s``), the token by default from
    ``$VLM_ENVS_SERVE_TOKEN``; ``env`` and the rest of the served env's config from ``config`` (the
    row's ``env_config`` under the explicit one)."""
    merged = trainer_env_config(sample, args, config)
    url = merged.pop("url", None) or getattr(args, ARGS_URL, None)
    if not url:
        raise ValueError(
            f"vlm_envs.remote needs 'url': give url=... or, in a trainer, {ARGS_URL} in its config "
            "(slime: the --custom-config-path YAML; verl: remote_url in the agent-loop YAML)"
        )
    if "env" not in merged:
        raise ValueError("vlm_envs.remote needs 'env' in its config (the served env to play)")
    timeout = merged.pop("timeout_s", None) or getattr(args, ARGS_TIMEOUT, None) or 60.0
    return RemoteEnv(url, merged.pop("env"), token=merged.pop("token", None), timeout_s=timeout, **merged)
