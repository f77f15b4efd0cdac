"""SGLang's native ``POST /generate`` with ``return_logprob``: returned token ids come from
``meta_info.output_token_logprobs``; returned text is never re-tokenized.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vlm_envs.rollout.engines.contract import EngineContractError, EngineOutput
from vlm_envs.rollout.engines.http import HttpEngine
from vlm_envs.rollout.engines.image_uris import ImageInput


def parse_generate_response(body: Any, engine: str = "sglang") -> EngineOutput:
    """An :class:`EngineOutput` from a decoded ``/generate`` reply, values as the server sent them.

    Only the reply's shape is checked here (:class:`EngineContractError` if it is malformed); its
    values are :class:`ReplyContract`'s to check, so a float or bool token id is never made an int.
    """
    try:
        meta = body["meta_info"]
        finish = meta["finish_reason"] or {}
        kind = finish["type"]
        triples = meta.get("output_token_logprobs")
        text = body.get("text", "")
    except (KeyError, TypeError, AttributeError) as err:
        detail = f"malformed /generate reply ({type(err).__name__}: {err})"
        raise EngineContractError(engine, "reply shape", detail) from err
    if triples is None and kind == "abort":
        triples = []
    if not isinstance(triples, list):
        detail = (
            "malformed /generate reply: no output_token_logprobs list (did return_logprob reach the server?)"
        )
        raise EngineContractError(engine, "reply shape", detail)
    if not all(isinstance(t, list) and len(t) >= 2 for t in triples):
        i, t = next((i, t) for i, t in enumerate(triples) if not (isinstance(t, list) and len(t) >= 2))
        detail = f"output_token_logprobs[{i}] is {str(t)[:80]}, not [log prob, token id, ...]"
        raise EngineContractError(engine, "one log prob per token id", detail)
    if not isinstance(text, str):
        raise EngineContractError(
            engine, "reply shape", f"reply text is a {type(text).__name__}, not a string"
        )
    matched = finish.get("matched") if isinstance(finish, dict) else None
    return EngineOutput(
        token_ids=[t[1] for t in triples],
        log_probs=[t[0] for t in triples],
        finish_reason=kind,
        text=text,
        matched_stop=matched if isinstance(matched, int | str) else None,
    )


class SGLangEngine(HttpEngine):
    """A client of SGLang's native ``POST /generate`` with ``return_logprob`` (limits: :class:`HttpEngine`).

    ``timeout``, the single limit of earlier releases, is refused with a ``TypeError`` that names
    ``read_timeout`` and ``turn_timeout``, which replaced it.
    """

    path, kind = "/generate", "sglang"

    def __init__(self, base_url: str, *, timeout: float | None = None, **limits: Any) -> None:
        if timeout is not None:  # the one timeout of earlier releases, split in two
            raise TypeError(
                f"SGLangEngine no longer takes timeout={timeout!r}: pass read_timeout= (seconds an attempt "
                "may make no progress, default 60) and turn_timeout= (seconds the whole call may take, "
                "retries included, default 300)"
            )
        super().__init__(base_url, **limits)

    async def generate(
        self, input_ids: Sequence[int], images: Sequence[ImageInput], sampling_params: Mapping[str, Any]
    ) -> EngineOutput:
        """Generate from ``input_ids``; images go as data URIs in placeholder order."""
        payload: dict[str, Any] = {
            "input_ids": list(input_ids),
            "sampling_params": dict(sampling_params),
            "return_logprob": True,
        }
        if images:
            payload["image_data"] = await self._images(images)
        reply = await self._post(payload, self.body_limit(sampling_params))
        return parse_generate_response(reply, self.name)
