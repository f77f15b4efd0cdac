"""Joining a Ray cluster in bounded time, and whether it can hold the actors asked of it.

``ray.init`` against an address where nothing listens retries for minutes (Ray 2.60: 15 "Failed to
connect to GCS" warnings over 3.5 min for ``127.0.0.1:1``), and against one that accepts but never
answers it waits as long. So :func:`join` first opens a TCP connection to a ``HOST:PORT`` address
(the argument, else ``RAY_ADDRESS``) with a short deadline, then runs ``ray.init`` on a thread of its
own and waits for it at most ``timeout`` seconds: never on the caller's event loop, never for long.
Every failure, a local Ray that cannot start included, is a :class:`ClusterError` of one line.

Actors whose resources no node can give stay pending forever; :func:`unmet` compares a request
with the alive nodes' resources before any actor is made, and :class:`Placements` gives each actor
a deadline to start by (other work may hold what it asks for). Importing this module imports ray.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import ray

from vlm_envs.errors import one_line

__all__ = ["ClusterError", "Placements", "join", "unmet"]

#: Seconds a TCP connection to the cluster's address may take before it counts as unreachable.
CONNECT_TIMEOUT_S = 5.0
#: Seconds ``ray.init`` may take (joining a cluster takes a second or two; starting a local one, ten).
JOIN_TIMEOUT_S = 60.0
#: The least CPU one actor counts for when the cluster's room is reckoned (an actor is a process: at
#: most 8 per CPU, however little it asks).
MIN_ACTOR_CPUS = 0.125
#: Address forms that name no endpoint to check (Ray resolves them itself).
_NAMED = ("auto", "local")

_lock = threading.Lock()
#: The ``ray.init`` under way, if any: a later :func:`join` waits for it rather than start another.
_attempt: concurrent.futures.Future[None] | None = None


class ClusterError(RuntimeError):
    """The Ray cluster cannot be joined (or started), or cannot hold what was asked; one line."""


def join(address: str | None = None, timeout: float = JOIN_TIMEOUT_S, **init_kwargs: Any) -> bool:
    """Connect this process to the Ray cluster at ``address`` (else ``RAY_ADDRESS``, else a local
    one, started if none runs) unless it is connected already; ``True`` if this call connected it.

    Blocks the calling thread for at most about ``timeout`` seconds (call it off any event loop);
    raises :class:`ClusterError` saying why it could not.
    """
    global _attempt
    where, source = _where(address)
    with _lock:
        if ray.is_initialized() and (_attempt is None or _attempt.done()):
            return False
        if _attempt is None or _attempt.done():
            if where is not None:
                _check_reachable(where, source)
            _attempt = _start(address, init_kwargs)
        attempt = _attempt
    try:
        attempt.result(timeout)
    except concurrent.futures.TimeoutError:
        raise ClusterError(
            f"could not join {_describe(where, source)}: no answer within {timeout:g} s"
        ) from None
    except Exception as err:
        verb = "join" if where is not None else "join or start"
        raise ClusterError(
            f"could not {verb} {_describe(where, source)}: {one_line(err, 500, typed=True)}"
        ) from None
    return True


def unmet(actors: int, request: Mapping[str, float]) -> str | None:
    """Why ``actors`` actors that each take ``request`` (Ray resource name to amount) cannot all
    be placed on the cluster's alive nodes, counting their whole resources; ``None`` if they can.
    Each actor is a process of its own: it counts for at least :data:`MIN_ACTOR_CPUS` CPU, whatever
    it asks (so 10,000,000 actors of 0 CPU are refused too, not started).

    Only what can never fit is caught here: resources other work holds now are not counted.
    """
    asked = {name: float(amount) for name, amount in request.items() if amount > 0}
    counted = {**asked, "CPU": max(asked.get("CPU", 0.0), MIN_ACTOR_CPUS)}
    nodes = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]
    room = sum(_room(node, counted) for node in nodes)
    if room >= actors:
        return None
    total = {name: sum(node.get(name, 0.0) for node in nodes) for name in counted}
    most = {name: max((node.get(name, 0.0) for node in nodes), default=0.0) for name in counted}
    floor = f" (each counts as at least CPU={MIN_ACTOR_CPUS:g}: a process)" if counted != asked else ""
    return (
        f"Ray actors asking {_amounts(asked)} each{floor}: {actors} wanted, the cluster has room for "
        f"{room} (its {len(nodes)} alive node(s) have {_amounts(total)} in all, at most {_amounts(most)} "
        "on one)"
    )


class Placements:
    """Actors not started yet, each with ``timeout_s`` to start by; all ask for ``request``."""

    def __init__(self, request: Mapping[str, float], timeout_s: float) -> None:
        self.asked = {name: float(amount) for name, amount in request.items() if amount > 0}
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._starting: dict[Any, tuple[int, Any, float]] = {}  # ready ref -> (slot, actor, deadline)

    def watch(self, index: int, actor: Any, ready: Any) -> None:
        """``actor`` (in slot ``index``) has started once ``ready`` (a call to it) is."""
        with self._lock:
            self._starting[ready] = (index, actor, time.monotonic() + self.timeout_s)

    def refs(self) -> list[Any]:
        """The calls to wait on."""
        with self._lock:
            return list(self._starting)

    def overdue(self, ready: Iterable[Any]) -> list[tuple[int, Any, str]]:
        """Forget the actors whose call is in ``ready``; return those past their deadline (slot,
        actor, why), forgotten too."""
        done, now = set(ready), time.monotonic()
        with self._lock:
            late = [
                (ref, entry) for ref, entry in self._starting.items() if ref not in done and now > entry[2]
            ]
            for ref in done.union(ref for ref, _ in late):
                self._starting.pop(ref, None)
        return [(index, actor, self._why()) for _, (index, actor, _) in late]

    def clear(self) -> None:
        with self._lock:
            self._starting.clear()

    def _why(self) -> str:
        try:
            free, total = ray.available_resources(), ray.cluster_resources()
            cluster = ", ".join(f"{n}={free.get(n, 0.0):g} of {total.get(n, 0.0):g}" for n in self.asked)
        except Exception as err:  # the cluster is going away: say that instead
            cluster = one_line(err, 500, typed=True)
        return (
            f"an actor asking {_amounts(self.asked)} was not started within {self.timeout_s:g} s (free now: "
            f"{cluster}); other work holds those resources, or they do not pack onto the nodes: ask for "
            "fewer or smaller actors"
        )


def _room(node: Mapping[str, float], asked: Mapping[str, float]) -> float:
    """How many actors asking ``asked`` fit on an empty ``node``."""
    if not asked:
        return math.inf
    return min(math.floor(node.get(name, 0.0) / amount + 1e-6) for name, amount in asked.items())


def _amounts(resources: Mapping[str, float]) -> str:
    return ", ".join(f"{name}={amount:g}" for name, amount in resources.items()) or "nothing"


def _where(address: str | None) -> tuple[str | None, str]:
    """The address to check (``None``: none to check) and where it came from."""
    if address:
        return (None if address in _NAMED else address), "given"
    from_env = os.environ.get("RAY_ADDRESS") or None
    return (None if from_env in _NAMED else from_env), "RAY_ADDRESS"


def _describe(where: str | None, source: str) -> str:
    if where is None:
        return "a local Ray cluster"
    return f"the Ray cluster at {where}" + (" (from RAY_ADDRESS)" if source == "RAY_ADDRESS" else "")


def _check_reachable(address: str, source: str) -> None:
    """Raise :class:`ClusterError` at once if nothing accepts a TCP connection at a ``HOST:PORT``
    (or ``ray://HOST:PORT``) address; other forms are left to Ray."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit() or "/" in host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as err:
        problem = one_line(err, 500, typed=True)
        raise ClusterError(
            f"could not join {_describe(address, source)}: nothing answers there ({problem}); "
            "start the cluster (ray start --head) or give its address"
        ) from None


def _off_main_thread_warning(record: logging.LogRecord) -> bool:
    """Drop Ray's warning that ``ray.init`` off the main thread sets no SIGTERM handler: the local
    cluster it starts shares the driver's fate anyway, and the line would be noise on every run."""
    return "SIGTERM handler is not set" not in record.getMessage()


logging.getLogger("ray._private.worker").addFilter(_off_main_thread_warning)


def _start(address: str | None, init_kwargs: Mapping[str, Any]) -> concurrent.futures.Future[None]:
    """``ray.init`` on a daemon thread (one that never returns does not hold the process), which
    then stays: a local cluster it started lives as long as it does."""
    done: concurrent.futures.Future[None] = concurrent.futures.Future()

    def init() -> None:
        try:
            ray.init(address=address, **init_kwargs)
        except BaseException as err:  # handed to whoever waits
            done.set_exception(err)
            return
        done.set_result(None)
        # the processes of a local cluster ray.init starts die with the thread that started them
        # (PR_SET_PDEATHSIG is per thread, not per process): this one stays as long as the process
        threading.Event().wait()

    threading.Thread(target=init, daemon=True, name="vlm-envs-ray-init").start()
    return done
