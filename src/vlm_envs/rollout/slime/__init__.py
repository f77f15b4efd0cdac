"""The slime hooks: ``--custom-generate-function-path vlm_envs.rollout.slime.generate`` and
``--custom-rm-path vlm_envs.rollout.slime.reward``.

The env comes from ``sample.metadata["env"]`` (dataset rows carry it, so one run can mix envs), else
from ``args.rollout_interaction_env_path`` (an entry-point name or a module path), which slime sets
only from the YAML given to ``--custom-config-path``, together with ``max_turns``::

    rollout_interaction_env_path: vlm_envs.envs.sokoban
    max_turns: 8
    vlm_envs_allowed_envs: [my_pkg.my_env]   # optional: module paths or files rows may name
    vlm_envs_workers: 4   # optional: play episodes in 4 worker processes (see EpisodeWorkers)
    vlm_envs_ray_actors: 32   # optional, instead: play them on 32 Ray actors (see RayEpisodeWorkers)
    vlm_envs_ray_actor_cpus: 1   # optional: CPUs per actor; vlm_envs_ray_resources: custom resources
    vlm_envs_ray_address: auto   # optional: the cluster to join when this process is not on one
    vlm_envs_max_in_flight: 256   # optional: episodes in flight per worker or actor at most
    vlm_envs_read_timeout: 60    # optional: seconds a read of SGLang's reply may make no progress
    vlm_envs_turn_timeout: 300   # optional: seconds one generation may take, retries included
    vlm_envs_max_body_bytes: 20000000  # optional: cap on a reply body (default: from max_new_tokens)
    vlm_envs_remote_url: [http://host-a:8000]  # with vlm_envs.remote: the vlm-envs serve servers
    vlm_envs_remote_timeout_s: 60   # optional, with vlm_envs.remote: seconds a reply may take

Filled Sample fields: ``tokens`` (prompt + response, images expanded), ``response``,
``response_length``, ``loss_mask`` and ``rollout_log_probs`` (1 / the engine's log prob on generated
tokens, 0 / 0.0 on observation tokens), ``multimodal_train_inputs`` (``pixel_values`` and
``image_grid_thw`` in token order), ``status``, ``reward`` (the env's episode reward unless
``vlm_envs_set_reward: false``) and ``metadata["vlm_envs"]`` (per-turn metrics, rewards, timings,
the error if any). This package (with :mod:`~vlm_envs.rollout.slime.sample`, which fills the Sample) is
the only one that knows slime.

Under slime's ``--partial-rollout``, an episode that slime aborts comes back ABORTED with what it played
and ``metadata["vlm_envs"]["resume"]`` (:mod:`vlm_envs.rollout.resume`); handed back, it goes on from its
last finished turn, the cut turn from the tokens SGLang returned, and the kept tokens, log probs and
loss mask (slime's ``--mask-offpolicy-in-partial-rollout`` zeros included) stay as they are.

A row (``sample.metadata``) is read by :class:`~vlm_envs.rollout.rows.RowSpec`: it may name a
registered env, or a module path or file only where the YAML names it (``rollout_interaction_env_path``
or ``vlm_envs_allowed_envs``); a row with a ``seed`` builds its env from its env config alone, a row
without one from the sample (its task); a refused row fails its sample, saying why (a row of
``vlm_envs.remote`` names its served ``env`` and config, never the servers, token or timeout: those
are the YAML's ``vlm_envs_remote_*`` and ``$VLM_ENVS_SERVE_TOKEN``). Windowed
histories (``vlm_envs_history: window:K``) return one Sample per turn, rewarded as
``vlm_envs_turn_reward`` (``episode``, ``return``, ``step``), ``vlm_envs_gamma`` (in [0, 1]) and
``vlm_envs_shaping`` (``none``, or ``distance``: potential-based shaping, :mod:`vlm_envs.credit.shaping`)
say; GiGPO's advantages over them: :mod:`vlm_envs.rollout.slime.gigpo`.

slime's own multi-turn envs run unchanged (``rollout_interaction_env_path`` may name a module or a
``.py`` file, as for slime's example rollout). When the env's first observation is empty, the
prompt is the sample's own (``sample.prompt`` and ``sample.multimodal_inputs["images"]``), encoded
as slime's processor call encodes it; an env without an episode reward leaves ``sample.reward``
unset for slime's ``--custom-rm-path`` / ``--rm-type``. ``metadata["vlm_envs"]`` says which
(``prompt_source``, ``reward_source``).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import math
import uuid
from collections.abc import Callable
from typing import Any

from vlm_envs.credit.shaping import PotentialShaping
from vlm_envs.protocol import DEFAULT_MAX_TURNS
from vlm_envs.rollout import contract
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.http import DEFAULT_READ_TIMEOUT_S, DEFAULT_TURN_TIMEOUT_S
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.episode import EpisodeConfig
from vlm_envs.rollout.executors.config import ExecutorConfig
from vlm_envs.rollout.executors.in_process import EpisodeExecutor
from vlm_envs.rollout.executors.worker_process import EpisodeJob
from vlm_envs.rollout.history import History, TurnReward, check_shaping, check_turn_reward
from vlm_envs.rollout.offload import rollout_executor
from vlm_envs.rollout.record import RECORD_KEY, episode_record, turn_record
from vlm_envs.rollout.rows import RowSpec, allowed_envs, check_row_config, check_row_env, turn_cap
from vlm_envs.rollout.slime.sample import fail_sample, fill_sample, resume_request, sample_prompt
from vlm_envs.rollout.trajectory import Status, Trajectory
from vlm_envs.rollout.turns import TurnSample, make_train_inputs

METADATA_KEY = RECORD_KEY
HOW_TO_NAME_AN_ENV = (
    "no env for this sample: give dataset rows metadata['env'] (e.g. 'sokoban'), or put "
    "'rollout_interaction_env_path: vlm_envs.envs.sokoban' in the YAML passed to --custom-config-path "
    "(slime ignores it as a command-line flag)"
)


@dataclasses.dataclass(frozen=True)
class EngineSettings:
    """How the hook's :class:`SGLangEngine` bounds one turn (see there)."""

    read_timeout: float = DEFAULT_READ_TIMEOUT_S
    turn_timeout: float = DEFAULT_TURN_TIMEOUT_S
    max_body_bytes: int | None = None

    @classmethod
    def from_args(cls, args: Any) -> EngineSettings:
        """``vlm_envs_read_timeout``, ``vlm_envs_turn_timeout``, ``vlm_envs_max_body_bytes`` (YAML)."""
        body = getattr(args, "vlm_envs_max_body_bytes", None)
        if body is not None and (type(body) is not int or body < 1):
            raise ValueError(f"vlm_envs_max_body_bytes must be a positive integer, got {body!r}")
        return cls(
            read_timeout=_seconds(args, "vlm_envs_read_timeout", DEFAULT_READ_TIMEOUT_S),
            turn_timeout=_seconds(args, "vlm_envs_turn_timeout", DEFAULT_TURN_TIMEOUT_S),
            max_body_bytes=body,
        )

    def make_engine(self, url: str) -> functools.partial[SGLangEngine]:
        """A picklable factory of the engine at ``url`` with these settings."""
        return functools.partial(SGLangEngine, url, **dataclasses.asdict(self))


def _seconds(args: Any, name: str, default: float) -> float:
    value = getattr(args, name, None)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class HookConfig:
    """What one sample's rollout needs, resolved from slime's args and the sample."""

    env: str
    seed: int | None
    episode: EpisodeConfig
    set_reward: bool
    url: str
    #: What the sample's row names (whether the env is built from the sample or the row's config).
    row: RowSpec = dataclasses.field(default_factory=RowSpec)
    #: Where episodes play: worker processes (``vlm_envs_workers``), Ray actors
    #: (``vlm_envs_ray_actors``), or neither: on slime's loop.
    executor: ExecutorConfig = dataclasses.field(default_factory=ExecutorConfig)
    engine: EngineSettings = EngineSettings()
    #: Windowed histories return one Sample per turn, rewarded as ``vlm_envs_turn_reward`` says,
    #: shaped where ``vlm_envs_shaping`` says.
    turn_reward: TurnReward = "episode"
    gamma: float = 1.0
    shaping: PotentialShaping | None = None


def resolve_config(args: Any, sample: Any, sampling_params: dict[str, Any]) -> HookConfig:
    """Read the env, turn cap and budgets once, from the sample first and then slime's args."""
    row = RowSpec.of(getattr(sample, "metadata", None))
    path = getattr(args, "rollout_interaction_env_path", None)  # the user's own YAML: trusted
    allowed = allowed_envs(getattr(args, "vlm_envs_allowed_envs", None), "vlm_envs_allowed_envs")
    if path:
        allowed |= {str(path)}
    env = check_row_env(row.env, allowed) if row.env else path
    if not env:
        raise ValueError(HOW_TO_NAME_AN_ENV)
    check_row_config(env, row.env_config)  # rows choose episodes, not files
    yaml_turns = turn_cap(getattr(args, "max_turns", None), "max_turns in the --custom-config-path YAML")
    max_turns = row.max_turns if row.max_turns is not None else yaml_turns
    max_new = sampling_params.get("max_new_tokens") or getattr(args, "rollout_max_response_len", None)
    seed = row.seed if row.generated else getattr(sample, "group_index", None)
    episode = EpisodeConfig(
        max_turns=max_turns or DEFAULT_MAX_TURNS,
        max_context_tokens=getattr(args, "rollout_max_context_len", None),
        max_response_tokens=max_new,
        max_new_tokens=max_new or EpisodeConfig.max_new_tokens,
        engine_placeholders=bool(getattr(args, "vlm_envs_engine_placeholders", False)),
        check_template=bool(getattr(args, "vlm_envs_check_template", False)),
        history=History.parse(getattr(args, "vlm_envs_history", None)),
    )
    turn_reward, gamma = check_turn_reward(
        getattr(args, "vlm_envs_turn_reward", None), getattr(args, "vlm_envs_gamma", None)
    )
    shaping = check_shaping(getattr(args, "vlm_envs_shaping", None), episode.history, episode.max_turns)
    host, port = getattr(args, "sglang_router_ip", "127.0.0.1"), getattr(args, "sglang_router_port", 30000)
    url = f"http://{host}:{port}"
    set_reward = bool(getattr(args, "vlm_envs_set_reward", True))
    return HookConfig(
        env=str(env),
        seed=seed,
        episode=episode,
        set_reward=set_reward,
        url=url,
        row=row,
        executor=ExecutorConfig.from_args(args),
        engine=EngineSettings.from_args(args),
        turn_reward=turn_reward,
        gamma=gamma,
        shaping=shaping,
    )


class _Runtime:
    """Per-process state: slime's GenerateState (tokenizer, processor, abort flag), codecs, engines,
    executors."""

    def __init__(self) -> None:
        self.codecs: dict[int, ChatCodec] = {}
        self.engines: dict[tuple[str, EngineSettings], SGLangEngine] = {}
        self.executors: dict[tuple[ExecutorConfig, str, EngineSettings, int, int], EpisodeExecutor] = {}
        self.abort_flags: dict[int, Callable[[], bool]] = {}

    def generate_state(self, args: Any) -> Any:
        try:
            from slime.rollout.sglang_rollout import GenerateState
        except ImportError:
            return None
        return GenerateState(args)

    def codec(self, args: Any, state: Any) -> ChatCodec:
        if state is not None:
            processor = getattr(state, "processor", None) or state.tokenizer
        else:  # slime is not importable: load what its GenerateState would
            from transformers import AutoProcessor

            processor = AutoProcessor.from_pretrained(args.hf_checkpoint, trust_remote_code=True)
        if id(processor) not in self.codecs:
            self.codecs[id(processor)] = ChatCodec(processor)
        return self.codecs[id(processor)]

    def engine(self, url: str, settings: EngineSettings) -> SGLangEngine:
        if (url, settings) not in self.engines:
            self.engines[url, settings] = settings.make_engine(url)()
        return self.engines[url, settings]

    def executor(self, args: Any, codec: ChatCodec, config: HookConfig) -> EpisodeExecutor:
        """One executor per config, URL, engine settings, codec and args (slime's are one object for
        the process's life; its env factories read them)."""
        key = (config.executor, config.url, config.engine, id(codec), id(args))
        if key not in self.executors:
            # out of process: a picklable factory; in process: this process's pooled engine
            make_engine = (
                functools.partial(self.engine, config.url, config.engine)
                if config.executor.in_process
                else config.engine.make_engine(config.url)
            )
            self.executors[key] = config.executor.build(codec, make_engine, args=args)
        return self.executors[key]

    def abort_flag(self, state: Any) -> Callable[[], bool] | None:
        """One flag per GenerateState, so a pool polls it once per tick for all samples."""
        if state is None:
            return None
        if id(state) not in self.abort_flags:
            self.abort_flags[id(state)] = lambda: bool(getattr(state, "aborted", False))
        return self.abort_flags[id(state)]


_runtime = _Runtime()


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any], evaluation: bool = False) -> Any:
    """Roll out one episode of the sample's env and fill the Sample; never raises into the trainer. An
    ABORTED sample handed back (slime's ``--partial-rollout``) goes on from its last finished turn."""
    record: dict[str, Any] = {"evaluation": evaluation}
    sample.metadata = sample.metadata if isinstance(sample.metadata, dict) else {}
    previous = sample.metadata.get(METADATA_KEY)
    sample.metadata[METADATA_KEY] = record
    try:
        config = resolve_config(args, sample, dict(sampling_params))
        record["env"] = config.env
        state = _runtime.generate_state(args)
        codec = _runtime.codec(args, state)
        executor = _runtime.executor(args, codec, config)
        resume = resume_request(sample, previous) if config.episode.history.full else None
    except Exception as err:  # a missing env, a bad config or an unloadable processor fails this sample only
        return fail_sample(sample, record, f"{type(err).__name__}: {err}")
    if getattr(sample.status, "name", None) == "ABORTED":
        sample.reward = None  # the abort's 0.0 was no score: the env's (or slime's RM) sets it
    env_sample, env_config = config.row.build_inputs(sample)
    job = EpisodeJob(
        env=config.env,
        env_config=env_config,
        sample=env_sample,
        seed=config.seed,
        config=config.episode,
        sampling_params=dict(sampling_params),
        fallback_prompt=sample_prompt(sample) if resume is None else None,
        resume=resume,
    )
    traj = await executor.run(job, should_abort=_runtime.abort_flag(state))  # tensors made off this loop
    kept = 0 if traj.kept is None else traj.kept.response_tokens
    try:
        record.update(episode_record(traj, trainer="slime"))
        if traj.status is Status.ABORTED:
            record.update(resume=traj.resume, resume_error=traj.resume_error)
        turns = (
            [] if traj.history.full else traj.turn_samples(config.turn_reward, config.gamma, config.shaping)
        )
        if turns:
            return await _fan_out(args, sample, traj, turns, codec, config)
        fill_sample(args, sample, traj, codec, traj.reward if config.set_reward else None, kept=kept)
        violations = contract.sample_violations(sample, codec.token_space, kept=kept)
        if violations:  # a bug of this library; the trainer still gets a valid, failed sample
            contract.report("sample", violations)
            return fail_sample(sample, record, f"contract: {violations[0]}", traj.prompt)
    except Exception as err:  # a Sample that refuses the data (slime's own checks) fails this sample only
        return fail_sample(sample, record, f"filling the sample: {type(err).__name__}: {err}", traj.prompt)
    return sample


async def _fan_out(
    args: Any, sample: Any, traj: Trajectory, turns: list[TurnSample], codec: ChatCodec, config: HookConfig
) -> list[Any]:
    """One Sample per turn of a windowed episode (slime trains on a returned list as it would on
    that many samples); each carries the turn, the episode id and the number of turns in metadata, and
    all share the episode's ``rollout_id`` (slime requires one on the samples of a returned list, to
    count the episode once in its loss: ``validate_rollout_id_annotated``): the sample's own, else its
    ``index``."""
    await asyncio.get_running_loop().run_in_executor(rollout_executor(), make_train_inputs, turns)
    record, episode_id = sample.metadata[METADATA_KEY], uuid.uuid4().hex
    rollout_id = getattr(sample, "rollout_id", None)
    out = []
    for turn in turns:
        one = copy.copy(sample)
        one.rollout_id = sample.index if rollout_id is None else rollout_id
        one_record = {**turn_record(record, turn), "episode_id": episode_id, "num_turns": len(turns)}
        one.metadata = {**sample.metadata, METADATA_KEY: {**one_record, "turn_reward": config.turn_reward}}
        fill_sample(args, one, traj, codec, turn.reward if config.set_reward else None, data=turn)
        violations = contract.sample_violations(one, codec.token_space)
        if violations:  # a bug of this library; the trainer still gets a valid, failed sample
            contract.report("sample", violations)
            return [fail_sample(sample, record, f"contract: turn {turn.turn}: {violations[0]}", traj.prompt)]
        out.append(one)
    return out


async def close() -> None:
    """Stop this process's executors (worker processes, Ray actors) and close its pooled HTTP
    sessions (call before its event loop ends)."""
    executors, _runtime.executors = _runtime.executors, {}
    for executor in executors.values():
        await asyncio.get_running_loop().run_in_executor(None, executor.close)
    for engine in _runtime.engines.values():
        await engine.close()


async def reward(args: Any, sample: Any, **kwargs: Any) -> float:
    """The env's episode reward that :func:`generate` recorded (0.0 if it recorded none)."""
    record = (getattr(sample, "metadata", None) or {}).get(METADATA_KEY) or {}
    return float(record.get("reward") or 0.0)
