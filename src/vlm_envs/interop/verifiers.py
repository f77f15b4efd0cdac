"""vlm-envs envs as a ``verifiers.v1`` taskset (verifiers 0.4), in the shape of its seeded-game tasksets.

verifiers' loader reads a taskset module through its ``__all__``: one ``Taskset``, its ``Env`` and
its bundled ``Harness`` (this module's, re-exported as the top-level ``vlm_envs_verifiers``, since
the loader takes module names). From the command line::

    vf-eval --env.taskset.id vlm-envs-verifiers --env.taskset.env sokoban -n 8 \\
        --client.base-url http://HOST/v1 -m MODEL

or in Python, :func:`load_environment` (``load_environment(env="sokoban", num_examples=8, **config)``).
Each task is one seed: its ``info`` holds env, seed and config, its prompt is the env's first
observation. :class:`VlmEnvsEnv` steps the env host-side as the run's user: each reply goes to
``env.step`` and the next observation comes back as the user turn; the episode ends when the env is
done. Images travel as ``image_url`` parts with lossless PNG data URIs. The env's episode reward is
the trace's ``episode_reward``, its last metrics are trace metrics. Rewards pass the one reward check
(:mod:`vlm_envs.rewards`): an episode or step reward that is NaN, inf, ``None``, beyond the bound or
raising is never recorded; the trace fails with the reason as a ``TaskError`` (verifiers' error for a
task's reward that raised: the episode is not ``ok``, the run goes on, ``--resume`` plays it again).

What carries over: the envs, every turn's images, the rewards and metrics. What does not: the
tokenization (the verifiers consumer renders the chat; no token-exact trajectory as our slime, verl
and TRL paths give), an env's system prompt goes as the task's system prompt, and a tool observation
arrives as a user turn. :class:`LocalChatHarness` is verifiers' own ``null`` chat program run with
this Python instead of a ``uv``-built environment (its packages are verifiers' dependencies), so a
run needs no network beyond the model.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.harnesses.null import NullHarness
from verifiers.v1.utils.loaders import load_environment as vf_load_environment

from vlm_envs.imaging import png_data_uri
from vlm_envs.protocol import Observation
from vlm_envs.registry import build_env
from vlm_envs.rewards import RewardError, call_reward, check_reward

__all__ = ["LocalChatHarness", "VlmEnvsEnv", "VlmEnvsTaskset", "load_environment"]

#: The taskset id verifiers' loader imports: the top-level module ``vlm_envs_verifiers`` re-exporting
#: this one (the loader takes module names, not dotted paths).
TASKSET_ID = "vlm-envs-verifiers"


class VlmEnvsTasksetConfig(vf.TasksetConfig):
    """Which env, its config, and which seeds (``first_seed`` on; ``num_examples`` of them, or unbounded)."""

    env: str = "sokoban"
    config: dict[str, Any] = Field(default_factory=dict)
    first_seed: int = 0
    num_examples: int | None = None


class VlmEnvsData(vf.TaskData):
    info: dict
    """The env, seed and config the episode is played from."""


class VlmEnvsTask(vf.Task[VlmEnvsData, vf.State, vf.TaskConfig]):
    pass


class VlmEnvsEnvConfig(vf.EnvConfig):
    #: A chat player runs no code: on the host by default (verifiers' default is a cloud sandbox).
    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class VlmEnvsTaskset(vf.Taskset[VlmEnvsTask, VlmEnvsTasksetConfig]):
    """One task per seed of a registered vlm-envs env."""

    INFINITE = True

    def __init__(self, config: VlmEnvsTasksetConfig) -> None:
        super().__init__(config)
        if config.num_examples is not None:
            self._bounded = True

    def load(self) -> Iterator[VlmEnvsTask]:
        cfg = self.config
        seed = cfg.first_seed
        while cfg.num_examples is None or seed < cfg.first_seed + cfg.num_examples:
            env = build_env(cfg.env, **cfg.config)
            try:
                obs, _ = env.reset(seed=seed)
                system = env.system_prompt()
            finally:
                env.close()
            yield VlmEnvsTask(
                VlmEnvsData(
                    name=f"{cfg.env}#{seed}",
                    prompt=[vf.UserMessage(content=content(obs))],
                    system_prompt=system,
                    info={"env": cfg.env, "seed": seed, "config": dict(cfg.config)},
                ),
                self.config.task,
            )
            seed += 1


class VlmEnvsEnv(vf.Env[VlmEnvsEnvConfig]):
    """Plays a task's episode: the env steps host-side and answers each reply with its next observation."""

    async def run(self, task: VlmEnvsTask, agents: Any) -> None:
        info = task.data.info
        env = build_env(info["env"], **info["config"])
        try:
            env.reset(seed=info["seed"])
            metrics: dict[str, float] = {}
            async with agents.player.interaction(task) as interaction:
                segment = await interaction.turn()  # the task's prompt is the first observation
                try:
                    turn = 0
                    while not segment.terminated:
                        obs, done, step = env.step(segment.last_reply)
                        check_reward(step.reward, f"the step reward of turn {turn}")
                        metrics = {k: float(v) for k, v in step.metrics.items()}
                        if done:
                            break
                        segment = await interaction.turn([vf.UserMessage(content=content(obs))])
                        turn += 1
                    reward = call_reward(env.episode_reward, "the episode reward")
                except RewardError as err:  # never a guessed score: the trace fails saying why
                    raise vf.TaskError(f"{task.data.name}: {err}") from None
                # recorded before the exchange closes, so the run's scoring and its log see them
                interaction.trace.record_reward("episode_reward", reward, 1.0)
                interaction.trace.record_metrics(metrics)
        finally:
            env.close()


class LocalChatHarness(NullHarness):
    """verifiers' ``null`` chat program, run with this Python (its packages are verifiers' own
    dependencies) instead of an environment ``uv`` builds from the network."""

    async def setup(self, runtime: Any) -> None:
        return None

    async def launch(self, ctx: Any, trace: Any, runtime: Any, *args: Any, **kwargs: Any) -> Any:
        async def prepared(source: str | bytes, env: Any = None, *, activate: bool = True) -> list[str]:
            path = f".vf-chat-program-{trace.id}.py"
            await runtime.write(path, source.encode() if isinstance(source, str) else source)
            return [sys.executable, path]

        runtime.prepare_uv_script = prepared  # this rollout's runtime only
        return await super().launch(ctx, trace, runtime, *args, **kwargs)


def content(obs: Observation) -> list[vf.TextContentPart | vf.ImageUrlContentPart]:
    """An observation's parts as verifiers content: text, and images as PNG data URIs, in order."""
    parts: list[Any] = []
    for part in obs.parts():
        if part["type"] == "image":
            parts.append(vf.ImageUrlContentPart(image_url=vf.ImageUrlSource(url=png_data_uri(part["image"]))))
        else:
            parts.append(vf.TextContentPart(text=part["text"]))
    return parts or [vf.TextContentPart(text="")]


def load_environment(env: str = "sokoban", num_examples: int | None = None, **config: Any) -> vf.Env:
    """The verifiers env playing ``num_examples`` seeds (from 0; ``None``: unbounded) of the registered
    env ``env`` with ``config``, built through verifiers' own loader."""
    spec: dict[str, Any] = {"id": TASKSET_ID, "env": env, "config": config, "num_examples": num_examples}
    return vf_load_environment(vf.resolve_env_config({"taskset": spec}))
