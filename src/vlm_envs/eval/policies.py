"""What a policy is (:class:`Policy`, :class:`TurnPolicy`, options, errors) and the scripted ones.

``oracle`` (``env.oracle_response()``) and ``random`` (``env.random_response``) need no model; the
model policies live in their own modules and :mod:`vlm_envs.eval.policy_kinds` picks one by name.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import hashlib
import random
from typing import Any

from vlm_envs.eval.records import EpisodeResult, TurnResult
from vlm_envs.protocol import Env, Observation
from vlm_envs.rewards import RewardError, call_reward, check_reward
from vlm_envs.state_signals import standing_of


class PolicyError(Exception):
    """A policy cannot be built, cannot reach its server, or cannot play this env."""


class ModelError(Exception):
    """The model behind a policy failed to answer (after any retries); it ends one episode."""


@dataclasses.dataclass(frozen=True)
class PolicyOptions:
    """Options of the model policies (ignored by scripted ones)."""

    model: str | None = None
    tokenizer: Any = None  # a path, or a processor/tokenizer object (Python use)
    api_key: str | None = None
    temperature: float = 0.0
    max_tokens: int = 1024
    tools: bool = False
    timeout: float = 300.0
    max_retries: int = 4
    read_timeout: float = 60.0  # sglang: seconds a reply may make no progress
    turn_timeout: float = 300.0  # sglang: seconds per turn, retries included
    history: str = "full"  # sglang: what the model sees of past turns ("full" or "window:K")
    base_urls: tuple[str, ...] = ()  # openai / sglang without ":URL": the servers to balance over


@dataclasses.dataclass(frozen=True)
class Reply:
    """A policy's reply to one observation."""

    text: str
    message: dict[str, Any] | None = None  # the assistant message to keep in the conversation
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None


@dataclasses.dataclass
class EpisodeState:
    """What a turn-by-turn policy sees: the env, the conversation so far and per-episode randomness."""

    env: Env
    seed: int
    turn: int
    max_turns: int
    messages: list[dict[str, Any]]
    observation: Observation
    rng: random.Random


def policy_rng(salt: str, seed: int) -> random.Random:
    """A generator for a policy's episode ``seed``, independent of the env's ``random.Random(seed)``.

    Seeding with ``seed`` itself would replay the env's own stream: on an env that draws its task
    from ``random.Random(seed)`` a random baseline would draw the answer. Hashing ``salt`` with the
    seed gives an unrelated stream that is still the same in every process.
    """
    digest = hashlib.sha256(f"{salt}\0{seed}".encode()).digest()
    return random.Random(int.from_bytes(digest, "big"))


class Policy(abc.ABC):
    """Plays whole episodes of an env."""

    #: The name written to ``run.json`` and the report.
    name: str = ""

    def check_env(self, env: Env) -> None:
        """Raise :class:`PolicyError` if this policy cannot play ``env``."""

    async def start(self) -> None:
        """Prepare (load a tokenizer, check the server answers); raise :class:`PolicyError` if not."""

    async def close(self) -> None:
        """Release connections."""

    @abc.abstractmethod
    async def play(self, env: Env, seed: int, max_turns: int) -> EpisodeResult:
        """One episode; failures of the env or the model end it as ``failed``, never raise."""


class TurnPolicy(Policy):
    """A policy that answers one observation at a time; :meth:`play` runs the env loop."""

    #: Mixed with the episode seed for ``EpisodeState.rng`` (see :func:`policy_rng`).
    rng_salt = "vlm-envs policy"

    @abc.abstractmethod
    async def reply(self, state: EpisodeState) -> Reply:
        """The response to ``state.observation``; raise :class:`ModelError` if the model fails."""

    async def play(self, env: Env, seed: int, max_turns: int) -> EpisodeResult:
        obs, info = await env.areset(seed=seed)
        standing = await asyncio.to_thread(standing_of, env)
        system = env.system_prompt()
        messages = ([{"role": "system", "content": system}] if system else []) + [env.format_observation(obs)]
        state = EpisodeState(env, seed, 0, max_turns, messages, obs, policy_rng(self.rng_salt, seed))
        turns = [TurnResult(obs)]
        status, error = "truncated", None
        last_prompt, generated = None, 0
        for k in range(max_turns):
            state.turn = k
            try:
                reply = await self.reply(state)
            except ModelError as err:
                status, error = "failed", f"policy: {err}"
                break
            try:
                obs, done, step = await env.astep(reply.text)
                before, standing = standing, await asyncio.to_thread(standing_of, env)
            except Exception as err:  # an env's bug (its step, its state signals) ends this episode only
                status, error = "failed", f"env: {type(err).__name__}: {err}"
                break
            try:  # the same check the rollout makes (vlm_envs.rewards): the record never holds the value
                step_reward = check_reward(step.reward, f"the step reward of turn {k}")
            except RewardError as err:
                step_reward, status, error = 0.0, "failed", f"reward: {err}"
            turns.append(
                TurnResult(
                    obs,
                    reply.text,
                    step_reward,
                    done,
                    dict(step.metrics),
                    dict(step.info),
                    reply.completion_tokens,
                    reply.finish_reason,
                    state_key=before.key,
                    distance_to_goal=before.distance,
                    next_distance_to_goal=standing.distance,
                )
            )
            if reply.prompt_tokens is not None and reply.completion_tokens is not None:
                last_prompt = reply.prompt_tokens + reply.completion_tokens
                generated += reply.completion_tokens
            messages.append(reply.message or {"role": "assistant", "content": reply.text})
            messages.append(env.format_observation(obs))
            state.observation = obs
            if status == "failed":
                break
            if done:
                status = "completed"
                break
        reward = 0.0
        if status != "failed":
            try:
                reward = call_reward(env.episode_reward, "the episode reward")
            except RewardError as err:  # the same check the rollout makes (vlm_envs.rewards)
                status, error = "failed", f"reward: {err}"
        return EpisodeResult(
            seed=seed,
            status=status,
            reward=reward,
            turns=turns,
            error=error,
            reset_info=dict(info),
            tokens=last_prompt,
            generated_tokens=generated if last_prompt is not None else None,
        )


class OraclePolicy(TurnPolicy):
    """The env's own optimal or reference player: ``env.oracle_response()`` every turn (Sokoban's
    optimal moves; Geo3k checks the true answer with the tool, then answers it).

    ``--policy oracle``; ``solver`` and ``reference`` are its old names.
    """

    name = "oracle"

    def check_env(self, env: Env) -> None:
        if type(env).oracle_response is Env.oracle_response:
            raise PolicyError(
                f"policy {self.name!r} needs an env with oracle_response() (such as sokoban or geo3k); "
                f"{type(env).__name__} has none"
            )

    async def reply(self, state: EpisodeState) -> Reply:
        text = await asyncio.to_thread(state.env.oracle_response)
        return Reply(text if text is not None else "I cannot find a solution.")


class RandomPolicy(TurnPolicy):
    """``env.random_response(rng)``, with a generator derived from (not equal to) the episode seed."""

    name = "random"
    rng_salt = "vlm-envs random policy"

    async def reply(self, state: EpisodeState) -> Reply:
        return Reply(state.env.random_response(state.rng))
