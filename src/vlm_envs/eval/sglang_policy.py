"""The ``sglang:URL`` and ``vllm:URL`` policies: episodes through ``run_episode``, as in training.

:func:`~vlm_envs.rollout.episode.run_episode` is the loop the trainers use. Token ids go to SGLang's
``/generate`` or vLLM's ``/inference/v1/generate`` and come back as ids (never re-tokenized), with
the same codec, budgets and statuses the slime hook uses, so eval and training cannot drift.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp

from vlm_envs.eval.balance import LeastInFlight
from vlm_envs.eval.policies import Policy, PolicyError, PolicyOptions
from vlm_envs.eval.reachable import unreachable
from vlm_envs.eval.records import EpisodeResult, TurnResult
from vlm_envs.protocol import Env, Observation, StepInfo
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.contract import EngineOutput
from vlm_envs.rollout.engines.http import HttpEngine, check_limits
from vlm_envs.rollout.engines.image_uris import ImageInput
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.engines.vllm import VLLMEngine
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.history import History
from vlm_envs.rollout.processors import ProcessorLoadError, has_image_processor, load_processor


class _RecordingEnv(Env):
    """Passes every call to ``env`` and keeps the first observation and reset info."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.first: Observation | None = None
        self.info: dict[str, Any] = {}

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.first, self.info = self.env.reset(seed)
        return self.first, self.info

    async def areset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.first, self.info = await self.env.areset(seed)
        return self.first, self.info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        return self.env.step(response_text)

    async def astep(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        return await self.env.astep(response_text)

    def episode_reward(self) -> float:
        return self.env.episode_reward()

    def system_prompt(self) -> str | None:
        return self.env.system_prompt()

    def format_observation(self, obs: Observation) -> dict[str, Any]:
        return self.env.format_observation(obs)


class BalancedEngine:
    """One engine per URL; each request goes to the one with the fewest in flight."""

    def __init__(self, kind: str, engines: LeastInFlight[HttpEngine]) -> None:
        self.engines = engines
        self.name = f"{kind} " + " | ".join(engines.urls)

    async def generate(
        self, input_ids: Sequence[int], images: Sequence[ImageInput], sampling_params: Mapping[str, Any]
    ) -> EngineOutput:
        with self.engines.lend() as engine:
            return await engine.generate(input_ids, images, sampling_params)

    async def close(self) -> None:
        for engine in self.engines.clients:
            await engine.close()


class SGLangPolicy(Policy):
    """A model behind SGLang's native ``/generate``, encoded with the processor at ``--tokenizer``.

    ``url`` is one server or several (repeated ``--base-url``): requests are balanced over them by
    requests in flight (see :class:`~vlm_envs.eval.balance.LeastInFlight`).
    """

    kind = "sglang"

    def __init__(self, url: str | Sequence[str], options: PolicyOptions) -> None:
        if options.tokenizer is None:
            raise PolicyError(
                f"policy '{self.kind}:...' needs --tokenizer PATH (the served model's processor)"
            )
        self.urls = tuple(u.rstrip("/") for u in ([url] if isinstance(url, str) else url))
        self.name = f"{self.kind}:" + ",".join(self.urls)
        self.options = options
        self.limits = {
            "read_timeout": options.read_timeout,
            "turn_timeout": options.turn_timeout,
            "max_retries": options.max_retries,
        }
        try:
            check_limits(options.read_timeout, options.turn_timeout)
        except ValueError as err:
            raise PolicyError(f"{err} (set by --read-timeout / --turn-timeout)") from err
        try:
            self.history = History.parse(options.history)
        except ValueError as err:
            raise PolicyError(f"--history: {err}") from err
        self.engine: HttpEngine | BalancedEngine | None = None
        self.codec: ChatCodec | None = None
        self.sampling = {"temperature": options.temperature, "max_new_tokens": options.max_tokens}
        #: The env whose first observation shows images (set by :meth:`check_env`), else ``None``.
        self.shows_images: str | None = None

    def _engine(self, url: str, codec: ChatCodec) -> HttpEngine:
        """The client of one server."""
        return SGLangEngine(url, **self.limits)

    def check_env(self, env: Env) -> None:
        """Note whether the env's first observation shows images (:meth:`start` then needs a processor
        that encodes them: a plain tokenizer failed every episode)."""
        obs, _ = env.reset(seed=0)
        if obs.images:
            self.shows_images = env.spec.name if env.spec is not None else type(env).__name__

    async def start(self) -> None:
        tok = self.options.tokenizer
        try:
            processor = await asyncio.to_thread(load_processor, tok) if isinstance(tok, str) else tok
        except ProcessorLoadError as err:
            raise PolicyError(str(err)) from err
        if self.shows_images is not None and not has_image_processor(processor):
            named = repr(tok) if isinstance(tok, str) else f"({type(tok).__name__})"
            raise PolicyError(
                f"--tokenizer {named} holds no image processor (a tokenizer alone; a processor folder has "
                f"preprocessor_config.json) and env {self.shows_images!r} shows images: pass the served "
                "model's processor folder"
            )
        self.codec = ChatCodec(processor)
        engines = [self._engine(u, self.codec) for u in self.urls]
        self.engine = (
            engines[0] if len(engines) == 1 else BalancedEngine(self.kind, LeastInFlight(self.urls, engines))
        )
        async with aiohttp.ClientSession() as session:
            for url in self.urls:  # every server must answer before the run starts
                why = await unreachable(session, url + "/health")
                if why is not None:
                    raise PolicyError(f"cannot reach {url}: {why}")

    async def close(self) -> None:
        if self.engine is not None:
            await self.engine.close()

    async def play(self, env: Env, seed: int, max_turns: int) -> EpisodeResult:
        if self.codec is None or self.engine is None:
            raise RuntimeError("call start() first")
        recorder = _RecordingEnv(env)
        config = EpisodeConfig(
            max_turns=max_turns, max_new_tokens=self.options.max_tokens, history=self.history
        )
        traj = await run_episode(
            recorder, self.engine, self.codec, seed=seed, config=config, sampling_params=self.sampling
        )
        turns = [TurnResult(recorder.first)]
        for turn in traj.turns:
            turns.append(
                TurnResult(
                    turn.observation,
                    turn.model_text,
                    turn.reward,
                    turn.done,
                    dict(turn.metrics),
                    dict(turn.info),
                    turn.generated_tokens,
                    turn.finish_reason,
                    turn.context_turns,
                    turn.state_key,
                    turn.distance_to_goal,
                    turn.next_distance_to_goal,
                )
            )
        return EpisodeResult(
            seed=seed,
            status=traj.status.value,
            reward=traj.reward,
            turns=turns,
            error=traj.error,
            reset_info=dict(recorder.info),
            tokens=len(traj.tokens),
            generated_tokens=sum(t.generated_tokens for t in traj.turns),
        )


class VLLMPolicy(SGLangPolicy):
    """A model behind vLLM's token-in/token-out ``/inference/v1/generate`` (``vllm serve`` with
    ``--enable-scale-out``); otherwise as :class:`SGLangPolicy`."""

    kind = "vllm"

    def _engine(self, url: str, codec: ChatCodec) -> HttpEngine:
        return VLLMEngine(url, image_token_id=codec.image_token_id, **self.limits)
