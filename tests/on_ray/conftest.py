"""A real two-node Ray cluster on loopback, shared by every Ray test of the session.

``ray start --block`` runs each node in the foreground of its own process group, so the fixture
stops exactly the processes it started (the group's id), whatever happens in the tests.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).parent / "ray")
#: Per node: small, the machine is shared (Ray's minimum is 75 MB).
OBJECT_STORE_BYTES = 200_000_000
NODES_UP_TIMEOUT_S = 120.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _node(*args: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    common = [
        "--block",
        "--num-cpus=1",
        f"--object-store-memory={OBJECT_STORE_BYTES}",
        "--node-ip-address=127.0.0.1",
    ]
    with log.open("wb") as out:
        return subprocess.Popen(
            [RAY, "start", *args, *common],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(node: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.pid, sig)
        try:
            node.wait(timeout=15)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """A head node and a second node (one CPU each) on 127.0.0.1; this process joins as the driver."""
    temp = Path(tempfile.mkdtemp(prefix="vlm-envs-ray-"))
    env = {
        **os.environ,
        "RAY_USAGE_STATS_ENABLED": "0",
        # a throwaway loopback cluster: no token (ray would read or write one under ~/.ray)
        "RAY_AUTH_MODE": "disabled",
        # the actors import the stand-in slime and the test envs, as the tests do
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests" / "support")]),
    }
    address = f"127.0.0.1:{_free_port()}"
    nodes = []
    auth_mode = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # this process joins as the driver
    try:
        nodes.append(
            _node(
                "--head",
                f"--port={address.rsplit(':', 1)[1]}",
                "--include-dashboard=false",
                f"--temp-dir={temp}",
                env=env,
                log=temp / "head.log",
            )
        )
        nodes.append(_node(f"--address={address}", env=env, log=temp / "worker.log"))
        deadline = time.monotonic() + NODES_UP_TIMEOUT_S
        while True:  # the head takes a few seconds to listen; the second node retries by itself
            try:
                ray.init(address=address, log_to_driver=False)
                break
            except ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:
            assert time.monotonic() < deadline, (temp / "worker.log").read_text()
            time.sleep(0.5)
        yield address
    finally:
        with contextlib.suppress(Exception):
            ray.shutdown()
        for node in reversed(nodes):
            _stop(node)
        if auth_mode is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = auth_mode


@pytest.fixture(scope="module")
def served(sglang_server, tiny_engine):
    """The shared test server with a codec for its processor (as in tests/rollout)."""
    from vlm_envs.rollout.codec import ChatCodec

    return sglang_server, ChatCodec(tiny_engine.processor)
