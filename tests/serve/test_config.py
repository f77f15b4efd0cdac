"""ServeConfig's checks and the default worker memory budget, read off a real memory cgroup."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from vlm_envs.serve.config import (
    DEFAULT_WORKER_MEMORY_CAP_MIB,
    ServeConfig,
    ServeConfigError,
    default_worker_memory_mib,
    memory_limit_bytes,
)

#: cgroup v1's memory controller, where a test may make a group of its own (as root).
CGROUP_V1 = Path("/sys/fs/cgroup/memory")


def test_the_backstop_must_stay_above_the_deadline_and_a_session_fit_a_worker() -> None:
    with pytest.raises(ServeConfigError, match=r"call_timeout_s .* must be above call_deadline_s"):
        ServeConfig(call_deadline_s=30.0, call_timeout_s=30.0)
    with pytest.raises(ServeConfigError, match=r"session_memory_mib .* at most worker_memory_mib"):
        ServeConfig(session_memory_mib=600, worker_memory_mib=512)


def test_the_default_budget_splits_half_the_memory_over_the_workers() -> None:
    half_mib = memory_limit_bytes() // 2 // (1 << 20)
    for workers in (1, 2, 8, 64):
        expected = max(512, min(DEFAULT_WORKER_MEMORY_CAP_MIB, half_mib // workers))
        assert default_worker_memory_mib(workers, 512) == expected
        config = ServeConfig(workers=workers, session_memory_mib=512)
        assert config.worker_memory_mib == expected
        config = ServeConfig(workers=workers)  # the session's default: a quarter of its worker's
        assert config.session_memory_mib == min(512, config.worker_memory_mib // 4)
    config = ServeConfig(worker_memory_mib=700)  # given: kept
    assert (config.worker_memory_mib, config.session_memory_mib) == (700, 175)


def test_a_memory_cgroups_limit_sizes_the_default_budget(tmp_path: Path) -> None:
    """A server started in a 2.5 GiB cgroup gives each of two workers 640 MiB (not 4 GiB each), and each
    session a quarter of that."""
    group = CGROUP_V1 / f"vlm-envs-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(2560 << 20))
    except OSError as err:  # not root, or no cgroup v1 memory controller
        pytest.skip(f"cannot make a memory cgroup here: {err}")
    try:
        code = (
            f"import os; open('{group / 'cgroup.procs'}', 'w').write(str(os.getpid()))\n"
            "from vlm_envs.serve.config import ServeConfig\n"
            "config = ServeConfig(workers=2)\n"
            "print(config.worker_memory_mib, config.session_memory_mib)"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.split() == ["640", "160"]
    finally:
        group.rmdir()
