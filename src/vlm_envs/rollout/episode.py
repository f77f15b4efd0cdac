"""The engine-agnostic multi-turn episode loop: any :class:`~vlm_envs.protocol.Env` to training data.

:func:`run_episode` alternates engine generations and env steps. Generated tokens keep the engine's
own ids and log probs (never re-tokenized); each observation adds the exact token delta the chat
template puts after the assistant turn. Env steps, processor calls and image encoding run off the
event loop. Budgets are checked before anything is sent; an observation that does not fit is
dropped whole (tokens and images). Every engine reply is checked against the
:class:`~vlm_envs.rollout.engines.ReplyContract` before any of it is kept, and every step and episode
reward against :func:`~vlm_envs.rewards.check_reward` (a broken one ends the episode FAILED, saying
why). Errors end the episode with a status, never an exception.
"""

from __future__ import annotations

import array
import asyncio
import dataclasses
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from typing import Any, TypeVar

from vlm_envs.protocol import Env, Observation, StepInfo
from vlm_envs.rewards import RewardError, call_reward, check_reward
from vlm_envs.rollout import contract
from vlm_envs.rollout.codec import ChatCodec, CodecError, Encoded, ProcessedImage
from vlm_envs.rollout.engines.contract import (
    Engine,
    EngineContractError,
    EngineError,
    EngineOutput,
    PermanentEngineError,
    ReplyContract,
    engine_name,
)
from vlm_envs.rollout.engines.image_uris import ImageInput, image_data_uri
from vlm_envs.rollout.episode_config import EpisodeConfig
from vlm_envs.rollout.offload import InlineExecutor, rollout_executor
from vlm_envs.rollout.prompt import FallbackPrompt
from vlm_envs.rollout.resume import Rebuilt, ResumeError, ResumeRequest, rebuild, resume_state
from vlm_envs.rollout.trajectory import (
    Segment,
    Status,
    TemplateCheck,
    Trajectory,
    TurnRecord,
    check_against_template,
)
from vlm_envs.state_signals import Standing, standing_of

T = TypeVar("T")


@dataclasses.dataclass
class _Observed:
    """The env's answer to one response and, unless the episode ends, its encoding."""

    obs: Observation
    done: bool
    step: StepInfo
    env_s: float
    message: dict[str, Any] = dataclasses.field(default_factory=dict)
    delta: Encoded | None = None
    follow: Encoded | None = None  # the observation after the task (window:0 contexts)
    uris: list[ImageInput] = dataclasses.field(default_factory=list)
    encode_s: float = 0.0
    standing: Standing = dataclasses.field(default_factory=Standing)  # where the episode stands after it


class _Stop(Exception):
    """Ends the loop with a status (internal control flow)."""

    def __init__(self, status: Status, error: str | None = None):
        self.status, self.error = status, error


class _Episode:
    """The mutable state of one running episode."""

    def __init__(
        self,
        env: Env,
        engine: Engine,
        codec: ChatCodec,
        config: EpisodeConfig,
        sampling: Mapping,
        executor: Executor,
    ) -> None:
        self.env, self.engine, self.codec, self.config = env, engine, codec, config
        self.executor = executor
        self.sampling = dict(sampling)
        self.sampling.setdefault("max_new_tokens", config.max_new_tokens)
        stop_ids = list(self.sampling.get("stop_token_ids") or [])
        self.sampling["stop_token_ids"] = stop_ids + [t for t in codec.stop_token_ids if t not in stop_ids]
        self.space = codec.token_space
        self.history = config.history
        self.engine_ids = array.array("q")  # grows every turn; an array is invisible to the collector
        self.image_uris: list[ImageInput] = []
        self.uri_by_key: dict[str, ImageInput] = {}  # windowed contexts pick their images' payloads here
        self.length = 0  # prompt + response tokens so far
        self.traj: Trajectory | None = None
        self.standing = Standing()  # where the episode stands before the next reply

    async def _off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        if isinstance(self.executor, InlineExecutor):
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self.executor, functools.partial(fn, *args))

    async def _env_reset(self, seed: int | None) -> tuple[Observation, dict[str, Any]]:
        if type(self.env).areset is not Env.areset:  # the env has its own async reset
            reset = await self.env.areset(seed=seed)
            self.standing = await self._off_loop(standing_of, self.env)
            return reset
        return await self._off_loop(self._reset, seed)

    def _reset(self, seed: int | None) -> tuple[Observation, dict[str, Any]]:
        reset = self.env.reset(seed)
        self.standing = standing_of(self.env)
        return reset

    def _budget(self, context: int | None = None) -> int:
        """How many more tokens the episode may hold; a windowed turn's sample holds its
        ``context`` and its reply only."""
        left = [1 << 62]
        if self.config.max_context_tokens is not None:
            left.append(self.config.max_context_tokens - (self.length if context is None else context))
        if self.config.max_response_tokens is not None:
            used = self.length - len(self.traj.prompt_ids) if context is None else 0
            left.append(self.config.max_response_tokens - used)
        return min(left)

    def _payloads(self, images: Sequence[ProcessedImage]) -> list[ImageInput]:
        """The engine's form of ``images`` (see ``EpisodeConfig.engine_images``)."""
        if self.config.engine_images == "pil":
            return [p.image for p in images]
        return [image_data_uri(p.image, p.key) for p in images]

    def _encode(self, fn: Callable[[], Encoded]) -> tuple[Encoded, list[ImageInput]]:
        """Run an encoding and make the engine payloads of its images (one hop off the loop)."""
        encoded = fn()
        return encoded, self._payloads(encoded.images)

    def _encode_fallback(
        self, fallback: FallbackPrompt
    ) -> tuple[Encoded, list[ImageInput], list[dict[str, Any]]]:
        encoded, messages = fallback.encode(self.codec)
        return encoded, self._payloads(encoded.images), messages

    def _rebuild(self, request: ResumeRequest) -> tuple[Rebuilt, list[ImageInput]]:
        rebuilt = rebuild(request, self.codec)
        return rebuilt, self._payloads(rebuilt.traj.images)

    def _add_images(self, images: Sequence[ProcessedImage], uris: list[ImageInput]) -> None:
        self.traj.images += images
        self.image_uris += uris
        if not self.history.full:
            self.uri_by_key.update((p.key, uri) for p, uri in zip(images, uris, strict=True))

    async def start(self, seed: int | None, fallback: FallbackPrompt | None = None) -> Trajectory:
        t0 = time.perf_counter()
        obs, info = await self._env_reset(seed)
        t1 = time.perf_counter()
        if fallback is not None and not obs.text.strip() and not obs.images:  # the prompt is the sample's
            source = "sample"
            prompt, uris, messages = await self._off_loop(self._encode_fallback, fallback)
        else:
            source = "env"
            system = self.env.system_prompt()
            messages = ([{"role": "system", "content": system}] if system else []) + [
                self.env.format_observation(obs)
            ]
            prompt, uris = await self._off_loop(self._encode, lambda: self.codec.encode_prompt(messages))
        self.traj = Trajectory(
            prompt=prompt,
            messages=messages,
            reset_info=dict(info),
            prompt_source=source,
            history=self.history,
        )
        if self.history.window == 0:
            self.traj.head = self.codec.head(prompt)
        self.traj.timings = {"reset_s": t1 - t0, "encode_prompt_s": time.perf_counter() - t1}
        self.engine_ids.extend(prompt.engine_ids if self.config.engine_placeholders else prompt.ids)
        self.length = len(prompt.ids)
        self._add_images(prompt.images, uris)
        return self.traj

    async def resume(self, request: ResumeRequest) -> Trajectory:
        """The trajectory as it stood at the abort ``request`` hands back, and the env restored to its
        last finished turn; no request is sent for the kept turns."""
        if not self.history.full:
            raise ResumeError(f"an episode resumes with the full history, not {self.history}")
        t0 = time.perf_counter()
        rebuilt, uris = await self._off_loop(self._rebuild, request)
        t1 = time.perf_counter()
        await self._off_loop(self._restore, rebuilt.snapshot)
        self.traj = rebuilt.traj
        self.traj.timings = {"rebuild_s": t1 - t0, "restore_s": time.perf_counter() - t1}
        self.engine_ids.extend(rebuilt.engine_ids if self.config.engine_placeholders else self.traj.tokens)
        self.length = len(self.traj.prompt_ids) + self.traj.response_length
        self.image_uris += uris
        return self.traj

    def _restore(self, snapshot: dict[str, Any]) -> None:
        self.env.restore(snapshot)
        self.standing = standing_of(self.env)

    def _cut(self, index: int) -> Segment | None:
        """The partial reply of turn ``index`` if a resumed episode was cut inside it, else ``None``."""
        last = self.traj.turns[-1] if self.traj.turns else None
        return last.reply if last is not None and last.index == index else None

    def _drop_cut(self, index: int) -> None:
        """Take the cut turn ``index`` back off the trajectory and the engine's view (its whole reply,
        or nothing, takes its place)."""
        reply = self.traj.take_cut(index)
        if reply is not None and reply.ids:
            self.length -= len(reply.ids)
            del self.engine_ids[len(self.engine_ids) - len(reply.ids) :]

    async def turn(self, index: int) -> bool:
        """One generation and env step; returns whether the episode goes on."""
        traj, codec = self.traj, self.codec
        cut = self._cut(index)  # kept until its continuation arrives: a failure leaves it as it was
        if self.history.full:
            context, engine_ids, uris = None, self.engine_ids, self.image_uris
        else:
            context = traj.context(index)
            engine_ids = context.engine_ids if self.config.engine_placeholders else context.ids
            uris = [self.uri_by_key[p.key] for p in context.images]
        budget = self._budget(None if context is None else len(context.ids))
        if budget + (0 if cut is None else len(cut.ids)) < 1:
            self._drop_cut(index)
            raise _Stop(Status.TRUNCATED, None)
        params = {**self.sampling, "max_new_tokens": min(self.sampling["max_new_tokens"], budget)}
        t0 = time.perf_counter()
        if cut is None:
            out, overflow = await self._generate(params, engine_ids, uris)
        else:
            out, overflow = await self._continue(index, cut, budget, uris)
        t1 = time.perf_counter()
        ids, log_probs = tuple(out.token_ids), tuple(out.log_probs)
        bad = next((i for i, t in enumerate(ids) if t in codec.special_image_ids), None)
        if bad is not None:
            ids, log_probs = ids[:bad], log_probs[:bad]
        ended_with_eos = bool(ids) and ids[-1] == codec.end_of_turn_id
        content_ids = ids[:-1] if ended_with_eos else ids
        try:  # checked ids, at most max_new_tokens of them: a fast Rust call that should not fail
            text = codec.decode(content_ids)
        except Exception as err:  # nothing of this reply is kept, so the trajectory stays consistent
            raise CodecError(f"decoding the generated ids: {type(err).__name__}: {err}") from err
        reply = Segment(ids, log_probs, trainable=True)
        self._append(reply, ids)
        record = TurnRecord(
            index, text, out.finish_reason, len(ids), timings={"generate_s": t1 - t0}, reply=reply
        )
        record.context_turns = None if context is None else context.turns
        record.state_key, record.distance_to_goal = self.standing.key, self.standing.distance
        traj.turns.append(record)
        traj.messages.append({"role": "assistant", "content": text, "token_ids": content_ids})
        if out.finish_reason == "abort":
            raise _Stop(Status.ABORTED, "the engine aborted the generation")
        if bad is not None:
            raise _Stop(Status.TRUNCATED, "the model generated an image special token; episode ended")
        if overflow is not None:
            raise _Stop(Status.TRUNCATED, overflow)

        last_turn = index + 1 >= self.config.max_turns
        if type(self.env).astep is Env.astep:  # step and encode in one hop off the loop
            seen = await self._off_loop(self._observe, text, not last_turn, ended_with_eos)
        else:  # the env steps its own async way (e.g. grading in worker processes)
            obs, done, step = await self.env.astep(text)
            seen = _Observed(obs, done, step, env_s=time.perf_counter() - t1)
            seen.standing = await self._off_loop(standing_of, self.env)
            if not (done or last_turn):
                await self._off_loop(self._encode_observation, seen, ended_with_eos)
        record.timings.update(env_s=seen.env_s, encode_s=seen.encode_s)
        record.reward, record.done, record.metrics, record.info = (
            seen.step.reward,
            seen.done,
            seen.step.metrics,
            seen.step.info,
        )
        record.observation = seen.obs
        record.truncated = seen.done and seen.step.truncated and not seen.step.terminated
        self.standing, record.next_distance_to_goal = seen.standing, seen.standing.distance
        try:
            check_reward(seen.step.reward, f"the step reward of turn {index}")
        except RewardError as err:  # the value is in the error; no record carries it to a trainer
            record.reward = self.config.failure_reward
            raise _Stop(Status.FAILED, f"reward: {err}") from None
        if seen.done:
            raise _Stop(Status.COMPLETED)
        if last_turn:
            raise _Stop(Status.TRUNCATED)
        delta = seen.delta
        if self.history.full and len(delta.ids) >= self._budget():  # the observation and one more token
            raise _Stop(Status.TRUNCATED)
        self._append(Segment(delta.ids, None, trainable=False), delta.engine_ids)
        self._add_images(delta.images, seen.uris)
        record.observation_tokens = len(delta.ids)
        record.delta, record.follow = delta, seen.follow
        traj.messages.append(seen.message)
        return True

    async def _generate(
        self, params: dict[str, Any], engine_ids: Sequence[int], uris: list[str]
    ) -> tuple[EngineOutput, str | None]:
        """The engine's reply, checked against the :class:`ReplyContract`.

        Any failure of the engine raises an :class:`EngineError`. A reply with more tokens than
        asked comes back cut to ``max_new_tokens``, with the error that ends the episode TRUNCATED.
        """
        name = engine_name(self.engine)
        try:
            out = await self.engine.generate(engine_ids, uris, params)
        except EngineError:
            raise
        except Exception as err:  # an engine that fails its own way has still failed, not the env
            raise PermanentEngineError(f"{name}: {type(err).__name__}: {err}") from err
        if not isinstance(out, EngineOutput):
            raise EngineContractError(name, "an EngineOutput", f"generate returned a {type(out).__name__}")
        rules = ReplyContract(self.space.vocab_size, params["max_new_tokens"], name)
        try:
            return rules.check(out), None
        except EngineContractError as err:
            if err.kept is None:
                raise
            return err.kept, _describe("engine", err)

    async def _continue(
        self, index: int, cut: Segment, budget: int, uris: list[str]
    ) -> tuple[EngineOutput, str | None]:
        """Turn ``index``'s whole reply: its partial tokens ``cut``, then what the engine generates after
        them, as many as the turn had left (none: the turn ended there, at its length). ``budget`` is
        what the episode may hold with ``cut`` in it."""
        left = min(self.sampling["max_new_tokens"] - len(cut.ids), budget)
        out, overflow = EngineOutput([], [], "length"), None
        if left > 0:
            new = {**self.sampling, "max_new_tokens": left}
            out, overflow = await self._generate(new, self.engine_ids, uris)
        self._drop_cut(index)
        ids, log_probs = [*cut.ids, *out.token_ids], [*(cut.log_probs or ()), *out.log_probs]
        return dataclasses.replace(out, token_ids=ids, log_probs=log_probs), overflow

    def _observe(self, text: str, encode: bool, ended_with_eos: bool) -> _Observed:
        """The env's answer to ``text`` and, if ``encode`` and the episode goes on, its token delta."""
        t0 = time.perf_counter()
        obs, done, step = self.env.step(text)
        seen = _Observed(obs, done, step, env_s=time.perf_counter() - t0, standing=standing_of(self.env))
        if encode and not done:
            self._encode_observation(seen, ended_with_eos)
        return seen

    def _encode_observation(self, seen: _Observed, ended_with_eos: bool) -> None:
        t0 = time.perf_counter()
        seen.message = self.env.format_observation(seen.obs)
        seen.delta, seen.uris = self._encode(
            lambda: self.codec.encode_observation(
                seen.message, seen.obs.images, ended_with_eos=ended_with_eos
            )
        )
        if self.history.window == 0:  # the same images, so the same payloads
            seen.follow = self.codec.encode_followup(seen.message, seen.obs.images)
        seen.encode_s = time.perf_counter() - t0

    def _append(self, segment: Segment, engine_ids: Sequence[int]) -> None:
        """Add response tokens to the trajectory and the engine's view of it."""
        if segment.ids:
            self.traj.segments.append(segment)
            self.length += len(segment.ids)
            if self.history.full:  # a windowed turn sends its own context (Trajectory.context)
                self.engine_ids.extend(engine_ids if self.config.engine_placeholders else segment.ids)


async def run_episode(
    env: Env,
    engine: Engine,
    codec: ChatCodec,
    *,
    seed: int | None = None,
    config: EpisodeConfig | None = None,
    sampling_params: Mapping[str, Any] | None = None,
    should_abort: Callable[[], bool] | None = None,
    executor: Executor | None = None,
    fallback_prompt: FallbackPrompt | None = None,
    resume: ResumeRequest | None = None,
) -> Trajectory:
    """Play one episode of ``env`` with ``engine``; never raises for env, engine or codec errors.

    ``sampling_params`` are SGLang's (copied, never changed); ``max_new_tokens`` is lowered to fit
    the budget and the codec's end-of-turn ids are added to ``stop_token_ids``. ``should_abort``
    is polled before each generation (slime's abort flag). CPU work runs on ``executor`` (default:
    :func:`~vlm_envs.rollout.offload.rollout_executor`; :data:`~vlm_envs.rollout.offload.INLINE`
    runs it on the loop's thread); an env that overrides ``areset``/``astep`` runs its own way.
    ``fallback_prompt`` is the prompt when the env's first observation is empty (no text, no
    images): slime-shaped envs leave the question to the dataset. ``resume`` continues an aborted
    episode from its last finished turn instead (:mod:`vlm_envs.rollout.resume`); an episode that ends
    ABORTED leaves its own resume state on the trajectory (full history only).
    """
    config = config or EpisodeConfig()
    executor = executor or rollout_executor()
    episode = _Episode(env, engine, codec, config, sampling_params or {}, executor)
    try:
        traj = await (episode.start(seed, fallback_prompt) if resume is None else episode.resume(resume))
    except Exception as err:  # an env's reset or restore, the engine or the codec may fail
        return Trajectory.failed(
            _describe("reset" if resume is None else "resume", err), config.failure_reward
        )
    status, error = Status.TRUNCATED, None
    try:
        for index in range(0 if traj.kept is None else traj.kept.turns, config.max_turns):
            if should_abort is not None and should_abort():
                raise _Stop(Status.ABORTED, "aborted by the trainer")
            await episode.turn(index)
    except _Stop as stop:
        status, error = stop.status, stop.error
    except EngineError as err:
        status, error = Status.FAILED, _describe("engine", err)
    except CodecError as err:
        status, error = Status.FAILED, _describe("codec", err)
    except Exception as err:  # an env's step may fail in any way; the trainer must not
        status, error = Status.FAILED, _describe("env", err)
    traj.reward = config.failure_reward
    if status not in (Status.FAILED, Status.ABORTED):
        try:
            traj.reward = call_reward(env.episode_reward, "the episode reward")
        except RewardError as err:  # never a number a trainer could mistake for a score
            status, error = Status.FAILED, f"reward: {err}"
    traj.status, traj.error = status, error
    # an env without an episode reward (a slime-shaped one) leaves the score to the trainer's reward model
    traj.reward_from_env = status in (Status.FAILED, Status.ABORTED) or env.has_episode_reward
    if config.check_template:
        try:
            traj.template_check = await episode._off_loop(check_against_template, traj, codec)
        except Exception as err:  # e.g. text the template cannot render; a check never crashes a trainer
            traj.template_check = TemplateCheck(ok=False, detail=_describe("template check", err))
        if not traj.template_check.ok and traj.status is not Status.FAILED:
            traj.status, traj.error = Status.FAILED, f"template check: {traj.template_check.detail}"
    contract.enforce(traj, episode.space)
    if traj.status is Status.ABORTED and traj.history.full:
        try:
            traj.resume = resume_state(traj, env.snapshot())
        except Exception as err:  # e.g. an env reset without a seed: a later call plays from the start
            traj.resume_error = _describe("snapshot", err)
    return traj


def _describe(where: str, err: BaseException) -> str:
    return f"{where}: {type(err).__name__}: {str(err)[:500]}"
