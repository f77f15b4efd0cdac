"""RemoteEnv: our :class:`~vlm_envs.protocol.Env` protocol played on a ``vlm-envs serve`` server.

One :class:`RemoteEnv` is one WebSocket session (OpenEnv's ``/ws``): ``reset`` and ``step`` go over
it, observations come back with their images decoded from lossless PNG, so a served episode equals
the in-process one (same seed: same text, pixels and rewards). Several URLs spread sessions over
several servers, client-side round robin (each new RemoteEnv takes the next URL); one URL may as
well be a load balancer in front of a pool. Any trainer path that builds envs by name can play
remotely: ``build_env("vlm_envs.remote", url=..., env="sokoban", **config)`` (slime's
``rollout_interaction_env_path: vlm_envs.remote`` with ``url`` and ``env`` in the row's env config).
Needs the ``serve`` extra (``websockets``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from vlm_envs.protocol import Env, EpisodeFinishedError, Observation, StepInfo, trainer_env_config
from vlm_envs.serve.config import TOKEN_ENV, is_loopback, token_from_env
from vlm_envs.serve.wire import parse_reply

__all__ = ["RemoteEnv", "RemoteEnvError", "build_env"]

#: The largest reply taken from a server (bytes): a few big images per observation fit easily.
MAX_REPLY_BYTES = 64 << 20
_turns: dict[tuple[str, ...], itertools.count] = {}
_turns_lock = threading.Lock()


class RemoteEnvError(RuntimeError):
    """The server refused a call or could not be reached; ``status`` is the HTTP-like status."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def next_url(urls: Sequence[str]) -> str:
    """The next of ``urls`` in round robin (shared by every RemoteEnv of the same URL list)."""
    key = tuple(urls)
    with _turns_lock:
        counter = _turns.setdefault(key, itertools.count())
        return key[next(counter) % len(key)]


def _no_redirect(exc: Exception) -> Exception:
    """websockets' redirect hook, answering every failed handshake (a 3xx included) with its error."""
    return exc


def _hint(err: Exception) -> str:
    """What to do about a refused handshake: a token to give, or the server's own URL."""
    response = getattr(err, "response", None)
    status = getattr(response, "status_code", 0)
    if 300 <= status < 400:
        target = response.headers.get("Location", "?")
        return f" (a redirect to {target!r:.200}; vlm-envs follows none: give the server's own URL)"
    return f" (set ${TOKEN_ENV} or token=...)" if status in (401, 403) else ""


def ws_url(url: str) -> str:
    """A server's base URL (``http(s)://`` or ``ws(s)://``) as its ``/ws`` endpoint."""
    base = url.rstrip("/")
    for plain, secure in (("http://", "ws://"), ("https://", "wss://")):
        if base.startswith(plain):
            base = secure + base[len(plain) :]
    if not base.startswith(("ws://", "wss://")):
        base = "ws://" + base
    return base if base.endswith("/ws") else base + "/ws"


class RemoteEnv(Env):
    """Env ``env`` (with ``config``) played on the server at ``url`` (or one of several, in turn).

    ``token``: the server's bearer token (default ``$VLM_ENVS_SERVE_TOKEN``). ``timeout_s`` bounds
    connecting and each reply. Errors the server answers raise :class:`RemoteEnvError`; a step
    after the end raises :class:`~vlm_envs.protocol.EpisodeFinishedError`, as in process.
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
        urls = [url] if isinstance(url, str) else list(url)
        if not urls or not all(isinstance(u, str) and u for u in urls):
            raise ValueError(f"url must be a server URL or a list of them, got {url!r}")
        self.url = next_url(urls)
        self.env = env
        self.config = dict(config)
        self.timeout_s = timeout_s
        self._token = token_from_env(token)
        self._ws: Any = None
        self._lock = threading.Lock()
        self._episode_reward = 0.0
        self._system_prompt: str | None = None
        self._tools: list[dict[str, Any]] = []
        self.has_episode_reward = True  # the served env's, once reset
        self.session: dict[str, Any] = {}

    # ---- the Env protocol -------------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        data: dict[str, Any] = {"env": self.env, "seed": seed, "config": self.config}
        if options is not None:
            data["options"] = dict(options)
        obs, _, _, meta = parse_reply(self._call({"type": "reset", "data": data}))
        self._episode_reward = float(meta.get("episode_reward") or 0.0)
        self._system_prompt = meta.get("system_prompt")
        self._tools = list(meta.get("tools") or [])
        self.has_episode_reward = bool(meta.get("has_episode_reward", True))
        self.session = {"session_id": meta.get("session_id"), "episode_id": meta.get("episode_id")}
        return obs, dict(meta.get("reset_info") or {})

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        obs, done, info, meta = parse_reply(self._call({"type": "step", "data": {"text": response_text}}))
        self._episode_reward = float(meta.get("episode_reward") or 0.0)
        return obs, done, info

    def episode_reward(self) -> float:
        return self._episode_reward

    def oracle_response(self) -> str | None:
        return self._call({"type": "state"}).get("oracle_response")

    def system_prompt(self) -> str | None:
        return self._system_prompt

    def tools(self) -> list[dict[str, Any]]:
        return list(self._tools)

    def close(self) -> None:
        with self._lock:
            ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(Exception):  # the server may be gone: closing is still done
                ws.send(json.dumps({"type": "close"}))
            ws.close()

    # ---- transport --------------------------------------------------------------------------------

    def _connect(self) -> Any:
        from websockets.sync.client import connect

        target = ws_url(self.url)
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else None
        local = is_loopback(urlsplit(target).hostname or "")
        try:
            connecter = connect(
                target,
                additional_headers=headers,
                open_timeout=self.timeout_s,
                max_size=MAX_REPLY_BYTES,
                proxy=None if local else True,
                legacy=False,
            )
            # websockets follows redirects, to other hosts too: an episode, its images and the token go
            # only to the server the user named, so a 3xx answer is the error itself
            connecter.process_redirect = _no_redirect
            return connecter.connect()
        except Exception as err:
            raise RemoteEnvError(f"cannot open a session on {target}: {err}{_hint(err)}") from err

    def _call(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one message and return the reply's ``data``; :class:`RemoteEnvError` on an error."""
        from websockets.exceptions import ConnectionClosed

        with self._lock:
            if self._ws is None:
                self._ws = self._connect()
            ws = self._ws
            try:
                ws.send(json.dumps(message))
                reply = json.loads(ws.recv(timeout=self.timeout_s))
            except (ConnectionClosed, TimeoutError, OSError) as err:
                self._ws = None
                ws.close()
                raise RemoteEnvError(f"the session on {self.url} ended: {err}") from err
        data = reply.get("data") or {}
        if reply.get("type") == "error":
            status, text = data.get("status"), str(data.get("message", "unknown error"))
            if status == 409 and "episode is done" in text:
                raise EpisodeFinishedError(text)
            raise RemoteEnvError(f"{self.url}: {text}", status, data.get("code"))
        return data


def build_env(sample: Any = None, args: Any = None, **config: Any) -> RemoteEnv:
    """A :class:`RemoteEnv` from a trainer's sample and args: the config (the row's ``env_config``
    under the explicit one) names ``url`` and ``env``; the rest is the served env's config."""
    merged = trainer_env_config(sample, args, config)
    try:
        url, env = merged.pop("url"), merged.pop("env")
    except KeyError as err:
        raise ValueError(f"vlm_envs.remote needs {err.args[0]!r} in its config (url=..., env=...)") from None
    token, timeout = merged.pop("token", None), merged.pop("timeout_s", 60.0)
    return RemoteEnv(url, env, token=token, timeout_s=timeout, **merged)
