"""The verl agent loop: dataset rows with ``agent_name: vlm_envs`` play a registered env.

Importing this module registers :class:`VlmEnvsAgentLoop` under ``vlm_envs`` (verl's ``@register``);
verl's workers find it without importing anything through the YAML given as
``actor_rollout_ref.rollout.agent.agent_loop_config_path`` (``vlm-envs make-dataset --trainer verl``
writes it)::

    - name: vlm_envs
      _target_: vlm_envs.rollout.verl.VlmEnvsAgentLoop
      allowed_envs: [my_pkg.my_env]   # optional: module paths or files rows may name
      remote_url: [http://host-a:8000]  # optional: the vlm-envs serve servers of vlm_envs.remote rows

A row's ``extra_info`` names the episode as slime rows' ``metadata`` does (read by
:class:`~vlm_envs.rollout.rows.RowSpec`): ``env`` (a registered env, or a module path or file listed
in ``allowed_envs`` above: a row never chooses code to run), ``seed``, ``env_config`` and optionally
``max_turns`` (else ``env_config["max_turns"]``, else ``rollout.multi_turn.max_assistant_turns``,
else 8); ``history`` (``window:K``), ``turn_reward``, ``gamma`` (in [0, 1]) and ``shaping`` (``none``, or
``distance``: potential-based, :mod:`vlm_envs.credit.shaping`) for per-turn outputs.
A row with a ``seed`` builds its env from its env config alone; a row without one from the row
itself (:func:`task_sample`: ``raw_prompt`` and its images, the answer of ``reward_model``, so a user's own
geometry3k rows play their problems). The episode is played by
:func:`~vlm_envs.rollout.episode.run_episode`, the core the slime hook uses, with verl's server
manager as its engine (log probs are always asked for). Budgets: ``rollout.response_length`` caps
the response; a prompt longer than ``rollout.prompt_length`` fails the episode (image tokens cannot
be cut). The :class:`AgentLoopOutput` has 1 in ``response_mask`` exactly on generated tokens, their
log probs, every image in token order (the resized images the codec used, so verl's processor call
reproduces our ``pixel_values``; ``mm_processor_kwargs`` is ``{}`` for the same reason),
``reward_score`` (the env's episode reward; ``None`` lets verl's reward run for an env without
one), ``num_turns``, timings in ``metrics`` and ``extra_fields["vlm_envs"]``, the record the slime
hook writes, plus the episode's ``episode_id`` (shared by a windowed episode's outputs) and
``response_turns`` (``[turn, start, end]``: where each turn's reply lies in this output's response),
which :mod:`vlm_envs.rollout.verl_gigpo` reads. Nothing raises into verl: a failure returns a
self-consistent output whose ``extra_fields["vlm_envs"]["status"]`` says why. This module, and
``verl_gigpo`` / ``verl_trainer`` beside it, are the only ones that know verl.
"""

from __future__ import annotations

import contextlib
import dataclasses
import types
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from PIL import Image
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)

from vlm_envs.credit.shaping import PotentialShaping
from vlm_envs.protocol import DEFAULT_MAX_TURNS
from vlm_envs.registry import build_env
from vlm_envs.rollout import contract
from vlm_envs.rollout.codec import ChatCodec, Encoded
from vlm_envs.rollout.engines.contract import EngineOutput, FinishReason
from vlm_envs.rollout.engines.image_uris import ImageInput
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.history import History, TurnReward, check_shaping, check_turn_reward
from vlm_envs.rollout.prompt import FallbackPrompt
from vlm_envs.rollout.record import RECORD_KEY, episode_record, response_turns, turn_record
from vlm_envs.rollout.rows import RowError, RowSpec, allowed_envs, check_row_config, check_row_env, turn_cap
from vlm_envs.rollout.trajectory import Status, Trajectory
from vlm_envs.rollout.turns import TurnSample

#: The ``agent_name`` of our rows, and the loop's import path for verl's agent-loop YAML.
AGENT_NAME = "vlm_envs"
LOOP_TARGET = "vlm_envs.rollout.verl.VlmEnvsAgentLoop"
# verl's TokenOutput.stop_reason (verl/workers/rollout/vllm_rollout/vllm_async_server.py,
# sglang_rollout/async_sglang_server.py, llm_server.py, 0.9.1): "aborted" (vLLM) or "abort" (SGLang)
# for an aborted request; "completed" (vLLM: stop or length), SGLang's own "stop" / "length", or None.
_ABORTED = frozenset({"aborted", "abort"})
_FINISHED = frozenset({"completed", "stop", None})


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    """What one row's episode needs, resolved from verl's rollout config and the row."""

    env: str
    seed: int | None
    episode: EpisodeConfig
    #: What the row names (whether the env is built from the row or from its env config).
    row: RowSpec
    #: verl pads every prompt to ``rollout.prompt_length``; a longer one cannot go into the batch.
    prompt_length: int
    #: A windowed history makes one output per turn (verl's V1 trainer takes a list per row).
    turn_reward: TurnReward = "episode"
    gamma: float = 1.0
    shaping: PotentialShaping | None = None


def resolve_config(
    rollout: Any, extra_info: Mapping[str, Any], allowed: frozenset[str] = frozenset()
) -> LoopConfig:
    """Read the env, seed, turn cap and budgets once, from the row's ``extra_info`` and ``rollout``;
    ``allowed``: the module paths and files rows may name (``allowed_envs``)."""
    row = RowSpec.of(extra_info)
    if not row.env:
        raise ValueError(
            "no env for this row: give it extra_info['env'] (e.g. 'sokoban'); "
            "`vlm-envs make-dataset ENV --trainer verl` writes such rows"
        )
    env = check_row_env(row.env, allowed)
    check_row_config(env, row.env_config)  # rows choose episodes, not files
    multi_turn = rollout.get("multi_turn") or {}
    caps = (
        row.max_turns,
        turn_cap(row.env_config.get("max_turns"), "a row's env_config['max_turns']"),
        turn_cap(multi_turn.get("max_assistant_turns"), "rollout.multi_turn.max_assistant_turns"),
    )
    response_length = int(rollout.get("response_length"))
    episode = EpisodeConfig(
        max_turns=next((cap for cap in caps if cap is not None), DEFAULT_MAX_TURNS),
        max_response_tokens=response_length,
        max_new_tokens=response_length,
        engine_images="pil",  # verl hands images to vLLM / SGLang in process, as PIL images
        history=History.parse(extra_info.get("history")),
    )
    turn_reward, gamma = check_turn_reward(extra_info.get("turn_reward"), extra_info.get("gamma"))
    shaping = check_shaping(extra_info.get("shaping"), episode.history, episode.max_turns)
    return LoopConfig(
        env=env,
        seed=row.seed,
        episode=episode,
        row=row,
        prompt_length=int(rollout.get("prompt_length")),
        turn_reward=turn_reward,
        gamma=gamma,
        shaping=shaping,
    )


def task_sample(row: Mapping[str, Any], extra_info: Mapping[str, Any]) -> types.SimpleNamespace:
    """A row's own task as the sample its env is built from where the row names no seed: ``extra_info`` as
    its metadata, ``raw_prompt`` as its prompt, the images of ``raw_prompt``'s image parts (where verl's
    dataset puts a row's images) and ``reward_model["ground_truth"]``, else ``extra_info["answer"]``, as
    its label (verl's geometry3k rows). An image part that holds no image (a path, a URL) is a
    :class:`~vlm_envs.rollout.rows.RowError`: a row carries its images, never files to open."""
    prompt = row.get("raw_prompt")
    images = []
    for message in prompt if isinstance(prompt, list) else []:
        content = message.get("content") if isinstance(message, Mapping) else None
        for part in content if isinstance(content, list) else []:
            if isinstance(part, Mapping) and part.get("type") == "image":
                image = part.get("image")
                if not isinstance(image, Image.Image):
                    raise RowError(f"an image part of raw_prompt holds {type(image).__name__}, not an image")
                images.append(image)
    reward_model = row.get("reward_model")
    label = reward_model.get("ground_truth") if isinstance(reward_model, Mapping) else None
    label = extra_info.get("answer") if label is None else label
    return types.SimpleNamespace(metadata=dict(extra_info), prompt=prompt, images=images, label=label)


def finish_reason(stop_reason: Any, generated: int, max_new_tokens: int) -> FinishReason | str:
    """Our finish reason for verl's ``stop_reason`` (an unknown one passes, for the reply contract
    to name)."""
    if stop_reason in _ABORTED:
        return "abort"
    if stop_reason == "length" or (stop_reason in _FINISHED and generated >= max_new_tokens):
        return "length"
    if stop_reason in _FINISHED:
        return "stop"
    return str(stop_reason)


class VerlServerEngine:
    """verl's server manager (``LLMServerClient``) as an :class:`~vlm_envs.rollout.engines.Engine`.

    One per episode: every request carries the episode's ``request_id``, so verl keeps the episode on
    one server (its prefix cache). Replies are translated, not checked: the episode loop checks every
    engine's reply against the reply contract.
    """

    name = "verl server manager"

    def __init__(self, server_manager: Any, request_id: str) -> None:
        self.server_manager = server_manager
        self.request_id = request_id

    async def generate(
        self, input_ids: Sequence[int], images: Sequence[ImageInput], sampling_params: Mapping[str, Any]
    ) -> EngineOutput:
        params = {**sampling_params, "logprobs": True}  # a fresh dict: verl's servers pop keys from it
        out = await self.server_manager.generate(
            request_id=self.request_id,
            prompt_ids=list(input_ids),
            sampling_params=params,
            image_data=list(images) or None,
        )
        ids = list(out.token_ids)
        return EngineOutput(
            token_ids=ids,
            log_probs=list(out.log_probs) if out.log_probs is not None else [],
            finish_reason=finish_reason(out.stop_reason, len(ids), int(sampling_params["max_new_tokens"])),
        )


_codecs: dict[int, ChatCodec] = {}


def _codec(processor: Any) -> ChatCodec:
    """One codec per processor (verl gives each worker one processor; building a codec is not free)."""
    if id(processor) not in _codecs:
        _codecs[id(processor)] = ChatCodec(processor)
    return _codecs[id(processor)]


def row_prompt(raw_prompt: Any) -> FallbackPrompt | None:
    """The row's own prompt (``raw_prompt``: messages with image parts, as verl's dataset gives
    them), for an env whose first observation is empty."""
    messages = list(raw_prompt) if raw_prompt is not None else []
    return FallbackPrompt(messages=tuple(messages)) if messages else None


@register(AGENT_NAME)
class VlmEnvsAgentLoop(AgentLoopBase):
    """Plays one row's env episode against verl's server manager (verl makes one per row).

    ``AgentLoopBase.__init__`` is not called: it builds verl's own token builder, which this loop
    never uses (the codec encodes), and it may raise, which would fail verl's whole batch.
    ``allowed_envs`` comes from the loop's entry in the agent-loop YAML (verl passes an entry's keys
    to the loop); a bad value fails every row, saying why, rather than verl's batch. So do
    ``remote_url`` and ``remote_timeout_s``: the servers rows of ``vlm_envs.remote`` play on (a row
    may not name them), passed to its ``build_env`` as ``args.vlm_envs_remote_url`` and
    ``args.vlm_envs_remote_timeout_s``.
    """

    def __init__(
        self,
        trainer_config: Any,
        server_manager: Any,
        tokenizer: Any,
        processor: Any,
        allowed_envs: Any = None,
        remote_url: Any = None,
        remote_timeout_s: Any = None,
        **kwargs: Any,
    ) -> None:
        self.config = trainer_config.config
        self.rollout_config = self.config.actor_rollout_ref.rollout
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.processor = processor
        self.allowed_envs = allowed_envs
        self.remote = {"vlm_envs_remote_url": remote_url, "vlm_envs_remote_timeout_s": remote_timeout_s}

    def _filler_id(self) -> int:
        """The token of a failed row's one masked response token (the tokenizer's end of sequence)."""
        for token_id in (self.tokenizer.eos_token_id, self.tokenizer.pad_token_id):
            if isinstance(token_id, int):
                return token_id
        return 0

    async def run(
        self, sampling_params: dict[str, Any], **kwargs: Any
    ) -> AgentLoopOutput | list[AgentLoopOutput]:
        """Play the episode of the row ``kwargs`` (verl's dataset fields); never raises. A row whose
        ``extra_info["history"]`` is ``window:K`` gets one output per turn (verl's V1 trainer)."""
        record: dict[str, Any] = {"episode_id": uuid.uuid4().hex}  # its outputs' episode (verl_gigpo's)
        try:
            extra_info = kwargs.get("extra_info") or {}
            allowed = allowed_envs(self.allowed_envs, "allowed_envs (the agent-loop YAML)")
            config = resolve_config(self.rollout_config, extra_info, allowed)
            record["env"] = config.env
            codec = _codec(self.processor if self.processor is not None else self.tokenizer)
            sample, env_config = config.row.build_inputs(task_sample(kwargs, extra_info))
            args = types.SimpleNamespace(max_turns=config.episode.max_turns, **self.remote)
            env = build_env(config.env, sample=sample, args=args, **env_config)
        except Exception as err:  # a missing env, a bad row or config fails this row only
            return failed_output(record, f"{type(err).__name__}: {err}", self._filler_id())
        try:
            engine = VerlServerEngine(self.server_manager, record["episode_id"])
            traj = await run_episode(
                env,
                engine,
                codec,
                seed=config.seed,
                config=config.episode,
                sampling_params=sampling_params,
                fallback_prompt=row_prompt(kwargs.get("raw_prompt")),
            )
            record.update(episode_record(traj, trainer="verl"))
            turns = (
                []
                if traj.history.full
                else traj.turn_samples(config.turn_reward, config.gamma, config.shaping)
            )
            if turns:
                return [to_output(traj, codec, record, config.prompt_length, turn) for turn in turns]
            return to_output(traj, codec, record, config.prompt_length)
        except Exception as err:  # a bug of this library fails this row only, never verl's batch
            return failed_output(
                record, f"building the output: {type(err).__name__}: {err}", self._filler_id()
            )
        finally:
            with contextlib.suppress(Exception):  # an env that fails to close must not take the row down
                env.close()


def to_output(
    traj: Trajectory,
    codec: ChatCodec,
    record: dict[str, Any],
    prompt_length: int,
    turn: TurnSample | None = None,
) -> AgentLoopOutput:
    """The trajectory (or one of its turn samples) as verl's output, or a failed output where verl
    could not take it."""
    data: Trajectory | TurnSample = traj if turn is None else turn
    if len(data.prompt_ids) > prompt_length:
        error = (
            f"the prompt holds {len(data.prompt_ids)} tokens, more than rollout.prompt_length={prompt_length}"
        )
        return failed_output(record, error, codec.end_of_turn_id)
    violations = contract.trajectory_violations(data, codec.token_space)
    if violations:  # a bug of this library; verl still gets a valid, failed output
        contract.report("verl output", violations)
        return failed_output(record, f"contract: {violations[0]}", codec.end_of_turn_id, traj.prompt)
    response, mask, log_probs = data.response_ids, data.loss_mask, data.log_probs
    if not response:  # verl puts the reward on the last response token (see failed_output)
        response, mask, log_probs = [codec.end_of_turn_id], [0], [0.0]
    turns = traj.turns
    reward = traj.reward if turn is None else turn.reward
    return AgentLoopOutput(
        prompt_ids=data.prompt_ids,
        response_ids=response,
        response_mask=mask,
        response_logprobs=log_probs,
        multi_modal_data={"images": [image.image for image in data.images]} if data.images else {},
        mm_processor_kwargs={},  # the processor's own settings, which the codec used
        reward_score=reward if traj.reward_from_env else None,
        num_turns=sum(1 for m in traj.messages if m.get("role") != "system"),
        metrics=AgentLoopMetrics(
            generate_sequences=sum(t.timings.get("generate_s", 0.0) for t in turns),
            tool_calls=sum(t.timings.get("env_s", 0.0) for t in turns),
        ),
        extra_fields=_extra_fields(
            {
                **(record if turn is None else turn_record(record, turn)),
                "response_turns": response_turns(data),
            }
        ),
    )


def failed_output(
    record: dict[str, Any], error: str, filler_id: int, prompt: Encoded | None = None
) -> AgentLoopOutput:
    """A FAILED row with reward 0.0, after ``prompt`` when there is one.

    Its response is one masked ``filler_id`` token: verl puts the reward on the last response token
    (``AgentLoopOutput.as_dict``, the V1 trainer's path), which an empty response does not have.
    """
    record.update(status=Status.FAILED.value, error=error, reward=0.0, response_turns=[])
    ids = list(prompt.ids) if prompt is not None else []
    images = prompt.pil_images if prompt is not None else []
    return AgentLoopOutput(
        prompt_ids=ids,
        response_ids=[filler_id],
        response_mask=[0],
        response_logprobs=[0.0],
        multi_modal_data={"images": images} if images else {},
        mm_processor_kwargs={},
        reward_score=0.0,
        num_turns=1 if ids else 0,
        metrics=AgentLoopMetrics(),
        extra_fields=_extra_fields(record),
    )


def _extra_fields(record: dict[str, Any]) -> dict[str, Any]:
    """Our record, and the per-turn scores under the key verl's own tool loop uses."""
    step_rewards = (record.get("reward_breakdown") or {}).get("step_rewards") or []
    return {RECORD_KEY: record, "turn_scores": list(step_rewards), "tool_rewards": []}
