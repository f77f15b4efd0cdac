"""The serve tests' shared server (see serve_support.py for the harness)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from serve_support import Running, ServerThread

from vlm_envs.serve.config import ServeConfig


@pytest.fixture(scope="session")
def every_env_server() -> Iterator[Running]:
    """Every registered env, two workers."""
    with ServerThread(ServeConfig(workers=2)) as running:
        yield running
