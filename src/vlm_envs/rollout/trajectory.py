"""A finished episode as training data: token segments, images, per-turn records and status.

:func:`check_against_template` compares a trajectory with the chat template's rendering of its
conversation (the sanity check that catches chat-template drift in loss masks).
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import re
from typing import Any

import torch

from vlm_envs.credit.shaping import PotentialShaping
from vlm_envs.protocol import Observation
from vlm_envs.rollout.codec import ChatCodec, Encoded, ProcessedImage
from vlm_envs.rollout.history import History, TurnReward, check_turn_reward, turn_rewards
from vlm_envs.rollout.images import Allocator, train_inputs_of
from vlm_envs.rollout.segment import Segment
from vlm_envs.rollout.turns import Context, TurnSample
from vlm_envs.state_signals import action_optimal

#: Marks a conversation's first message as a prompt rendered elsewhere (its content is template text).
RENDERED_PROMPT = "rendered_prompt"


class Status(str, enum.Enum):
    """How an episode ended (the values of slime's ``Sample.Status``)."""

    COMPLETED = "completed"  # the env said done
    TRUNCATED = "truncated"  # max_turns, the token budget, or a generated image token cut it short
    ABORTED = "aborted"  # the engine or the trainer aborted it
    FAILED = "failed"  # the env, the engine or the codec failed; see ``error``


#: The :class:`TurnRecord` fields that say where a turn stood (``action_optimal`` is derived from them).
STANDING_FIELDS = ("state_key", "distance_to_goal", "next_distance_to_goal")


@dataclasses.dataclass
class TurnRecord:
    """What happened in one turn."""

    index: int
    model_text: str
    finish_reason: str
    generated_tokens: int
    reward: float = 0.0
    done: bool = False
    metrics: dict[str, float | int | bool] = dataclasses.field(default_factory=dict)
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    observation: Observation | None = None
    observation_tokens: int = 0  # 0 when there was none or the budget dropped it
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    #: The generated ids of this turn, and the observation that answered them as a delta after
    #: them (``None`` where the episode ended) and, for ``window:0``, as a delta after the task.
    reply: Segment | None = dataclasses.field(default=None, repr=False)
    delta: Encoded | None = dataclasses.field(default=None, repr=False)
    follow: Encoded | None = dataclasses.field(default=None, repr=False)
    #: The past turns this turn's context held (``None``: the full history).
    context_turns: tuple[int, ...] | None = None
    #: Where the episode stood when the reply was generated (its state's key and distance to the goal),
    #: and its distance after the env's answer (:mod:`vlm_envs.state_signals`; ``None`` where not said).
    state_key: str | None = None
    distance_to_goal: int | None = None
    next_distance_to_goal: int | None = None
    #: The env ended the episode at a cap of its own (``StepInfo.truncated`` without ``terminated``): a
    #: time limit, as the rollout's ``max_turns``, not the end of the task.
    truncated: bool = False

    @property
    def action_optimal(self) -> bool | None:
        """Whether the reply lowered the distance to the goal by one
        (:func:`~vlm_envs.state_signals.action_optimal`)."""
        return action_optimal(self.distance_to_goal, self.next_distance_to_goal)


@dataclasses.dataclass(frozen=True)
class Kept:
    """What a resumed episode kept from before its abort (:mod:`vlm_envs.rollout.resume`): its
    finished turns, and the response tokens (the trainer holds them already) and generated tokens
    among them, the cut turn's partial reply included: none of them was generated again."""

    turns: int
    response_tokens: int
    generated_tokens: int


@dataclasses.dataclass(frozen=True)
class TemplateCheck:
    """Whether the finished token list equals the chat template's rendering of the conversation."""

    ok: bool
    detail: str = ""
    #: The only differences are ``<think>`` blocks the template drops or adds on purpose.
    thinking_only: bool = False


@dataclasses.dataclass
class Trajectory:
    """A finished episode as training data, with a record of every turn."""

    prompt: Encoded
    messages: list[dict[str, Any]]
    segments: list[Segment] = dataclasses.field(default_factory=list)
    images: list[ProcessedImage] = dataclasses.field(default_factory=list)
    turns: list[TurnRecord] = dataclasses.field(default_factory=list)
    status: Status = Status.COMPLETED
    error: str | None = None
    reward: float = 0.0
    reset_info: dict[str, Any] = dataclasses.field(default_factory=dict)
    template_check: TemplateCheck | None = None
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Where the prompt came from: ``"env"`` (its first observation) or ``"sample"`` (the trainer's).
    prompt_source: str = "env"
    #: Whether ``reward`` is the env's own score; ``False`` for an env without an episode reward
    #: (a trainer's reward model scores the episode), unless the episode FAILED or was ABORTED.
    reward_from_env: bool = True
    #: What the model saw of past turns; a windowed episode trains on :meth:`turn_samples`.
    history: History = dataclasses.field(default_factory=History)
    #: The prompt without its generation prompt (``window:0`` contexts start with it).
    head: Encoded | None = dataclasses.field(default=None, repr=False)
    #: A resumed episode: what it kept from before its abort (``None``: it played from the start).
    kept: Kept | None = None
    #: An ABORTED full-history episode: the plain-JSON state it resumes from
    #: (:func:`~vlm_envs.rollout.resume.resume_state`), or why it has none (``resume_error``).
    resume: dict[str, Any] | None = dataclasses.field(default=None, repr=False)
    resume_error: str | None = None
    _train_inputs: dict[str, torch.Tensor] | None = dataclasses.field(default=None, repr=False, compare=False)
    _texts: tuple[str, ...] | None = dataclasses.field(default=None, repr=False, compare=False)

    @classmethod
    def failed(cls, error: str, reward: float = 0.0) -> Trajectory:
        """A FAILED episode that produced no tokens (it never got past its env or its worker)."""
        empty = Encoded(ids=(), engine_ids=(), images=[], text="")
        return cls(prompt=empty, messages=[], status=Status.FAILED, error=error, reward=reward)

    def discard_response(self, error: str, reward: float = 0.0) -> None:
        """Keep only the prompt (its tokens and images) and end FAILED with ``error``."""
        self.segments = []
        self.images = list(self.prompt.images)
        for record in self.turns:
            record.reply = None
        self.status, self.error, self.reward = Status.FAILED, error, reward
        self.kept = self.resume = None  # a trainer rewrites the whole response
        self._train_inputs = self._texts = None

    def take_cut(self, turn: int) -> Segment | None:
        """If the last turn is ``turn`` (a resumed episode cut inside it), take it back off: its record,
        assistant message and reply segment; return the reply (``None``: there is no such turn)."""
        if not self.turns or self.turns[-1].index != turn:
            return None
        reply = self.turns.pop().reply
        self.messages.pop()
        if reply is not None and reply.ids:
            self.segments.pop()
        return reply

    def discard_prompt(self) -> None:
        """Keep nothing at all (after :meth:`discard_response`, when the prompt itself is unusable)."""
        self.prompt = Encoded(ids=(), engine_ids=(), images=[], text="")
        self.images = []
        self._train_inputs = self._texts = None

    def turn_samples(
        self, reward: TurnReward = "episode", gamma: float = 1.0, shaping: PotentialShaping | None = None
    ) -> list[TurnSample]:
        """One training sample per turn that generated tokens: its :meth:`context` as the prompt,
        its reply as the response. Rewards: the episode's on every turn (``episode``), the
        discounted return from the turn (``return``), or the step reward (``step``); an episode that
        FAILED or was ABORTED gives every turn its (failure) reward. ``shaping`` adds each turn's
        potential-based term (:mod:`vlm_envs.credit.shaping`) to its step reward: to the turn's own reward
        (``episode``, ``step``) or within the return (``return``); the episode ended where the env ended
        it, not at a turn cap (the rollout's or the env's own). ``ValueError`` for a mode or gamma
        :func:`~vlm_envs.rollout.history.check_turn_reward` refuses."""
        reward, gamma = check_turn_reward(reward, gamma)
        records = [r for r in self.turns if r.reply is not None]
        if self.status in (Status.FAILED, Status.ABORTED):
            rewards = [self.reward] * len(records)
        else:
            rewards = turn_rewards([r.reward for r in records], self.reward, reward, gamma)
            if shaping is not None:
                before = [r.distance_to_goal for r in records]
                after = [r.next_distance_to_goal for r in records]
                capped = bool(self.turns) and self.turns[-1].truncated  # a turn cap ends nothing
                terms = shaping.terms(before, after, self.status is Status.COMPLETED and not capped, gamma)
                terms = turn_rewards(terms, 0.0, "return" if reward == "return" else "step", gamma)
                rewards = [value + term for value, term in zip(rewards, terms, strict=True)]
        return [
            TurnSample(r.index, self.context(r.index), r.reply, value)
            for r, value in zip(records, rewards, strict=True)
            if r.reply.ids
        ]

    def context(self, turn: int) -> Context:
        """What the engine saw at ``turn`` (0-based) under the history policy.

        ``window:K`` (K >= 1): the prompt, then for each kept past turn its generated ids and the
        observation delta that answered them (the template's own rendering of those messages, as the
        full history splices them). ``window:0``: the prompt without its generation prompt and the
        current observation rendered right after it. Consecutive contexts share the prompt (and,
        until the window is full, everything after it).
        """
        prompt = self.prompt
        if turn == 0:
            return Context(prompt.ids, prompt.engine_ids, list(prompt.images), ())
        if self.history.window == 0:
            head, follow = self.head, self.turns[turn - 1].follow
            if head is None or follow is None:
                raise ValueError(
                    f"turn {turn} has no window:0 context: the observation before it was not encoded"
                )
            return Context(
                head.ids + follow.ids, head.engine_ids + follow.engine_ids, [*head.images, *follow.images], ()
            )
        kept = tuple(self.history.kept(turn))
        ids, engine_ids, images = [prompt.ids], [prompt.engine_ids], list(prompt.images)
        for j in kept:
            record = self.turns[j]
            if record.reply is None or record.delta is None:
                raise ValueError(f"turn {turn} has no context: turn {j} left no observation")
            ids += [record.reply.ids, record.delta.ids]
            engine_ids += [record.reply.ids, record.delta.engine_ids]
            images += record.delta.images
        return Context(_joined(ids), _joined(engine_ids), images, kept)

    @property
    def prompt_ids(self) -> list[int]:
        return list(self.prompt.ids)

    @property
    def response_ids(self) -> list[int]:
        return [t for seg in self.segments for t in seg.ids]

    @property
    def tokens(self) -> list[int]:
        """Prompt ids + response ids, images expanded."""
        return [*self.prompt.ids, *self.response_ids]

    @property
    def response_length(self) -> int:
        return sum(len(seg.ids) for seg in self.segments)

    @property
    def loss_mask(self) -> list[int]:
        """1 on generated tokens, 0 on observation tokens."""
        return [int(seg.trainable) for seg in self.segments for _ in seg.ids]

    @property
    def log_probs(self) -> list[float]:
        """The engine's log probs on generated tokens, 0.0 on observation tokens."""
        return [lp for seg in self.segments for lp in (seg.log_probs or [0.0] * len(seg.ids))]

    def train_inputs(self, memory: Allocator | None = None) -> dict[str, torch.Tensor]:
        """``pixel_values`` and ``image_grid_thw`` of all images in token order, or ``{}``.

        Made on the first call (in ``memory``'s array, if it gives one) and kept (the episode is
        over): call it once off the event loop (``run_in_executor``) and later calls cost nothing there.
        """
        if self._train_inputs is None:
            self._train_inputs = train_inputs_of(self.images, memory=memory)
        return self._train_inputs

    def segment_texts(self, codec: ChatCodec) -> tuple[str, ...]:
        """Each segment's text, special tokens included (what slime's ``append_response_tokens``
        takes with its ids). Made on the first call and kept, like :meth:`train_inputs`."""
        if self._texts is None:
            self._texts = tuple(codec.decode(seg.ids, skip_special_tokens=False) for seg in self.segments)
        return self._texts

    def prepare(self, codec: ChatCodec, memory: Allocator | None = None) -> None:
        """Make what a trainer reads, where the episode played and off any trainer's loop: the
        training tensors (in ``memory``, if it gives an array) and the segments' texts."""
        self.train_inputs(memory)
        self.segment_texts(codec)


def check_against_template(traj: Trajectory, codec: ChatCodec) -> TemplateCheck:
    """Compare the trajectory's tokens with the chat template's rendering of its conversation.

    Assistant contents are spliced in as the generated ids (so a non-canonical tokenization is not
    a difference). After a final assistant turn the rendering may go on with the template's
    end-of-turn tail (``<|im_end|>`` if generation stopped without it, then a newline). Thinking
    templates drop past ``<think>`` blocks or add empty ones on purpose: a difference made only of
    such blocks passes, reported apart (``thinking_only``).
    """
    messages = [{k: v for k, v in m.items() if k != "token_ids"} for m in traj.messages]
    assistant_ids = [m["token_ids"] for m in traj.messages if m["role"] == "assistant"]
    images = [im.image for im in traj.images]
    ends_with_prompt = not messages or messages[-1]["role"] != "assistant"
    rendered_prompt = bool(messages) and bool(messages[0].get(RENDERED_PROMPT))
    if rendered_prompt:  # a prompt rendered elsewhere: check what follows it, after a stand-in prompt
        stand_in = [{"role": "user", "content": "U"}]
        head = codec.render_conversation(stand_in, [], add_generation_prompt=True)
        messages, images = stand_in + messages[1:], images[len(traj.prompt.images) :]
    expected = codec.render_conversation(
        messages, images, assistant_ids, add_generation_prompt=ends_with_prompt
    )
    if rendered_prompt:
        if expected[: len(head)] != head:
            return TemplateCheck(ok=False, detail="the template renders a prompt's later turns differently")
        expected = traj.prompt_ids + expected[len(head) :]
    actual = traj.tokens
    n = next((i for i, (a, b) in enumerate(zip(actual, expected, strict=False)) if a != b), None)
    if n is None and len(actual) <= len(expected):
        tail = expected[len(actual) :]
        if tail and tail[0] == codec.end_of_turn_id:
            tail = tail[1:]
        if not codec.decode(tail, skip_special_tokens=False).strip():
            return TemplateCheck(ok=True)
        n = len(actual)
    if n is None:
        n = len(expected)

    got, want = _without_think(codec, actual), _without_think(codec, expected)
    end_of_turn = codec.tokenizer.convert_ids_to_tokens(codec.end_of_turn_id)
    if want.startswith(got) and not want[len(got) :].removeprefix(end_of_turn).strip():
        detail = "differs only in <think> blocks, which this chat template drops or adds on purpose"
        return TemplateCheck(ok=True, detail=detail, thinking_only=True)

    def show(ids: list[int]) -> str:
        return repr(codec.decode(ids[max(0, n - 8) : n + 8], skip_special_tokens=False))

    return TemplateCheck(
        ok=False, detail=f"first difference at token {n}: expected {show(expected)}, got {show(actual)}"
    )


_THINK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)


def _without_think(codec: ChatCodec, ids: list[int]) -> str:
    return _THINK.sub("", codec.decode(ids, skip_special_tokens=False)).rstrip()


def _joined(parts: list[tuple[int, ...]]) -> tuple[int, ...]:
    return tuple(itertools.chain.from_iterable(parts))
