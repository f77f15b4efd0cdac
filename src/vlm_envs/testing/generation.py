"""Generation with SGLang's sampling semantics on a tiny local model: the engine behind the test server.

Log probs are those of the distribution sampled from: ``log_softmax(logits / temperature)``, or of
the raw logits when decoding greedily (``temperature == 0``); at temperature 1 they equal the
model's own log probs. ``top_p``, ``top_k`` and other SGLang sampling fields are accepted and
ignored, so the log probs stay the model's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from PIL import Image

from vlm_envs.rollout.engines.hf_model import model_inputs, sampled_log_probs


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """The subset of SGLang's ``sampling_params`` the test engine honours (defaults as in SGLang)."""

    max_new_tokens: int = 128
    temperature: float = 1.0
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    no_stop_trim: bool = False
    skip_special_tokens: bool = True
    sampling_seed: int | None = None

    @classmethod
    def from_request(cls, params: Mapping[str, Any]) -> SamplingParams:
        """Validated params from a request's ``sampling_params``; ``ValueError`` if malformed."""
        stop = params.get("stop") or ()
        stop = (stop,) if isinstance(stop, str) else tuple(stop)
        out = cls(
            max_new_tokens=int(params.get("max_new_tokens", 128)),
            temperature=float(params.get("temperature", 1.0)),
            stop=stop,
            stop_token_ids=tuple(int(t) for t in params.get("stop_token_ids") or ()),
            ignore_eos=bool(params.get("ignore_eos", False)),
            no_stop_trim=bool(params.get("no_stop_trim", False)),
            skip_special_tokens=bool(params.get("skip_special_tokens", True)),
            sampling_seed=None if params.get("sampling_seed") is None else int(params["sampling_seed"]),
        )
        if out.max_new_tokens < 0 or out.temperature < 0 or not math.isfinite(out.temperature):
            raise ValueError("max_new_tokens and temperature must be non-negative")
        if not all(isinstance(s, str) and s for s in out.stop):
            raise ValueError("stop must be a non-empty string or a list of them")
        return out


@dataclasses.dataclass(frozen=True)
class Generation:
    """What the engine produced: ids, their log probs, SGLang's ``finish_reason`` dict and the text."""

    token_ids: list[int]
    log_probs: list[float]
    finish_reason: dict[str, Any]
    text: str


@dataclasses.dataclass(frozen=True)
class ModelInputs:
    """Expanded input ids and the vision tensors that go with them."""

    input_ids: list[int]
    pixel_values: torch.Tensor | None
    image_grid_thw: torch.Tensor | None


class TinyEngine:
    """Runs a Qwen-VL model from token ids and images the way SGLang's ``/generate`` would.

    Not thread-safe: call it from one thread at a time (the server uses a one-thread executor).
    ``torch_threads`` sets torch's process-wide intra-op thread count (unless ``None``): a tiny model
    runs an order of magnitude faster on one thread than on two contended cores.
    """

    def __init__(
        self, model: torch.nn.Module, processor: Any, seed: int = 0, torch_threads: int | None = 1
    ) -> None:
        if torch_threads is not None:
            torch.set_num_threads(torch_threads)
        self.model = model
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.seed = seed
        self.vocab_size = len(self.tokenizer)
        self.image_token_id = int(model.config.image_token_id)
        self.merge = int(processor.image_processor.merge_size)

    def prepare(self, input_ids: Sequence[int], images: Sequence[Image.Image]) -> ModelInputs:
        """Process ``images`` and expand their tokens if ``input_ids`` holds one per image.

        Raises ``ValueError`` when the image tokens match neither one per image nor the expanded
        count (the mismatch SGLang and the trainer reject).
        """
        ids = [int(t) for t in input_ids]
        if not ids or any(t < 0 or t >= self.vocab_size for t in ids):
            raise ValueError(f"input_ids must be a non-empty list of ids in [0, {self.vocab_size})")
        n_image_tokens = sum(t == self.image_token_id for t in ids)
        if not images:
            if n_image_tokens:
                raise ValueError(f"{n_image_tokens} image tokens but no image_data")
            return ModelInputs(ids, None, None)
        out = self.processor.image_processor(images=list(images), return_tensors="pt")
        grid = out["image_grid_thw"]
        per_image = [int(g.prod()) // self.merge**2 for g in grid]
        if n_image_tokens == len(images) and per_image != [1] * len(images):
            expanded: list[int] = []
            k = 0
            for t in ids:
                if t == self.image_token_id:
                    expanded += [t] * per_image[k]
                    k += 1
                else:
                    expanded.append(t)
            ids = expanded
        elif n_image_tokens != sum(per_image):
            raise ValueError(
                f"image features and image tokens do not match: {n_image_tokens} image tokens, "
                f"{len(images)} images needing {per_image}"
            )
        return ModelInputs(ids, out["pixel_values"], grid)

    def model_kwargs(self, inputs: ModelInputs, ids: list[int]) -> dict[str, Any]:
        """Keyword arguments of a model forward over ``ids`` (which must extend ``inputs.input_ids``)."""
        vision = None
        if inputs.pixel_values is not None:
            vision = {"pixel_values": inputs.pixel_values, "image_grid_thw": inputs.image_grid_thw}
        return model_inputs(ids, vision, self.image_token_id)

    @torch.inference_mode()
    def score(
        self, inputs: ModelInputs, continuation: Sequence[int], temperature: float = 1.0
    ) -> list[float]:
        """Log probs of ``continuation`` after ``inputs`` in one teacher-forced forward pass."""
        if not continuation:
            return []
        ids = inputs.input_ids + list(continuation)
        logits = self.model(**self.model_kwargs(inputs, ids)).logits[0, len(inputs.input_ids) - 1 : -1]
        logp = torch.log_softmax(logits.float() / (temperature or 1.0), dim=-1)
        return logp.gather(1, torch.tensor(continuation).unsqueeze(1)).squeeze(1).tolist()

    @torch.inference_mode()
    def generate(self, inputs: ModelInputs, params: SamplingParams) -> Generation:
        """Sample a continuation; stops on eos / ``stop_token_ids`` (kept in the ids) or ``stop`` strings."""
        stop_ids = set(params.stop_token_ids)
        if not params.ignore_eos:
            stop_ids.add(int(self.tokenizer.eos_token_id))
        token_ids, log_probs = [], []
        if params.max_new_tokens:
            torch.manual_seed(self._seed(inputs, params))
            greedy = params.temperature == 0
            out = self.model.generate(
                **self.model_kwargs(inputs, inputs.input_ids),
                max_new_tokens=params.max_new_tokens,
                do_sample=not greedy,
                temperature=None if greedy else params.temperature,
                top_k=0,
                top_p=1.0,
                eos_token_id=sorted(stop_ids),
                pad_token_id=self.tokenizer.pad_token_id,
                output_logits=True,
                return_dict_in_generate=True,
            )
            token_ids = out.sequences[0, len(inputs.input_ids) :].tolist()
            log_probs = sampled_log_probs(out.logits, token_ids, params.temperature)
        return self._finish(token_ids, log_probs, stop_ids, params)

    def script(self, inputs: ModelInputs, token_ids: Sequence[int], params: SamplingParams) -> Generation:
        """``token_ids`` as if generated: scored by the model, stop strings and finish reason applied."""
        ids = [int(t) for t in token_ids]
        stop_ids = set(params.stop_token_ids) | (
            set() if params.ignore_eos else {int(self.tokenizer.eos_token_id)}
        )
        return self._finish(ids, self.score(inputs, ids, params.temperature), stop_ids, params)

    def _finish(
        self, ids: list[int], log_probs: list[float], stop_ids: set[int], params: SamplingParams
    ) -> Generation:
        decode = self.tokenizer.decode
        skip = params.skip_special_tokens
        if params.stop:
            for k in range(1, len(ids) + 1):
                text = decode(ids[:k], skip_special_tokens=skip)
                hits = [(text.find(s), s) for s in params.stop if s in text]
                if hits:
                    at, matched = min(hits)
                    text = text if params.no_stop_trim else text[:at]
                    return Generation(ids[:k], log_probs[:k], {"type": "stop", "matched": matched}, text)
        text = decode(ids, skip_special_tokens=skip)
        if ids and ids[-1] in stop_ids:
            return Generation(ids, log_probs, {"type": "stop", "matched": ids[-1]}, text)
        return Generation(ids, log_probs, {"type": "length", "length": len(ids)}, text)

    def _seed(self, inputs: ModelInputs, params: SamplingParams) -> int:
        """The request's sampling seed: given, or derived from the server seed and the input ids."""
        if params.sampling_seed is not None:
            return params.sampling_seed
        h = hashlib.blake2b(digest_size=8)
        h.update(str(self.seed).encode())
        h.update(",".join(map(str, inputs.input_ids)).encode())
        return int.from_bytes(h.digest(), "little") & (2**63 - 1)
