"""The policy engine of the TRL rollout: the model being trained, generating in this process.

The turns of concurrent episodes that wait for the model go to one ``generate`` call, left padded,
images included (stock TRL batches a round's prompts the same way); each reply is cut back to its
episode's own budget and stop ids, with its log probs. Batches run one at a time on a single thread,
so env steps of other episodes go on meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor
from typing import Any

import torch
from PIL import Image

from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.contract import EngineOutput, PermanentEngineError
from vlm_envs.rollout.engines.hf_model import batch_inputs, batch_log_probs
from vlm_envs.rollout.images import train_inputs_of
from vlm_envs.rollout.trl.engines import finish_reason


@dataclasses.dataclass
class _Turn:
    """One episode's turn waiting for the model."""

    ids: list[int]
    images: list[Image.Image]
    max_new_tokens: int
    stop_ids: tuple[int, ...]
    reply: asyncio.Future[EngineOutput]
    since: float


def cut(ids: Sequence[int], max_new_tokens: int, stop_ids: Sequence[int]) -> list[int]:
    """A batch row's new tokens as its episode asked: at most ``max_new_tokens``, ending at the
    first stop id (kept); what the batch generated after that is padding or another row's budget."""
    ids = list(ids[:max_new_tokens])
    end = next((i for i, token in enumerate(ids) if token in stop_ids), None)
    return ids if end is None else ids[: end + 1]


class PolicyEngine:
    """The model being trained, generating in this process (``GRPOConfig(use_vllm=False)``).

    ``model`` is the unwrapped policy (TRL's ``unwrap_model_for_generation``); ``generation_config``
    is the trainer's (temperature, top-p/k, min-p, repetition penalty from ``GRPOConfig``), of which
    each turn sets ``max_new_tokens`` and the stop ids, and every image special token is suppressed
    (one in a reply would end its episode). Log probs are
    ``log_softmax(logits / temperature)`` of the sampled tokens, what TRL's loss recomputes; images
    go through the codec's cache, so the model sees exactly the pixel values the trainer will.

    Batching: episodes played inside :meth:`playing` are counted; once every episode in play waits
    for the model (or the first waiting turn has waited :attr:`max_wait_s`, so one slow env step
    does not hold the others), their turns go to one ``generate`` per set of stop ids, on
    ``executor`` (a single thread). A turn asked while a batch runs joins the next one.
    :attr:`batches` records each call's size. Log probs come from the raw step logits
    (``generate(output_logits=True)``), which the call holds until it ends: batch x new tokens x
    vocabulary floats.
    """

    name = "trainer model"
    #: Seconds the first waiting turn waits for the other episodes in play before the model runs.
    max_wait_s = 0.05

    def __init__(self, model: Any, codec: ChatCodec, generation_config: Any, executor: Executor) -> None:
        self.model = model
        self.codec = codec
        self.generation_config = generation_config
        self.executor = executor
        self.device = next(model.parameters()).device
        self.batches: list[int] = []
        self._waiting: list[_Turn] = []
        self._playing = 0
        self._running: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    @contextlib.contextmanager
    def playing(self) -> Iterator[None]:
        """Count one episode as in play while the block runs (its turns are waited for)."""
        self._playing += 1
        try:
            yield
        finally:
            self._playing -= 1
            self._schedule()

    async def generate(
        self, input_ids: Sequence[int], images: Sequence[Any], sampling_params: Mapping[str, Any]
    ) -> EngineOutput:
        loop = asyncio.get_running_loop()
        turn = _Turn(
            ids=list(input_ids),
            images=list(images),
            max_new_tokens=int(sampling_params["max_new_tokens"]),
            stop_ids=tuple(sorted(set(sampling_params.get("stop_token_ids", ())))),
            reply=loop.create_future(),
            since=loop.time(),
        )
        self._waiting.append(turn)
        self._schedule()
        return await turn.reply

    def _schedule(self) -> None:
        """Start a batch if the model is free and every episode in play waits (or waited long enough)."""
        self._waiting = [turn for turn in self._waiting if not turn.reply.done()]  # cancelled episodes
        if self._running is not None or not self._waiting:
            return
        loop = asyncio.get_running_loop()
        left = self._waiting[0].since + self.max_wait_s - loop.time()
        if len(self._waiting) < self._playing and left > 0:
            if self._timer is None:
                self._timer = loop.call_later(left, self._on_timer)
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        turns, self._waiting = self._waiting, []
        self._running = loop.create_task(self._run(turns))

    def _on_timer(self) -> None:
        self._timer = None
        self._schedule()

    async def _run(self, turns: list[_Turn]) -> None:
        loop = asyncio.get_running_loop()
        try:
            groups: dict[tuple[int, ...], list[_Turn]] = {}
            for turn in turns:
                groups.setdefault(turn.stop_ids, []).append(turn)
            for group in groups.values():
                group = [turn for turn in group if not turn.reply.done()]
                if not group:
                    continue
                try:
                    outputs = await loop.run_in_executor(self.executor, self._generate, group)
                except Exception as err:  # each waiting episode fails with the cause, the engine named
                    for turn in group:
                        if not turn.reply.done():
                            turn.reply.set_exception(
                                PermanentEngineError(f"{self.name}: {type(err).__name__}: {err}")
                            )
                    continue
                for turn, output in zip(group, outputs, strict=True):
                    if not turn.reply.done():
                        turn.reply.set_result(output)
        finally:
            self._running = None
            self._schedule()

    def _generate(self, turns: list[_Turn]) -> list[EngineOutput]:
        config = copy.deepcopy(self.generation_config)
        config.max_new_tokens = max(turn.max_new_tokens for turn in turns)
        own = config.eos_token_id
        own = [own] if isinstance(own, int) else list(own or [])
        stop_ids = sorted({*own, *turns[0].stop_ids})
        config.eos_token_id = stop_ids
        if config.pad_token_id is None:
            config.pad_token_id = stop_ids[0]
        # an image special token in a reply ends its episode (the trainer's image invariants): never
        # sample one (TRL's own config suppresses the image pad only)
        config.suppress_tokens = sorted({*(config.suppress_tokens or ()), *self.codec.special_image_ids})
        config.output_logits, config.return_dict_in_generate = True, True
        visions = [train_inputs_of([self.codec.process_image(im) for im in turn.images]) for turn in turns]
        kwargs = batch_inputs(
            [turn.ids for turn in turns], visions, self.codec.image_token_id, config.pad_token_id, self.device
        )
        with torch.no_grad():  # grad mode is per thread: this runs on the engine's thread
            out = self.model.generate(**kwargs, generation_config=config)
        self.batches.append(len(turns))
        width = kwargs["input_ids"].shape[1]
        new = [
            cut(row[width:].tolist(), turn.max_new_tokens, stop_ids)
            for row, turn in zip(out.sequences, turns, strict=True)
        ]
        log_probs = batch_log_probs(out.logits, new, config.temperature if config.do_sample else None)
        return [
            EngineOutput(
                token_ids=ids,
                log_probs=lps,
                finish_reason=finish_reason(ids, stop_ids, turn.max_new_tokens),
            )
            for ids, lps, turn in zip(new, log_probs, turns, strict=True)
        ]
