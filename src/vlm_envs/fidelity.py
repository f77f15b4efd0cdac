"""``ImageFidelityCheck``: does every image of every turn reach the training forward?

A forward pre-hook any trainer can attach to its policy model (Qwen-VL family)::

    from vlm_envs.fidelity import ImageFidelityCheck
    ImageFidelityCheck(model, processor, raise_on_error=True)

On every forward that carries ``input_ids`` (not a cached generation step) it reads, per sample,
each block of image pad tokens and the turn it stands in (turns are the user and tool messages,
from 1), and matches the blocks in order against the forward's images: ``image_grid_thw`` (an image
of grid ``(t, h, w)`` needs ``t*h*w / m²`` pads, ``m`` the merge size) and ``pixel_values``
(``sum(t*h*w)`` rows), or, where ``generate`` encoded the images before the prefill (transformers
5.24: ``mm_encoder_outputs``), each image's encoded features (one row per pad). A block with no image
left, a block of the wrong size, images without pads, or (with ``expect_image_each_turn``) a finished
turn after the first without any image is reported at once, naming the sample and the turn: logged,
and raised as :class:`ImageFidelityError` when asked. A trainer whose pipeline drops later-turn images
then fails on its first step instead of training on text alone ("loss decreases, no error").

A forward whose images cannot be told apart (pre-encoded features not split per image, as in
transformers' chunked prefill) is passed over: its report says why, and the reason is logged once.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

logger = logging.getLogger(__name__)

#: The chat-format tokens read (Qwen2-VL, Qwen2.5-VL, Qwen3-VL: see FACTS.md).
IMAGE_PAD, TURN_START, TURN_END = "<|image_pad|>", "<|im_start|>", "<|im_end|>"
#: The roles whose messages count as turns (Qwen3-VL wraps tool replies in a user turn).
OBSERVATION_ROLES = ("user", "tool")
#: Where a forward's images come from: raw pixels, or features ``generate`` encoded before the prefill.
PIXELS, ENCODED = "pixel_values", "mm_encoder_outputs"


class ImageFidelityError(RuntimeError):
    """A training forward whose image pad tokens and images do not match."""


@dataclasses.dataclass(frozen=True)
class Block:
    """One run of image pad tokens in a sample: where it starts, its size and its turn (from 1)."""

    start: int
    pads: int
    turn: int


@dataclasses.dataclass
class ForwardReport:
    """What one forward held: images matched to pad blocks, and the problems found.

    ``source`` is where its images came from (:data:`PIXELS` or :data:`ENCODED`); ``skipped`` is
    why the forward was passed over unchecked (``None`` when it was checked).
    """

    samples: int
    images: int
    problems: list[str]
    source: str = PIXELS
    skipped: str | None = None


def encoded_image_rows(mm_encoder_outputs: Mapping[str, Any]) -> list[int] | None:
    """The feature rows of each pre-encoded image, in order (``[]``: no image); ``None`` where the
    features are not split per image. transformers' Qwen-VL ``get_image_features`` returns
    ``pooler_output`` as one ``(pads, hidden)`` tensor per image."""
    image = mm_encoder_outputs.get("image")
    if image is None:
        return []
    pooled = image.get("pooler_output") if isinstance(image, Mapping) else None
    if isinstance(pooled, list | tuple) and all(isinstance(t, torch.Tensor) and t.dim() == 2 for t in pooled):
        return [int(t.shape[0]) for t in pooled]
    return None


class ImageFidelityCheck:
    """A forward pre-hook on ``model`` checking image pad tokens against the images, every forward.

    ``raise_on_error`` raises :class:`ImageFidelityError` on the first bad forward (else it logs);
    ``expect_image_each_turn`` also reports a finished turn after the first that holds no image (for
    envs that show one every turn, like ``image_probe`` and Sokoban). ``reports`` keeps one
    :class:`ForwardReport` per checked or skipped forward; :meth:`remove` detaches the hook.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        processor: Any,
        *,
        raise_on_error: bool = False,
        expect_image_each_turn: bool = False,
    ) -> None:
        tokenizer = getattr(processor, "tokenizer", processor)
        self.image_token_id = _token_id(tokenizer, getattr(processor, "image_token", None) or IMAGE_PAD)
        self.turn_start_id = _token_id(tokenizer, TURN_START)
        self.turn_end_id = _token_id(tokenizer, TURN_END)
        self.merge = int(getattr(getattr(processor, "image_processor", None), "merge_size", 2))
        self._roles = {role: tokenizer.encode(role, add_special_tokens=False) for role in OBSERVATION_ROLES}
        self.raise_on_error = raise_on_error
        self.expect_image_each_turn = expect_image_each_turn
        self.reports: list[ForwardReport] = []
        self._said: set[str] = set()
        self._handle = model.register_forward_pre_hook(self._hook, with_kwargs=True)

    @property
    def problems(self) -> list[str]:
        """Every problem found so far, in order."""
        return [p for report in self.reports for p in report.problems]

    def remove(self) -> None:
        """Detach the hook (calling it twice is fine)."""
        self._handle.remove()

    def _hook(self, module: torch.nn.Module, args: tuple, kwargs: dict[str, Any]) -> None:
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
            return  # inputs_embeds only: nothing to read
        encoded = kwargs.get(ENCODED)  # transformers 5.24's generate: images encoded before the prefill
        past = kwargs.get("cache", kwargs.get("past_key_values"))  # "cache" in transformers 5.24
        if past is not None and past.get_seq_length() > 0:
            if encoded:  # a later chunk of a chunked prefill: its features are cut by token, not by image
                self._record(_skipped(input_ids, "pre-encoded features of a later prefill chunk"))
            return  # a cached generation step: its images were checked with the prompt
        if encoded is not None:
            rows = encoded_image_rows(encoded)
            report = (
                _skipped(input_ids, f"{ENCODED} not split per image")
                if rows is None
                else self.check(input_ids, kwargs.get("attention_mask"), encoded_rows=rows)
            )
        else:
            report = self.check(
                input_ids, kwargs.get("attention_mask"), kwargs.get(PIXELS), kwargs.get("image_grid_thw")
            )
        self._record(report)

    def _record(self, report: ForwardReport) -> None:
        self.reports.append(report)
        if report.skipped is not None and report.skipped not in self._said:
            self._said.add(report.skipped)
            logger.warning("image fidelity: forwards passed over unchecked: %s", report.skipped)
        if report.problems:
            message = "image fidelity: " + "; ".join(report.problems)
            logger.error(message)
            if self.raise_on_error:
                raise ImageFidelityError(message)

    def check(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        pixel_values: torch.Tensor | None = None,
        image_grid_thw: torch.Tensor | None = None,
        *,
        encoded_rows: Sequence[int] | None = None,
    ) -> ForwardReport:
        """The report of one forward's inputs (what the hook runs). ``encoded_rows``: the feature
        rows of each pre-encoded image (:func:`encoded_image_rows`), read instead of the grids."""
        if encoded_rows is not None:
            needs = [(int(n), f"{n} pre-encoded feature rows") for n in encoded_rows]
        else:
            grids = (
                [] if image_grid_thw is None else [tuple(int(v) for v in g) for g in image_grid_thw.tolist()]
            )
            needs = [(math.prod(g) // self.merge**2, f"grid {list(g)}") for g in grids]
        samples = []
        for sample, row in enumerate(input_ids.tolist()):
            if attention_mask is not None and attention_mask.shape == input_ids.shape:  # not a cached step
                keep = attention_mask[sample].tolist()
                row = [t for t, m in zip(row, keep, strict=True) if m]
            samples.append(self._blocks(row))
        blocks = [block for sample_blocks, _ in samples for block in sample_blocks]
        if (
            encoded_rows is not None
            and len(needs) == 1 < len(blocks)
            and needs[0][0] == sum(b.pads for b in blocks)
        ):
            return _skipped(input_ids, f"{ENCODED} of several images in one tensor (a chunked prefill)")
        problems: list[str] = []
        matched = 0
        for sample, (sample_blocks, closed) in enumerate(samples):
            for block in sample_blocks:
                where = f"sample {sample}, turn {block.turn}"
                if matched >= len(needs):
                    problems.append(
                        f"{where}: {block.pads} image pad tokens but no image left in the forward "
                        f"({len(needs)} image(s) for the batch): an image of this turn was dropped"
                    )
                    continue
                need, image = needs[matched]
                matched += 1
                if block.pads != need:
                    problems.append(
                        f"{where}: {block.pads} image pad tokens, its image ({image}) needs {need}"
                    )
            if self.expect_image_each_turn:
                shown = {block.turn for block in sample_blocks}
                missing = [t for t in range(2, closed + 1) if t not in shown]
                if missing:
                    problems.append(
                        f"sample {sample}: turn(s) {', '.join(map(str, missing))} hold no image: "
                        "later-turn images were dropped"
                    )
        if matched < len(needs):
            problems.append(f"{len(needs) - matched} image(s) in the forward have no image pad tokens")
        if encoded_rows is None:
            problems += self._pixel_problems(pixel_values, image_grid_thw)
        source = PIXELS if encoded_rows is None else ENCODED
        return ForwardReport(input_ids.shape[0], min(matched, len(needs)), problems, source=source)

    def _pixel_problems(
        self, pixel_values: torch.Tensor | None, image_grid_thw: torch.Tensor | None
    ) -> list[str]:
        if image_grid_thw is None or not len(image_grid_thw):
            return []
        rows = int(image_grid_thw.prod(-1).sum())
        if pixel_values is None:
            return [f"{len(image_grid_thw)} image grid(s) but no pixel_values"]
        if pixel_values.shape[0] != rows:
            return [f"pixel_values has {pixel_values.shape[0]} rows, the images' grids need {rows}"]
        return []

    def _blocks(self, row: list[int]) -> tuple[list[Block], int]:
        """The sample's image pad blocks, each with its turn, and how many of its turns are finished
        (a row cut inside a turn, as a chunked prefill cuts it, may show that turn's image later)."""
        blocks: list[Block] = []
        turn = closed = 0
        start = None
        for i, token in enumerate([*row, None]):
            if token == self.image_token_id:
                if start is None:
                    start = i
                continue
            if start is not None:
                blocks.append(Block(start, i - start, max(turn, 1)))
                start = None
            if token == self.turn_start_id and self._is_observation(row, i + 1):
                turn += 1
            elif token == self.turn_end_id:
                closed = turn
        return blocks, closed

    def _is_observation(self, row: list[int], at: int) -> bool:
        return any(row[at : at + len(ids)] == ids for ids in self._roles.values())


def _skipped(input_ids: torch.Tensor, reason: str) -> ForwardReport:
    return ForwardReport(input_ids.shape[0], 0, [], source=ENCODED, skipped=reason)


def _token_id(tokenizer: Any, token: str) -> int:
    token_id = tokenizer.convert_tokens_to_ids(token)
    if not isinstance(token_id, int) or token_id == tokenizer.unk_token_id:
        raise ValueError(
            f"the tokenizer has no {token} token: ImageFidelityCheck reads the Qwen-VL chat format"
        )
    return token_id
