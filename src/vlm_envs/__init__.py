"""vlm-envs: multi-turn vision-language environments for RL post-training of VLMs."""

from vlm_envs.protocol import Env, EpisodeFinishedError, Observation, StepInfo
from vlm_envs.registry import EnvSpec, UnknownEnvError, build_env, list_envs, register

__all__ = [
    "Env",
    "EnvSpec",
    "EpisodeFinishedError",
    "Observation",
    "StepInfo",
    "UnknownEnvError",
    "build_env",
    "list_envs",
    "register",
]
__version__ = "0.1.0"


def _register_gym_envs() -> None:
    from vlm_envs.gym import register_gym_envs

    register_gym_envs()


_register_gym_envs()
