"""``vlm-envs serve``: every registered env behind OpenEnv's HTTP/WebSocket env protocol.

Env work runs in worker processes (:mod:`~vlm_envs.serve.pool`), sessions and their limits live in
:mod:`~vlm_envs.serve.sessions`, the wire format in :mod:`~vlm_envs.serve.wire`. This package knows
the registry and the protocol, never a trainer or the rollout. Needs the ``serve`` extra.
"""

from vlm_envs.serve.config import TOKEN_ENV, ServeConfig, ServeConfigError

__all__ = ["TOKEN_ENV", "ServeConfig", "ServeConfigError"]
