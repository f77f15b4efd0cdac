"""A client of vLLM's token-in/token-out endpoint, ``POST /inference/v1/generate``, under the reply contract.

vLLM expands images itself: it wants ONE image pad token per image, and it answers HTTP 200 with a
wrong prompt, not an error, when given already expanded pads, a wrong number of images, or pads
without an image (FACTS.md, vLLM 0.32 on CPU). So :class:`VLLMEngine` takes the training ids the
episode loop sends every engine (each image expanded to its pad run), checks that the pad runs and
the images agree, sends one pad per run, asks vLLM for the prompt it built (``return_token_ids``)
and checks that it equals the ids it was given: a model that saw another prompt than the trainer
will train on ends the episode instead of training on it.

Wire facts, from vLLM 0.32's ``entrypoints/scale_out/token_in_token_out/protocol.py``: the request
is ``{token_ids, content_parts: [{"type": "image_url", "url": DATA_URI}], sampling_params,
return_token_ids}``; the reply ``{prompt_token_ids, choices: [{token_ids, logprobs: {content:
[{token_id, logprob}]}, finish_reason, stop_reason}]}``. The server needs ``--enable-scale-out``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vlm_envs.rollout.engines.contract import EngineContractError, EngineOutput, PermanentEngineError
from vlm_envs.rollout.engines.http import HttpEngine
from vlm_envs.rollout.engines.image_uris import ImageInput

#: SGLang sampling parameter names the episode loop uses -> vLLM's ``SamplingParams`` names;
#: any other key is sent as it is (vLLM answers HTTP 400 for one it does not know).
_RENAMED = {"max_new_tokens": "max_tokens", "sampling_seed": "seed"}
#: vLLM's finish reasons (``vllm/v1/engine``: FINISH_REASON_STRINGS; "error" is an HTTP 500) -> ours.
#: "repetition" is vLLM's repetition detector ending the text: a stop, not a cut budget.
_FINISH = {"stop": "stop", "length": "length", "abort": "abort", "repetition": "stop"}
#: Body bytes per prompt token for the prompt ids vLLM echoes (``return_token_ids``).
_BYTES_PER_PROMPT_TOKEN = 8


def vllm_sampling_params(sampling_params: Mapping[str, Any]) -> dict[str, Any]:
    """SGLang-style ``sampling_params`` as vLLM's, asking for the sampled tokens' log probs."""
    params = {_RENAMED.get(key, key): value for key, value in sampling_params.items()}
    params["logprobs"] = 0  # the sampled token's log prob, no alternatives
    return params


def collapse_pads(input_ids: Sequence[int], pad_id: int | None) -> tuple[list[int], int]:
    """``input_ids`` with each run of ``pad_id`` cut to one pad, and how many runs there were."""
    out: list[int] = []
    runs = 0
    previous = None
    for token in input_ids:
        if token == pad_id:
            if previous != pad_id:
                out.append(token)
                runs += 1
        else:
            out.append(token)
        previous = token
    return out, runs


class VLLMEngine(HttpEngine):
    """vLLM's ``/inference/v1/generate`` as an :class:`~vlm_envs.rollout.engines.Engine`.

    ``image_token_id`` is the model's image pad token (``<|image_pad|>``; ``ChatCodec.image_token_id``),
    ``None`` for a text-only model, which then takes no images. Limits,
    retries and deadlines are :class:`~vlm_envs.rollout.engines.HttpEngine`'s. A call whose images
    and pad runs disagree is refused before sending (:class:`PermanentEngineError`); a reply whose
    prompt differs from ``input_ids`` breaks the contract (:class:`EngineContractError`).
    """

    path, kind = "/inference/v1/generate", "vllm"

    def __init__(self, base_url: str, *, image_token_id: int | None, **limits: Any) -> None:
        super().__init__(base_url, **limits)
        self.image_token_id = image_token_id

    async def generate(
        self, input_ids: Sequence[int], images: Sequence[ImageInput], sampling_params: Mapping[str, Any]
    ) -> EngineOutput:
        """Generate from the training ids ``input_ids``; images go as data URIs in pad-run order."""
        ids = list(input_ids)
        token_ids, runs = collapse_pads(ids, self.image_token_id)
        if runs != len(images):
            raise PermanentEngineError(
                f"{self.name}: {len(images)} image(s) for {runs} run(s) of image pad {self.image_token_id} "
                "in the prompt; vLLM would answer from a wrong prompt, so nothing was sent"
            )
        payload: dict[str, Any] = {
            "token_ids": token_ids,
            "sampling_params": vllm_sampling_params(sampling_params),
            "return_token_ids": True,
        }
        if images:
            payload["content_parts"] = [
                {"type": "image_url", "url": uri} for uri in await self._images(images)
            ]
        limit = self.body_limit(sampling_params) + _BYTES_PER_PROMPT_TOKEN * len(ids)
        reply = await self._post(payload, limit)
        return parse_vllm_reply(reply, ids, self.name)


def parse_vllm_reply(body: Any, input_ids: Sequence[int], engine: str = "vllm") -> EngineOutput:
    """An :class:`EngineOutput` from a decoded reply, after checking its shape and its prompt.

    Values are left as the server sent them for :class:`~vlm_envs.rollout.engines.ReplyContract`.
    """
    try:
        choice = body["choices"][0]
        token_ids = choice["token_ids"]
        content = (choice.get("logprobs") or {}).get("content")
        reason = choice.get("finish_reason")
        prompt = body.get("prompt_token_ids")
        stop = choice.get("stop_reason")
    except (KeyError, IndexError, TypeError, AttributeError) as err:
        detail = f"malformed reply ({type(err).__name__}: {err})"
        raise EngineContractError(engine, "reply shape", detail) from err
    if not isinstance(token_ids, list):
        raise EngineContractError(engine, "reply shape", f"choices[0].token_ids is {str(token_ids)[:80]}")
    if not isinstance(content, list):
        raise EngineContractError(
            engine, "reply shape", "no logprobs.content list (did sampling_params.logprobs reach the server?)"
        )
    if not all(isinstance(c, dict) and "logprob" in c for c in content):
        i = next(i for i, c in enumerate(content) if not (isinstance(c, dict) and "logprob" in c))
        raise EngineContractError(
            engine, "one log prob per token id", f"logprobs.content[{i}] has no logprob"
        )
    # lengths are ReplyContract's to compare; here each log prob must be for the token beside it
    wrong = [i for i, (c, t) in enumerate(zip(content, token_ids, strict=False)) if c.get("token_id") != t]
    if wrong:
        i = wrong[0]
        detail = f"logprobs.content[{i}] is for token {content[i].get('token_id')!r}, not {token_ids[i]!r}"
        raise EngineContractError(engine, "one log prob per token id", detail)
    if prompt != list(input_ids):
        raise EngineContractError(
            engine, "the prompt the engine saw is the trajectory's", _prompt_diff(prompt, input_ids)
        )
    return EngineOutput(
        token_ids=token_ids,
        log_probs=[c["logprob"] for c in content],
        finish_reason=_FINISH.get(reason, reason),
        matched_stop=stop if isinstance(stop, int | str) and not isinstance(stop, bool) else None,
    )


def _prompt_diff(prompt: Any, input_ids: Sequence[int]) -> str:
    if not isinstance(prompt, list):
        return "the reply has no prompt_token_ids (is the server vLLM with --enable-scale-out?)"
    first = next(
        (i for i, (a, b) in enumerate(zip(prompt, input_ids, strict=False)) if a != b),
        min(len(prompt), len(input_ids)),
    )
    return (
        f"vLLM built a prompt of {len(prompt)} tokens for the trajectory's {len(input_ids)}, first "
        f"different at position {first} (its processor resizes images differently, or the pads were not "
        "one per image)"
    )
