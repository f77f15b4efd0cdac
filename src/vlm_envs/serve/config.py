"""What one ``vlm-envs serve`` runs: :class:`ServeConfig`, checked once, at the edge."""

from __future__ import annotations

import dataclasses
import ipaddress
import os

from vlm_envs.registry import get_spec, list_envs

#: The environment variable a bearer token may come from instead of ``--token``.
TOKEN_ENV = "VLM_ENVS_SERVE_TOKEN"


class ServeConfigError(ValueError):
    """The server cannot start as asked; the message says why in one line."""


@dataclasses.dataclass(frozen=True)
class ServeConfig:
    """The server's settings. ``envs`` empty: every registered env."""

    envs: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    max_sessions: int = 4096
    idle_timeout_s: float = 600.0
    token: str | None = None
    #: The largest request body (HTTP) or message (WebSocket) taken, in bytes.
    max_body_bytes: int = 1 << 20
    #: A call with no answer for this long kills its worker (an env that never returns).
    call_timeout_s: float = 120.0
    #: After SIGTERM, how long in-flight calls get to finish before the server exits anyway.
    drain_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        for name in ("workers", "max_sessions", "max_body_bytes"):
            if getattr(self, name) < 1:
                raise ServeConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("idle_timeout_s", "call_timeout_s", "drain_timeout_s"):
            if not getattr(self, name) > 0:
                raise ServeConfigError(f"{name} must be > 0, got {getattr(self, name)}")
        if not is_loopback(self.host) and not self.token:
            raise ServeConfigError(
                f"binding {self.host!r} (not loopback) needs a bearer token: give --token or set ${TOKEN_ENV}"
            )

    def served(self) -> dict[str, str]:
        """Name -> what builds it, for every env served; :class:`ServeConfigError` for an unknown one."""
        if not self.envs:
            return {spec.name: spec.name for spec in list_envs()}
        served = {}
        for name in self.envs:
            try:
                served[get_spec(name).name] = name
            except Exception as err:
                raise ServeConfigError(" ".join(str(err).split())) from err
        return served


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_from_env(token: str | None) -> str | None:
    """``token`` if given, else the token in :data:`TOKEN_ENV` (empty counts as none)."""
    return token or os.environ.get(TOKEN_ENV) or None
