"""Where episodes play: in process, in worker processes, or on Ray actors, behind one interface.

:class:`ExecutorConfig` picks one from a trainer's config; every executor is an
:class:`EpisodeExecutor`. The Ray executor and its helpers import ray only when used.
"""

from vlm_envs.rollout.executors.config import ExecutorConfig
from vlm_envs.rollout.executors.in_process import EpisodeExecutor, InProcessEpisodes
from vlm_envs.rollout.executors.worker_process import EpisodeJob
from vlm_envs.rollout.executors.workers import EpisodeWorkers

__all__ = ["EpisodeExecutor", "EpisodeJob", "EpisodeWorkers", "ExecutorConfig", "InProcessEpisodes"]
