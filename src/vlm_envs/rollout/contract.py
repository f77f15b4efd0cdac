"""The Sample contract, stated once: what every trajectory and every Sample handed to a trainer holds.

- token ids are ints in ``[0, vocab)``;
- ``len(loss_mask) == len(log_probs) == response_length``; the mask is 0/1; log probs are finite and
  <= 0 where the mask is 1 and exactly 0.0 where it is 0 (but on the tokens a resumed episode kept, whose
  mask a trainer may have zeroed);
- images (Qwen-VL, merge size m): one run of ``prod(grid) / m**2`` pad tokens per image, in the order
  of the grid rows; no image without its tokens, no pad run without its image;
  ``pixel_values.shape[0] == sum(prod(grid))``;
- no image special token among the generated (mask-1) tokens; a Sample's status is never PENDING.

:func:`trajectory_violations` and :func:`sample_violations` list what a value breaks; :func:`enforce`
runs at the end of every episode and every filled Sample. A violation is a bug of this library: the
episode is failed with an empty response, and where ``VLM_ENVS_CONTRACT_LOG`` names a file (the test
suite sets it) the violation is appended there, from any process, so no test can miss one.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

#: File the violations are appended to, one JSON line each (set by the test suite).
LOG_ENV = "VLM_ENVS_CONTRACT_LOG"


@dataclasses.dataclass(frozen=True)
class TokenSpace:
    """What the contract needs to know about the model's tokens (from a :class:`ChatCodec`)."""

    vocab_size: int
    image_token_id: int | None = None
    special_image_ids: frozenset[int] = frozenset()
    merge_size: int = 2

    @classmethod
    def of(cls, codec: Any) -> TokenSpace:
        vision = getattr(codec, "vision", None)
        return cls(
            vocab_size=len(codec.tokenizer),
            image_token_id=codec.image_token_id,
            special_image_ids=frozenset(codec.special_image_ids),
            merge_size=vision.merge_size if vision is not None else 2,
        )


def token_violations(
    prompt: Sequence[int],
    response: Sequence[int],
    loss_mask: Sequence[int],
    log_probs: Sequence[float],
    grids: Sequence[Sequence[int]],
    pixel_rows: int | None,
    space: TokenSpace,
    kept: int = 0,
) -> list[str]:
    """What the token-level data breaks (empty when it keeps the contract). The first ``kept`` response
    tokens are a resumed episode's from before its abort: where a trainer zeroed their mask (slime's
    ``--mask-offpolicy-in-partial-rollout``), a generated token keeps its log prob (finite, <= 0)."""
    found: list[str] = []
    tokens = [*prompt, *response]
    ids = _as_ids(tokens, space.vocab_size)
    if ids is None:
        bad = next(t for t in tokens if type(t) is not int or not 0 <= t < space.vocab_size)
        found.append(f"token id {bad!r} is not an int in [0, {space.vocab_size})")
    n = len(response)
    if not len(loss_mask) == len(log_probs) == n:
        found.append(f"loss_mask {len(loss_mask)}, log_probs {len(log_probs)}, response {n}: lengths differ")
        return found
    if any(m not in (0, 1) for m in loss_mask):
        found.append("loss_mask holds a value other than 0 and 1")
    for i, (m, lp) in enumerate(zip(loss_mask, log_probs, strict=True)):
        if m == 1 and not (isinstance(lp, float | int) and math.isfinite(lp) and lp <= 0.0):
            found.append(f"response token {i} is trainable with log prob {lp!r} (must be finite and <= 0)")
            break
        if m == 0 and lp != 0.0 and not (i < kept and isinstance(lp, float) and math.isfinite(lp) and lp < 0):
            found.append(f"response token {i} is not trainable but has log prob {lp!r} (must be 0.0)")
            break
    generated_special = [
        t for t, m in zip(response, loss_mask, strict=True) if m == 1 and t in space.special_image_ids
    ]
    if generated_special:
        found.append(f"a trainable token is an image special token ({generated_special[0]})")
    if ids is not None:
        found += _image_violations(ids, grids, pixel_rows, space)
    return found


def _as_ids(tokens: list[Any], vocab_size: int) -> np.ndarray | None:
    """``tokens`` as an int64 array if every one is an int (not a bool) in ``[0, vocab_size)``."""
    if not tokens:
        return np.zeros(0, dtype=np.int64)
    if set(map(type, tokens)) != {int}:
        return None
    try:
        ids = np.array(tokens, dtype=np.int64)
    except OverflowError:
        return None
    return ids if ids.min() >= 0 and ids.max() < vocab_size else None


def _image_violations(
    ids: np.ndarray, grids: Sequence[Sequence[int]], pixel_rows: int | None, space: TokenSpace
) -> list[str]:
    pad = np.concatenate(([0], (ids == space.image_token_id).view(np.int8), [0]))
    edges = np.flatnonzero(np.diff(pad))
    runs = (edges[1::2] - edges[::2]).tolist()
    expected = [math.prod(g) // space.merge_size**2 for g in grids]
    found = []
    if runs != expected:
        found.append(f"image pad runs {runs[:8]} do not match the grids' token counts {expected[:8]}")
    if pixel_rows is not None and pixel_rows != sum(math.prod(g) for g in grids):
        found.append(f"{pixel_rows} pixel rows for grids totalling {sum(math.prod(g) for g in grids)}")
    return found


def trajectory_violations(traj: Any, space: TokenSpace) -> list[str]:
    """What a :class:`~vlm_envs.rollout.trajectory.Trajectory` (or one of its turn samples) breaks."""
    grids = [image.grid_thw for image in traj.images]
    return token_violations(
        traj.prompt_ids, traj.response_ids, traj.loss_mask, traj.log_probs, grids, None, space
    )


def sample_violations(sample: Any, space: TokenSpace, kept: int = 0) -> list[str]:
    """What a slime ``Sample`` breaks (its response is the last ``response_length`` tokens); ``kept``: see
    :func:`token_violations`."""
    n = int(sample.response_length or 0)
    tokens = list(sample.tokens or [])
    if n > len(tokens):
        return [f"response_length {n} exceeds the {len(tokens)} tokens"]
    inputs = sample.multimodal_train_inputs or {}
    grid = inputs.get("image_grid_thw")
    grids = grid.tolist() if grid is not None else []
    pixels = inputs.get("pixel_values")
    found = token_violations(
        tokens[: len(tokens) - n],
        tokens[len(tokens) - n :],
        list(sample.loss_mask or []),
        list(sample.rollout_log_probs or []),
        grids,
        None if pixels is None else int(pixels.shape[0]),
        space,
        kept,
    )
    if getattr(sample.status, "name", None) == "PENDING":
        found.append("status is PENDING")
    if set(inputs) - {"pixel_values", "image_grid_thw"}:
        found.append(f"multimodal_train_inputs holds {sorted(inputs)}, not only pixel_values, image_grid_thw")
    return found


def enforce(traj: Any, space: TokenSpace) -> list[str]:
    """Check a finished trajectory; one that breaks the contract keeps only its prompt and FAILS.

    Returns the violations (reported, see :func:`report`).
    """
    violations = trajectory_violations(traj, space)
    if not traj.history.full:  # a windowed episode trains on its turn samples: each keeps the contract
        for sample in traj.turn_samples():
            violations += [f"turn {sample.turn}: {v}" for v in trajectory_violations(sample, space)]
    if violations:
        report("trajectory", violations)
        traj.discard_response(f"contract: {violations[0]}")
        if trajectory_violations(traj, space):  # the prompt itself is bad: nothing can be kept
            traj.discard_prompt()
    return violations


def report(where: str, violations: list[str]) -> None:
    """Append ``violations`` to the ``VLM_ENVS_CONTRACT_LOG`` file, if one is named."""
    path = os.environ.get(LOG_ENV)
    if path and violations:
        line = json.dumps({"where": where, "pid": os.getpid(), "violations": violations})
        with open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")
