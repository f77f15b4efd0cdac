"""The rollout function of TRL's ``GRPOTrainer``: every prompt entry plays its env's episode.

``rollout_func(prompts, trainer) -> dict`` gets the batch's prompts, each already repeated
``num_generations`` times (a GRPO group plays one seed), and nothing else of the dataset. Each
prompt names its episode through the carrier on one of its messages
(:mod:`vlm_envs.episode_carrier`). Episodes are played by
:func:`~vlm_envs.rollout.episode.run_episode`, the core the slime and verl hooks use, with the
trainer's own model (``use_vllm=False``) or TRL's vLLM client (``use_vllm=True, vllm_mode="server"``)
as the engine. TRL gets, per entry: ``prompt_ids``, ``completion_ids`` (every generated and
observation token after the prompt), the engine's ``logprobs``, ``env_mask`` (1 on generated
tokens, 0 on observation tokens: TRL's loss mask) and, for the reward functions, the episode's
record under ``vlm_envs``.

Budgets: ``GRPOConfig.max_completion_length`` caps the completion (generated and observation
tokens; TRL does not apply it to a rollout function's output), ``max_new_tokens`` in
``GRPOConfig.generation_kwargs`` (``max_tokens`` for vLLM) one turn's generation, and the carrier's
``max_turns`` (else the env config's, else 8) the turns. A ``window:K`` history (one sample per
turn) cannot be one completion per prompt: it is refused. A failed episode becomes a valid entry of
one masked token, its record saying why; nothing about an episode raises into the trainer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import logging
import types
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import torch

from vlm_envs import episode_carrier
from vlm_envs.envs.config import check_config_values
from vlm_envs.episode_carrier import EpisodeSpec
from vlm_envs.protocol import DEFAULT_MAX_TURNS
from vlm_envs.registry import build_env, get_spec
from vlm_envs.rollout import contract
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.contract import Engine
from vlm_envs.rollout.engines.http import DEFAULT_READ_TIMEOUT_S, DEFAULT_TURN_TIMEOUT_S, check_limits
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.history import History
from vlm_envs.rollout.prompt import FallbackPrompt
from vlm_envs.rollout.record import RECORD_KEY, episode_record
from vlm_envs.rollout.rows import check_row_config, check_row_env
from vlm_envs.rollout.trajectory import Status, Trajectory
from vlm_envs.rollout.trl.engines import VLLMSampling, VLLMServerEngine
from vlm_envs.rollout.trl.policy import PolicyEngine

logger = logging.getLogger(__name__)
T = TypeVar("T")
WINDOWED = (
    "history {history!r}: a windowed history makes one training sample per turn, and TRL's rollout "
    "function returns one completion per prompt; use the full history with TRL (or train windowed "
    "histories with slime or verl)"
)


def ids_digest(prompt_ids: Sequence[int], completion_ids: Sequence[int]) -> str:
    """A key of one entry's tokens (prompt, then completion)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(np.asarray(prompt_ids, dtype=np.int64).tobytes())
    h.update(b"|")
    h.update(np.asarray(completion_ids, dtype=np.int64).tobytes())
    return h.hexdigest()


@dataclasses.dataclass(frozen=True)
class EpisodeRow:
    """One prompt entry's episode as TRL takes it, with the images its tokens hold."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    env_mask: list[int]
    record: dict[str, Any]
    #: ``pixel_values`` and ``image_grid_thw`` of every image in the entry, in token order; ``{}``: none.
    vision: dict[str, torch.Tensor]
    digest: str

    @property
    def num_images(self) -> int:
        grid = self.vision.get("image_grid_thw")
        return 0 if grid is None else int(grid.shape[0])


@runtime_checkable
class TakesEpisodeImages(Protocol):
    """A trainer that feeds each entry's images to its forward passes (``VlmEnvsGRPOTrainer``)."""

    def take_episode_images(self, rows: Sequence[EpisodeRow]) -> None: ...


class StockTrainerError(RuntimeError):
    """Episodes with images were played for a trainer that would drop them from its loss."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one prompt entry plays, resolved before any episode starts."""

    spec: EpisodeSpec
    episode: EpisodeConfig
    fallback: FallbackPrompt | None


def turn_tokens(args: Any) -> int | None:
    """The cap on one turn's generated tokens: ``GRPOConfig.generation_kwargs``' ``max_new_tokens``
    (transformers) or ``max_tokens`` (vLLM), else ``max_completion_length``."""
    extra = args.generation_kwargs or {}
    for key in ("max_new_tokens", "max_tokens"):
        if extra.get(key) is not None:
            return int(extra[key])
    return args.max_completion_length


def plan_episode(prompt: Any, max_completion_length: int | None, max_new_tokens: int | None = None) -> Plan:
    """Read the entry's episode from its carrier; ``ValueError`` for a prompt that names none or a
    windowed history. ``max_completion_length`` caps the episode's completion (generated and
    observation tokens), ``max_new_tokens`` one turn's generation (default: the same)."""
    spec = episode_carrier.find(prompt)
    if spec is None:
        raise ValueError(f"a prompt names no episode: {episode_carrier.HOW_TO_CARRY}")
    history = History.parse(spec.history)
    if not history.full:
        raise ValueError(WINDOWED.format(history=str(history)))
    env_turns = spec.env_config.get("max_turns")
    max_turns = spec.max_turns or (
        env_turns if type(env_turns) is int and env_turns > 0 else DEFAULT_MAX_TURNS
    )
    episode = EpisodeConfig(
        max_turns=max_turns,
        max_response_tokens=max_completion_length,
        max_new_tokens=max_new_tokens or max_completion_length or EpisodeConfig.max_new_tokens,
        engine_images="pil",  # both engines take PIL images in process
    )
    messages = episode_carrier.strip(prompt)
    return Plan(spec, episode, FallbackPrompt(messages=tuple(messages)) if messages else None)


def prompt_problem(prompt: Any) -> str | None:
    """Why the episode ``prompt`` carries cannot play (``None`` if it can): no carrier or a
    malformed one, a windowed history, an env a row may not name, a config key naming a file, or a
    config value the env's config refuses (validated without building the env)."""
    try:
        spec = plan_episode(prompt, None).spec
        check_row_config(check_row_env(spec.env), spec.env_config)
        check_config_values(get_spec(spec.env).load(), spec.env_config)
    except (ValueError, ImportError) as err:  # RowError is a ValueError; ImportError: an env's module
        return f"{type(err).__name__}: {err}"
    return None


def episode_row(traj: Trajectory, codec: ChatCodec, record: dict[str, Any]) -> EpisodeRow:
    """The trajectory as TRL's entry; a failed or rule-breaking one as one masked token.

    TRL needs at least one prompt and one completion token per entry (it reads the last
    completion token to tell truncated completions). The filler is the end-of-turn token.
    """
    filler = codec.end_of_turn_id
    prompt, completion = traj.prompt_ids or [filler], traj.response_ids
    mask, logprobs = traj.loss_mask, traj.log_probs
    if not completion:
        completion, mask, logprobs = [filler], [0], [0.0]
    vision = traj.train_inputs()
    grid = vision.get("image_grid_thw")
    pixels = vision.get("pixel_values")
    violations = contract.token_violations(
        prompt,
        completion,
        mask,
        logprobs,
        grid.tolist() if grid is not None else [],
        None if pixels is None else int(pixels.shape[0]),
        codec.token_space,
    )
    if violations:  # a bug of this library; TRL still gets a valid, failed entry
        contract.report("trl entry", violations)
        record.update(status=Status.FAILED.value, error=f"contract: {violations[0]}", reward=None)
        prompt, completion, mask, logprobs, vision = [filler], [filler], [0], [0.0], {}
    return EpisodeRow(prompt, completion, logprobs, mask, record, vision, ids_digest(prompt, completion))


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to the end from synchronous code, also where a loop already runs (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="vlm-envs-trl-loop") as pool:
        return pool.submit(asyncio.run, coro).result()


class VlmEnvsRollout:
    """``rollout_func`` for ``GRPOTrainer`` (:data:`rollout_func` is the shared instance).

    ``read_timeout`` and ``turn_timeout`` (seconds) are the deadlines of each turn sent to a vLLM
    server (:class:`~vlm_envs.rollout.trl.engines.VLLMServerEngine`); pass
    ``rollout_func=VlmEnvsRollout(turn_timeout=...)`` to the trainer to change them.
    """

    def __init__(
        self, read_timeout: float = DEFAULT_READ_TIMEOUT_S, turn_timeout: float = DEFAULT_TURN_TIMEOUT_S
    ) -> None:
        check_limits(read_timeout, turn_timeout)
        self.read_timeout, self.turn_timeout = read_timeout, turn_timeout
        self._codecs: dict[int, ChatCodec] = {}
        self._model_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="vlm-envs-trl-model")

    def codec(self, processing_class: Any) -> ChatCodec:
        """One codec per processor (building one is not free)."""
        if id(processing_class) not in self._codecs:
            self._codecs[id(processing_class)] = ChatCodec(processing_class)
        return self._codecs[id(processing_class)]

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        codec = self.codec(trainer.processing_class)
        args = trainer.args
        plans = [plan_episode(prompt, args.max_completion_length, turn_tokens(args)) for prompt in prompts]
        with self.engine(trainer, codec) as engine:
            rows = run_sync(self._play(plans, engine, codec))
        failed = [row.record for row in rows if row.record.get("status") == Status.FAILED.value]
        if failed:
            logger.warning(
                "%d of %d episodes failed; first: %s", len(failed), len(rows), failed[0].get("error")
            )
        if isinstance(trainer, TakesEpisodeImages):
            trainer.take_episode_images(rows)
        elif any(row.num_images for row in rows):
            raise StockTrainerError(
                f"{type(trainer).__name__} re-renders the dataset prompt for its loss and drops the "
                "episodes' images (TRL sets images=None on the rollout_func path): train with "
                "vlm_envs.rollout.trl.VlmEnvsGRPOTrainer, which feeds every image of each episode to the loss"
            )
        return {
            "prompt_ids": [row.prompt_ids for row in rows],
            "completion_ids": [row.completion_ids for row in rows],
            "logprobs": [row.logprobs for row in rows],
            "env_mask": [row.env_mask for row in rows],
            RECORD_KEY: [row.record for row in rows],
        }

    @contextlib.contextmanager
    def engine(self, trainer: Any, codec: ChatCodec) -> Iterator[Engine]:
        """The trainer's engine for one rollout: TRL's vLLM client, or its model unwrapped for generation."""
        if trainer.use_vllm:
            generation = trainer.vllm_generation
            engine = VLLMServerEngine(
                generation.vllm_client,
                VLLMSampling.of(generation),
                codec.image_token_id,
                read_timeout=self.read_timeout,
                turn_timeout=self.turn_timeout,
            )
            try:
                yield engine
            finally:
                engine.close()
            return
        from trl.models import unwrap_model_for_generation

        args = trainer.args
        with (
            unwrap_model_for_generation(
                trainer.model_wrapped,
                trainer.accelerator,
                gather_deepspeed3_params=args.ds3_gather_for_generation,
                generation_kwargs=trainer.generation_kwargs,
                gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs,
            ) as model,
            trainer._dist.summon_full_params(trainer.model_wrapped, recurse=False),
        ):
            yield PolicyEngine(model, codec, trainer.generation_config, self._model_thread)

    async def _play(self, plans: list[Plan], engine: Engine, codec: ChatCodec) -> list[EpisodeRow]:
        return list(await asyncio.gather(*(self._play_one(plan, engine, codec) for plan in plans)))

    async def _play_one(self, plan: Plan, engine: Engine, codec: ChatCodec) -> EpisodeRow:
        spec = plan.spec
        record: dict[str, Any] = {"env": spec.env, "seed": spec.seed}
        # the policy batches the turns of the episodes in play: this one counts until its last turn
        with engine.playing() if isinstance(engine, PolicyEngine) else contextlib.nullcontext():
            traj = await self._trajectory(plan, engine, codec)
        record.update(episode_record(traj, trainer="trl"))
        await asyncio.to_thread(traj.train_inputs)  # tensors made off the loop
        return episode_row(traj, codec, record)

    async def _trajectory(self, plan: Plan, engine: Engine, codec: ChatCodec) -> Trajectory:
        spec = plan.spec
        try:  # from the carrier's config, as make-dataset built it (TRL passes no other column)
            args = types.SimpleNamespace(max_turns=plan.episode.max_turns)
            name = check_row_env(spec.env)  # a registered env only: a row never chooses code to run
            check_row_config(name, spec.env_config)  # rows choose episodes, not files
            env = await asyncio.to_thread(lambda: build_env(name, args=args, **spec.env_config))
        except Exception as err:  # an env that will not build fails this entry only
            return Trajectory.failed(f"building the env: {type(err).__name__}: {err}")
        try:
            return await run_episode(
                env, engine, codec, seed=spec.seed, config=plan.episode, fallback_prompt=plan.fallback
            )
        finally:
            with contextlib.suppress(Exception):  # an env that fails to close must not take the entry down
                env.close()


#: The rollout function ``GRPOTrainer(rollout_func=...)`` takes; ``VlmEnvsGRPOTrainer`` uses it by default.
rollout_func = VlmEnvsRollout()
