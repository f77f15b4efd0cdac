"""``vlm-envs make-dataset ENV --trainer verl``: verl's parquet, its agent-loop YAML, a run's overrides.

Rows follow verl's ``RLHFDataset`` layout: ``prompt`` (chat messages; ``<image>`` where each image
goes), ``images``, ``data_source`` (the env), ``agent_name`` (``vlm_envs``: our agent loop plays the
row) and ``extra_info`` (``env``, ``seed``, ``index`` and, where given, ``env_config`` and
``max_turns``: all the loop needs to replay the episode; a row with a seed builds its env from these
alone, see :mod:`vlm_envs.rollout.rows`). The prompt is the env's own first observation. verl's
``data.filter_overlong_prompts`` stays off (with images it needs ``qwen_vl_utils`` and
``torchvision``, which verl does not install): the loop itself fails a row whose prompt exceeds
``rollout.prompt_length``.
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path
from typing import Any, Literal

from vlm_envs.configured import build_configured_env
from vlm_envs.files import write_atomic
from vlm_envs.imaging import image_column
from vlm_envs.protocol import DEFAULT_MAX_TURNS

#: The agent loop's name and import path (vlm_envs.rollout.verl.AGENT_NAME / LOOP_TARGET; this
#: module must not import verl, so they are repeated here and a test checks they agree).
AGENT_NAME = "vlm_envs"
LOOP_TARGET = "vlm_envs.rollout.verl.VlmEnvsAgentLoop"
#: verl's Hydra configs for its two backends (verl/trainer/config/*.yaml in the verl package).
CONFIG_NAMES = {"fsdp": "ppo_trainer", "megatron": "ppo_megatron_trainer"}
DEFAULT_MODEL = "Qwen/Qwen3-VL-2B-Instruct"
#: Token budgets of the printed run: a Sokoban prompt of a Qwen3-VL model is a few hundred tokens,
#: and each turn adds a reply and an observation with its image.
PROMPT_LENGTH, RESPONSE_LENGTH = 2048, 4096
Backend = Literal["fsdp", "megatron"]


def verl_rows(
    env_name: str,
    n: int,
    seed: int,
    max_turns: int | None,
    env_config: dict[str, Any],
    first_index: int = 0,
) -> list[dict[str, Any]]:
    """One row per seed ``seed .. seed + n - 1`` from the env's first observation; ``index`` counts
    from ``first_index``."""
    env = build_configured_env(env_name, max_turns, env_config)
    rows = []
    try:
        system = env.system_prompt()
        for index, s in enumerate(range(seed, seed + n), start=first_index):
            obs, _ = env.reset(seed=s)
            extra: dict[str, Any] = {"env": env_name, "seed": s, "index": index}
            if env_config:  # parquet cannot hold an empty struct
                extra["env_config"] = env_config
            if max_turns is not None:
                extra["max_turns"] = max_turns
            messages = [{"role": "system", "content": system}] if system else []
            messages.append({"role": "user", "content": obs.to_dict()["obs_str"]})
            rows.append(
                {
                    "prompt": messages,
                    "images": image_column(obs.images),
                    "data_source": env_name,
                    "agent_name": AGENT_NAME,
                    "extra_info": extra,
                }
            )
    finally:
        env.close()
    return rows


def agent_loop_yaml() -> str:
    """The YAML of ``actor_rollout_ref.rollout.agent.agent_loop_config_path``."""
    return (
        "# verl agent loops: rows with agent_name 'vlm_envs' are played by vlm-envs' loop\n"
        f"- name: {AGENT_NAME}\n"
        f"  _target_: {LOOP_TARGET}\n"
    )


@dataclasses.dataclass(frozen=True)
class VerlFiles:
    """What make-dataset wrote for verl, and the overrides of a complete GRPO run on it."""

    parquet: Path
    yaml: Path
    rows: int
    env: str
    max_turns: int
    backend: Backend = "fsdp"
    model: str = DEFAULT_MODEL

    @property
    def config_name(self) -> str:
        return CONFIG_NAMES[self.backend]

    def overrides(self) -> list[str]:
        """``key=value`` overrides of ``python -m verl.trainer.main_ppo`` (8 GPUs, one node)."""
        return [
            "algorithm.adv_estimator=grpo",
            f"data.train_files={self.parquet}",
            f"data.val_files={self.parquet}",
            "data.prompt_key=prompt",
            "data.image_key=images",
            f"data.max_prompt_length={PROMPT_LENGTH}",
            f"data.max_response_length={RESPONSE_LENGTH}",
            "data.train_batch_size=32",
            f"actor_rollout_ref.model.path={self.model}",
            "actor_rollout_ref.actor.optim.lr=1e-6",
            "actor_rollout_ref.actor.ppo_mini_batch_size=16",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
            "actor_rollout_ref.actor.use_kl_loss=False",
            "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.n=8",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
            "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
            "actor_rollout_ref.rollout.calculate_log_probs=True",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
            f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={self.max_turns}",
            f"actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_NAME}",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={self.yaml}",
            'trainer.logger=["console"]',
            "trainer.project_name=vlm-envs",
            f"trainer.experiment_name={self.env}-{self.backend}",
            "trainer.n_gpus_per_node=8",
            "trainer.nnodes=1",
            "trainer.val_before_train=False",
            "trainer.total_epochs=15",
        ]

    def command(self) -> str:
        """The launch command with every override, one per line."""
        launch = f"python3 -m verl.trainer.main_ppo --config-name {self.config_name}"
        lines = [launch, *(shlex.quote(o) for o in self.overrides())]
        return " \\\n  ".join(lines)


def check_backend(backend: str) -> None:
    """Raise ``ValueError`` unless ``backend`` names one of verl's trainers."""
    if backend not in CONFIG_NAMES:
        raise ValueError(f"--backend must be one of {sorted(CONFIG_NAMES)}, got {backend!r}")


def agent_loop_yaml_path(path: Path) -> Path:
    """Where the agent-loop YAML of the rows at ``path`` goes: ``NAME.agent_loop.yaml``."""
    return path.with_suffix(".agent_loop.yaml")


def write_verl_yaml(
    path: Path, n: int, env_name: str, max_turns: int | None, backend: Backend = "fsdp"
) -> VerlFiles:
    """Write the agent-loop YAML next to the rows at ``path`` (:func:`agent_loop_yaml_path`)."""
    check_backend(backend)
    yaml_path = write_atomic(agent_loop_yaml_path(path), agent_loop_yaml())
    return VerlFiles(
        parquet=path.resolve(),
        yaml=yaml_path.resolve(),
        rows=n,
        env=env_name,
        max_turns=max_turns or DEFAULT_MAX_TURNS,
        backend=backend,
    )
