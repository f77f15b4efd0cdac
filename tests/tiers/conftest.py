"""What the tier tests share: the README's Sokoban episode and the installed ``vlm-envs serve`` playing it.

Runs in the main venv and in each tier's own (tests/tiers/run_tiers.py): nothing here needs more than
the core install and the standard library.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the tier tests import readme_episode


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=1) as reply:
            return reply.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``vlm-envs serve sokoban`` (the installed script) on a free loopback port, one worker; its base
    URL. It must exit 0 on SIGTERM (calls in flight finish, then it exits)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [str(Path(sys.executable).with_name("vlm-envs")), "serve", "sokoban", "--workers", "1"]
    log_path = tmp_path_factory.mktemp("serve") / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([*command, "--port", str(port)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while not healthy(url):
            assert process.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        code = process.wait(30)
    assert code == 0, log_path.read_text()[-3000:]
