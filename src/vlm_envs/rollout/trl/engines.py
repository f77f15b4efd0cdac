"""TRL's vLLM client as an engine of the TRL rollout (the policy generating in this process is
:mod:`vlm_envs.rollout.trl.policy`), and what both engines share.

Both are :class:`~vlm_envs.rollout.engines.Engine` s: ids and images in, ids, log probs and a finish
reason out; the episode loop checks every reply against the reply contract. Images arrive as the
resized PIL images the codec made (``EpisodeConfig(engine_images="pil")``), in placeholder order.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from PIL import Image

from vlm_envs.rollout.engines.contract import (
    EngineOutput,
    EngineTimeout,
    FinishReason,
    PermanentEngineError,
    TransientEngineError,
)
from vlm_envs.rollout.engines.http import (
    DEFAULT_READ_TIMEOUT_S,
    DEFAULT_TURN_TIMEOUT_S,
    check_limits,
    deadline,
)

#: The read timeout of requests sent from a :class:`VLLMServerEngine` thread (TRL's client sets none).
_thread_deadline = threading.local()


class ReadDeadline:
    """Wraps a ``requests`` adapter (``send`` and ``close``, all a session calls): a request sent
    with no timeout from a thread that set ``_thread_deadline.read_timeout`` gets that timeout
    (connect and each read), and a redirect it is answered is refused, not followed (the session
    would follow one to any host); others pass as sent."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def send(self, request: Any, timeout: Any = None, **kwargs: Any) -> Any:
        ours = getattr(_thread_deadline, "read_timeout", None)
        response = self.inner.send(request, timeout=ours if timeout is None else timeout, **kwargs)
        if ours is not None and response.is_redirect:
            target = response.headers.get("Location", "?")
            response.close()
            raise PermanentEngineError(
                f"{VLLMServerEngine.name}: {request.path_url} answered HTTP {response.status_code} (a "
                f"redirect to {target!r:.200}; vlm-envs follows none: give the server's own URL)"
            )
        return response

    def close(self) -> None:
        self.inner.close()


def bound_reads(session: Any) -> None:
    """Give ``session``'s HTTP adapters :class:`ReadDeadline` (once)."""
    for prefix in ("http://", "https://"):
        adapter = session.get_adapter(prefix)
        if not isinstance(adapter, ReadDeadline):
            session.mount(prefix, ReadDeadline(adapter))


def finish_reason(ids: Sequence[int], stop_ids: Sequence[int], max_new_tokens: int) -> FinishReason:
    """``stop`` if the generation ended on a stop id, ``length`` if it used its whole budget."""
    if ids and ids[-1] in stop_ids:
        return "stop"
    return "length" if len(ids) >= max_new_tokens else "stop"


@dataclasses.dataclass(frozen=True)
class VLLMSampling:
    """The sampling settings TRL gives its vLLM server (from ``GRPOConfig``)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    generation_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, generation: Any) -> VLLMSampling:
        """Read them from TRL's ``VLLMGeneration`` (``trainer.vllm_generation``)."""
        return cls(
            temperature=float(generation.temperature),
            top_p=float(generation.top_p),
            top_k=int(generation.top_k or 0),
            min_p=float(generation.min_p or 0.0),
            repetition_penalty=float(generation.repetition_penalty),
            generation_kwargs=dict(generation.generation_kwargs or {}),
        )


def image_runs(ids: Sequence[int], image_token_id: int) -> list[dict[str, int]]:
    """Where each image's pad tokens sit in ``ids``: one ``{"offset", "length"}`` per run."""
    runs, start = [], None
    for i, token in enumerate([*ids, -1]):
        if token == image_token_id and start is None:
            start = i
        elif token != image_token_id and start is not None:
            runs.append({"offset": start, "length": i - start})
            start = None
    return runs


class VLLMServerEngine:
    """TRL's vLLM client (``trl vllm-serve``; ``GRPOConfig(use_vllm=True, vllm_mode="server")``).

    Images go to the server's render endpoint first (``VLLMClient.image_features``); their features
    are then pointed at the image-pad runs of our ids (expanded, as TRL sends its own) and sent with
    them to ``/inference/v1/generate``. TRL syncs the server's weights before each rollout. The
    client is synchronous: each request runs on a thread of the engine's own, so episodes overlap.

    Deadlines, as the other engines have (TRL's client posts with none): ``read_timeout`` (default
    60 s) bounds connecting and each read of this engine's requests (the client's ``requests``
    adapters get it, for this engine's threads only); ``turn_timeout`` (default 300 s) bounds the
    whole turn, the client's own retries included. Past either, the turn raises
    :class:`~vlm_envs.rollout.engines.EngineTimeout` naming the engine, and the episode ends FAILED.
    :meth:`close` lets go of the threads without waiting for a request still in flight.
    """

    name = "TRL vLLM server"

    def __init__(
        self,
        client: Any,
        sampling: VLLMSampling,
        image_token_id: int | None,
        *,
        read_timeout: float = DEFAULT_READ_TIMEOUT_S,
        turn_timeout: float = DEFAULT_TURN_TIMEOUT_S,
    ) -> None:
        check_limits(read_timeout, turn_timeout)
        self.client = client
        self.sampling = sampling
        self.image_token_id = image_token_id
        self.read_timeout, self.turn_timeout = float(read_timeout), float(turn_timeout)
        bound_reads(client.session)
        self._threads = concurrent.futures.ThreadPoolExecutor(64, thread_name_prefix="vlm-envs-trl-vllm")

    def close(self) -> None:
        """Stop taking turns; a request still in flight ends on its read deadline, unwaited."""
        self._threads.shutdown(wait=False, cancel_futures=True)

    async def generate(
        self, input_ids: Sequence[int], images: Sequence[Any], sampling_params: Mapping[str, Any]
    ) -> EngineOutput:
        loop = asyncio.get_running_loop()
        call = loop.run_in_executor(
            self._threads, self._bounded, list(input_ids), list(images), dict(sampling_params)
        )
        try:
            async with deadline(self.turn_timeout):
                return await call
        except asyncio.TimeoutError:
            raise EngineTimeout(
                f"{self.name}: no complete reply within turn_timeout={self.turn_timeout:g} s"
            ) from None

    def _bounded(self, ids: list[int], images: list[Image.Image], params: dict[str, Any]) -> EngineOutput:
        _thread_deadline.read_timeout = self.read_timeout
        try:
            return self._generate(ids, images, params)
        except OSError as err:  # requests' ConnectionError and Timeout are OSErrors
            raise TransientEngineError(f"{self.name}: {type(err).__name__}: {str(err)[:300]}") from err

    def _generate(self, ids: list[int], images: list[Image.Image], params: dict[str, Any]) -> EngineOutput:
        features = None
        if images:
            (raw,) = self.client.image_features([images])
            runs = image_runs(ids, self.image_token_id) if self.image_token_id is not None else []
            if raw is None or len(runs) != len(raw["mm_placeholders"]["image"]):
                found = 0 if raw is None else len(raw["mm_placeholders"]["image"])
                raise ValueError(f"{len(runs)} runs of image tokens in the ids, {found} images processed")
            features = [{**raw, "mm_placeholders": {**raw["mm_placeholders"], "image": runs}}]
        s = self.sampling
        # the episode's budget sets max_tokens: the user's per-turn cap is already in it
        extra = {k: v for k, v in s.generation_kwargs.items() if k not in ("max_tokens", "max_new_tokens")}
        own = extra.pop("stop_token_ids", None) or ()
        stop_ids = sorted({*own, *params.get("stop_token_ids", ())})
        max_tokens = int(params["max_new_tokens"])
        out = self.client.generate(
            prompts=[ids],
            features=features,
            n=1,
            repetition_penalty=s.repetition_penalty,
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=s.top_k,
            min_p=s.min_p,
            max_tokens=max_tokens,
            logprobs=0,
            generation_kwargs={**extra, "stop_token_ids": stop_ids},
        )
        new = list(out["completion_ids"][0])
        log_probs = out["logprobs"][0] if out.get("logprobs") is not None else []
        token_ids = out.get("logprob_token_ids")
        if token_ids is not None:  # each position: the sampled token's entry, wherever it ranks
            log_probs = [
                row[ranked.index(token)] if token in ranked else None
                for row, ranked, token in zip(log_probs, token_ids[0], new, strict=False)
            ]
        else:
            log_probs = [row[0] if isinstance(row, list) else row for row in log_probs]
        return EngineOutput(
            token_ids=new, log_probs=log_probs, finish_reason=finish_reason(new, stop_ids, max_tokens)
        )
