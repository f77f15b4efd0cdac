"""vlm-envs envs as a ``verifiers.v1`` taskset (verifiers 0.4), in the shape of its seeded-game tasksets.

verifiers' loader reads a taskset module through its ``__all__``: one ``Taskset``, its ``Env`` and
its bundled ``Harness`` (this module's, re-exported as the top-level ``vlm_envs_verifiers``, since
the loader takes module names). From the command line::

    vf-eval --env.taskset.id vlm-envs-verifiers --env.taskset.env sokoban --env.taskset.num-examples 8 \\
        --env.taskset.config '{"max_turns": 8}' --client.base-url http://HOST/v1 -m MODEL --no-push

or in Python, :func:`load_environment` (``load_environment(env="sokoban", num_examples=8, **config)``).
The env, its config and the seeds are checked when the env loads (an unknown env or config key is one
line then, not when the first task is drawn). Each task is one seed: its ``info`` holds env, seed and
config (and ``difficulty``, where the taskset's ``difficulty`` names levels: one, or a mix or schedule
as ``make-dataset --difficulty`` takes), its prompt is the env's first observation; a task's
``difficulty`` and ``options`` are the env's reset options (:mod:`vlm_envs.interop.row_options`).
The player has limits a run can override (:data:`PLAYER_LIMITS`: ``--env.player.max-turns`` and
friends), so a run without an env turn cap still ends. :class:`VlmEnvsEnv` steps the env host-side as
the run's user: each reply goes to ``env.step`` and the next observation comes back as the user turn;
the episode ends when the env is done. Images travel as ``image_url`` parts with lossless PNG data
URIs. The env's episode reward is the trace's ``episode_reward``, its last metrics are trace
metrics. Rewards pass the one reward check
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
from collections.abc import Iterator, Sequence
from typing import Any

import verifiers.v1 as vf
from pydantic import Field, field_validator
from verifiers.v1.configs.agent import TimeoutConfig
from verifiers.v1.harnesses.null import NullHarness
from verifiers.v1.utils.loaders import load_environment as vf_load_environment

from vlm_envs.configured import EnvConfigError, build_configured_env
from vlm_envs.datasets.curriculum import parse_curriculum
from vlm_envs.imaging import png_data_uri
from vlm_envs.interop.row_options import row_reset_options
from vlm_envs.protocol import Observation, check_seed
from vlm_envs.registry import UnknownEnvError, build_env, get_spec
from vlm_envs.rewards import RewardError, call_reward, check_reward

__all__ = ["LocalChatHarness", "VlmEnvsEnv", "VlmEnvsTaskset", "load_environment"]

#: The taskset id verifiers' loader imports: the top-level module ``vlm_envs_verifiers`` re-exporting
#: this one (the loader takes module names, not dotted paths).
TASKSET_ID = "vlm-envs-verifiers"
#: The player's limits unless a run sets its own (``--env.player.max-turns 32``; ``None``: no limit).
#: Each turn sends the model the whole conversation so far, every image included, so an episode
#: without a cap costs more per turn as it goes: these end a run whose env has no cap of its own.
PLAYER_LIMITS: dict[str, Any] = {
    "max_turns": 16,  # model turns per episode (an env's own max_turns ends it first where lower)
    "max_total_tokens": 32768,  # the conversation's tokens, input counted once, as verifiers counts them
    "timeout": TimeoutConfig(rollout=600.0),  # seconds the player may take over one episode
}


class VlmEnvsTasksetConfig(vf.TasksetConfig):
    """Which env, its config, and which seeds (``first_seed`` on; ``num_examples`` of them, or unbounded);
    ``difficulty``: each task's level (``hard``; a mix ``easy:0.5,hard:0.5`` or a ``schedule:`` needs
    ``num_examples``). Seeds and counts arrive as text from verifiers' command line (``"3"``), so a
    decimal string is read as its number here; :func:`load_environment` takes Python ints only."""

    env: str = "sokoban"
    config: dict[str, Any] = Field(default_factory=dict)
    first_seed: int = 0
    num_examples: int | None = Field(default=None, ge=1)
    difficulty: str | None = None

    @field_validator("first_seed", "num_examples", mode="before")
    @classmethod
    def _whole_number(cls, value: Any) -> Any:
        """Python ints, or the decimal text verifiers' command line gives (never ``3.0``, ``True``)."""
        if isinstance(value, str) and value.isdigit() and value.isascii():
            return int(value)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"must be a whole number, got {value!r:.40}")
        return value


class VlmEnvsData(vf.TaskData):
    info: dict
    """The env, seed and config the episode is played from."""


class VlmEnvsTask(vf.Task[VlmEnvsData, vf.State, vf.TaskConfig]):
    pass


class VlmEnvsEnvConfig(vf.EnvConfig):
    #: A chat player runs no code: on the host by default (verifiers' default is a cloud sandbox); its
    #: limits are :data:`PLAYER_LIMITS` unless a run sets its own.
    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig(), **PLAYER_LIMITS)


class VlmEnvsTaskset(vf.Taskset[VlmEnvsTask, VlmEnvsTasksetConfig]):
    """One task per seed of a registered vlm-envs env."""

    INFINITE = True

    def __init__(self, config: VlmEnvsTasksetConfig) -> None:
        super().__init__(config)
        self.levels = check_taskset(config)
        if config.num_examples is not None:
            self._bounded = True

    def load(self) -> Iterator[VlmEnvsTask]:
        cfg = self.config
        seed = cfg.first_seed
        while cfg.num_examples is None or seed < cfg.first_seed + cfg.num_examples:
            info: dict[str, Any] = {"env": cfg.env, "seed": seed, "config": dict(cfg.config)}
            if self.levels:
                info["difficulty"] = self.levels[(seed - cfg.first_seed) % len(self.levels)]
            env = build_env(cfg.env, **cfg.config)
            try:
                obs = reset(env, info)
                system = env.system_prompt()
            finally:
                env.close()
            yield VlmEnvsTask(
                VlmEnvsData(
                    name=f"{cfg.env}#{seed}",
                    prompt=[vf.UserMessage(content=content(obs))],
                    system_prompt=system,
                    info=info,
                ),
                self.config.task,
            )
            seed += 1


def check_taskset(config: VlmEnvsTasksetConfig) -> Sequence[str]:
    """What the taskset will play, checked before any task loads: the env (registered, or a module
    path), its config (the env is built once), the seeds' range and the difficulty spec. The tasks'
    levels in seed order (one level: a list of one; none: empty); a one-line ``ValueError`` otherwise."""
    try:
        get_spec(config.env)
    except UnknownEnvError as err:  # a KeyError: its message is its first argument
        raise ValueError(err.args[0]) from None
    try:
        build_configured_env(config.env, None, config.config).close()
    except EnvConfigError as err:
        raise ValueError(str(err)) from None
    check_seed(config.first_seed + (config.num_examples or 1) - 1)  # the last seed too
    if config.difficulty is None:
        return []
    try:
        curriculum = parse_curriculum(config.difficulty)
    except ValueError as err:
        raise ValueError(str(err).replace("--difficulty", "difficulty", 1)) from None
    if len(curriculum.shares) == 1:
        return [curriculum.shares[0][0]]
    if config.num_examples is None:
        raise ValueError(f"difficulty {config.difficulty!r} shares the tasks out: give num_examples too")
    return list(curriculum.plan(config.num_examples, config.first_seed))


def reset(env: Any, info: dict[str, Any]) -> Observation:
    """``env`` reset to a task's episode: its seed, and its ``difficulty`` and ``options`` as the env's
    reset options."""
    options = row_reset_options(info, get_spec(info["env"]).load())
    obs, _ = env.reset(seed=info["seed"]) if options is None else env.reset(info["seed"], options)
    return obs


class VlmEnvsEnv(vf.Env[VlmEnvsEnvConfig]):
    """Plays a task's episode: the env steps host-side and answers each reply with its next observation."""

    async def run(self, task: VlmEnvsTask, agents: Any) -> None:
        info = task.data.info
        env = build_env(info["env"], **info["config"])
        try:
            reset(env, info)
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


def load_environment(
    env: str = "sokoban",
    num_examples: int | None = None,
    *,
    first_seed: int = 0,
    difficulty: str | None = None,
    **config: Any,
) -> vf.Env:
    """The verifiers env playing ``num_examples`` seeds (from ``first_seed``; ``None``: unbounded) of
    the registered env ``env`` with ``config`` (``difficulty``: see :class:`VlmEnvsTasksetConfig`),
    built through verifiers' own loader. Everything is checked here, in one line: an unknown env or
    config key, a seed or count that is not a Python int (``"3"`` is refused), a bad difficulty."""
    check_seed(first_seed)
    if num_examples is not None and (type(num_examples) is not int or num_examples < 1):
        raise ValueError(f"num_examples must be an int >= 1 or None, got {num_examples!r:.40}")
    spec: dict[str, Any] = {"id": TASKSET_ID, "env": env, "config": config, "num_examples": num_examples}
    spec.update(first_seed=first_seed, difficulty=difficulty)
    return vf_load_environment(vf.resolve_env_config({"taskset": spec}))
