"""Filling slime's ``Sample`` from an episode, and reading back what an ABORTED one kept.

Part of the slime hook (:mod:`vlm_envs.rollout.slime`): the only other module that knows slime's Sample.
"""

from __future__ import annotations

from typing import Any

from vlm_envs.rollout.codec import ChatCodec, Encoded
from vlm_envs.rollout.prompt import FallbackPrompt
from vlm_envs.rollout.resume import ResumeRequest, segments_after
from vlm_envs.rollout.trajectory import Status, Trajectory
from vlm_envs.rollout.turns import TurnSample

#: Where an ABORTED sample keeps the images of the turns it kept (its ``images`` stay the task's), until
#: it resumes (slime's ``--partial-rollout``; slime reads only ``images`` of ``multimodal_inputs``).
KEPT_IMAGES_KEY = "vlm_envs_images"


def resume_request(sample: Any, previous: Any) -> ResumeRequest | None:
    """What an ABORTED sample handed back kept of its episode, to go on from its last finished turn;
    ``None`` (play from the start) for any other sample, or one that kept no resume state."""
    state = previous.get("resume") if isinstance(previous, dict) else None
    if state is None or getattr(sample.status, "name", None) != "ABORTED":
        return None
    return ResumeRequest(
        state=state,
        tokens=tuple(sample.tokens or ()),
        response_length=sample.response_length,
        loss_mask=tuple(sample.loss_mask or ()),
        log_probs=tuple(sample.rollout_log_probs or ()),
        images=tuple((sample.multimodal_inputs or {}).get(KEPT_IMAGES_KEY) or ()),
    )


def sample_prompt(sample: Any) -> FallbackPrompt | None:
    """The sample's own prompt, for an env whose first observation is empty.

    ``sample.prompt`` is the chat-templated text when slime's ``apply_chat_template`` is set (it is
    then encoded as it stands, by the processor call slime makes), else a message list (rendered
    with the template); images come from ``sample.multimodal_inputs["images"]``.
    """
    prompt = getattr(sample, "prompt", None)
    images = tuple((getattr(sample, "multimodal_inputs", None) or {}).get("images") or ())
    if isinstance(prompt, str) and (prompt or images):
        return FallbackPrompt(text=prompt, images=images)
    if isinstance(prompt, list) and prompt:
        return FallbackPrompt(messages=tuple(prompt), images=images)
    return None


def fail_sample(sample: Any, record: dict[str, Any], error: str, prompt: Encoded | None = None) -> Any:
    """Mark the sample FAILED with reward 0.0 and an empty, self-consistent response (after
    ``prompt``, the episode's encoded prompt, when there is one)."""
    record.update(status=Status.FAILED.value, error=error, reward=0.0)
    sample.status = sample.Status.FAILED
    sample.reward = 0.0
    if prompt is not None:
        sample.tokens = list(prompt.ids)
        sample.multimodal_train_inputs = prompt.train_inputs() or None
    if prompt is not None or not sample.tokens:
        sample.response, sample.response_length, sample.loss_mask, sample.rollout_log_probs = "", 0, [], []
    return sample


def fill_sample(
    args: Any,
    sample: Any,
    traj: Trajectory,
    codec: ChatCodec,
    reward: float | None,
    data: Trajectory | TurnSample | None = None,
    kept: int = 0,
) -> None:
    """Fill ``sample`` from ``data`` (the whole trajectory, or one of its turn samples) with the
    episode's status and ``reward`` (``None``, or an env without an episode reward: left to slime).
    ``kept``: response tokens the sample holds already (a resumed episode's), left as they are."""
    data = traj if data is None else data
    if not kept:
        sample.tokens = list(data.prompt_ids)
        sample.response, sample.response_length = "", 0
        sample.loss_mask, sample.rollout_log_probs = None, None
    new = segments_after(data.segments, kept)
    if hasattr(sample, "append_response_tokens"):  # texts made where the episode played
        texts = data.segment_texts(codec) if not kept else [None] * len(new)
        for seg, text in zip(new, texts, strict=True):
            sample.append_response_tokens(
                args,
                tokens=seg.ids,
                log_probs=seg.log_probs if seg.trainable else None,
                trainable=seg.trainable,
                text=text,
                update_terminal_info=False,
            )
    else:  # older slime: fill the fields directly
        sample.tokens += [t for seg in new for t in seg.ids]
        sample.response_length = data.response_length
        if kept:
            sample.loss_mask = [*sample.loss_mask[:kept], *data.loss_mask[kept:]]
            sample.rollout_log_probs = [*sample.rollout_log_probs[:kept], *data.log_probs[kept:]]
    if kept or not hasattr(sample, "append_response_tokens"):  # the text of every segment, whole
        sample.response = "".join(data.segment_texts(codec))
    if sample.loss_mask is None:  # older slime, or an empty response: slime still wants both lists
        sample.loss_mask, sample.rollout_log_probs = data.loss_mask, data.log_probs
    train_inputs = data.train_inputs()
    sample.multimodal_train_inputs = train_inputs or None
    inputs = {k: v for k, v in (sample.multimodal_inputs or {}).items() if k != KEPT_IMAGES_KEY}
    if data.images:  # an ABORTED sample keeps the task's images: a later call builds its env from them
        inputs[KEPT_IMAGES_KEY if traj.status is Status.ABORTED else "images"] = [
            p.image for p in data.images
        ]
    if inputs or sample.multimodal_inputs is not None:
        sample.multimodal_inputs = inputs
    sample.status = sample.Status[traj.status.name]
    if reward is not None and traj.reward_from_env:  # otherwise slime's own reward model sets it
        sample.reward = reward
