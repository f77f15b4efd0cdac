"""Every env registered through entry points passes the conformance suite."""

import pytest

from vlm_envs import build_env, list_envs
from vlm_envs.checker import check_env

ENV_NAMES = [spec.name for spec in list_envs()]


def test_the_shipped_envs_are_registered():
    assert {"sokoban", "geo3k"} <= set(ENV_NAMES)


@pytest.mark.parametrize("name", ENV_NAMES)
def test_registered_env_passes_check_env(name):
    check_env(build_env(name))
