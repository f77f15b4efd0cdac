"""``ImageFidelityCheck``: does every image of every turn reach the training forward?

A forward pre-hook any trainer can attach to its policy model (Qwen-VL family)::

    from vlm_envs.fidelity import ImageFidelityCheck
    ImageFidelityCheck(model, processor, raise_on_error=True)

On every forward that carries ``input_ids`` (not a cached generation step) it reads, per sample,
each block of image pad tokens and the turn it stands in (turns are the user and tool messages,
from 1), and matches the blocks in order against ``image_grid_thw`` (an image of grid ``(t, h, w)``
needs ``t*h*w / m²`` pads, ``m`` the merge size) and ``pixel_values`` (``sum(t*h*w)`` rows). A block
with no image left, a block of the wrong size, images without pads, or (with
``expect_image_each_turn``) a turn after the first without any image is reported at once, naming
the sample and the turn: logged, and raised as :class:`ImageFidelityError` when asked. A trainer
whose pipeline drops later-turn images then fails on its first step instead of training on text
alone ("loss decreases, no error").
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

import torch

logger = logging.getLogger(__name__)

#: The chat-format tokens read (Qwen2-VL, Qwen2.5-VL, Qwen3-VL: see FACTS.md).
IMAGE_PAD, TURN_START = "<|image_pad|>", "<|im_start|>"
#: The roles whose messages count as turns (Qwen3-VL wraps tool replies in a user turn).
OBSERVATION_ROLES = ("user", "tool")


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
    """What one forward held: images matched to pad blocks, and the problems found."""

    samples: int
    images: int
    problems: list[str]


class ImageFidelityCheck:
    """A forward pre-hook on ``model`` checking image pad tokens against the images, every forward.

    ``raise_on_error`` raises :class:`ImageFidelityError` on the first bad forward (else it logs);
    ``expect_image_each_turn`` also reports a turn after the first that holds no image (for envs that
    show one every turn, like ``image_probe`` and Sokoban). ``reports`` keeps one
    :class:`ForwardReport` per checked forward; :meth:`remove` detaches the hook.
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
        self.merge = int(getattr(getattr(processor, "image_processor", None), "merge_size", 2))
        self._roles = {role: tokenizer.encode(role, add_special_tokens=False) for role in OBSERVATION_ROLES}
        self.raise_on_error = raise_on_error
        self.expect_image_each_turn = expect_image_each_turn
        self.reports: list[ForwardReport] = []
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
        past = kwargs.get("past_key_values")
        if past is not None and past.get_seq_length() > 0:
            return  # a cached generation step: its images were checked with the prompt
        report = self.check(
            input_ids, kwargs.get("attention_mask"), kwargs.get("pixel_values"), kwargs.get("image_grid_thw")
        )
        self.reports.append(report)
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
    ) -> ForwardReport:
        """The report of one forward's inputs (what the hook runs)."""
        grids = [] if image_grid_thw is None else [tuple(int(v) for v in g) for g in image_grid_thw.tolist()]
        problems: list[str] = []
        matched = 0
        for sample, row in enumerate(input_ids.tolist()):
            if attention_mask is not None and attention_mask.shape == input_ids.shape:  # not a cached step
                keep = attention_mask[sample].tolist()
                row = [t for t, m in zip(row, keep, strict=True) if m]
            blocks, turns = self._blocks(row)
            for block in blocks:
                where = f"sample {sample}, turn {block.turn}"
                if matched >= len(grids):
                    problems.append(
                        f"{where}: {block.pads} image pad tokens but no image left in the forward "
                        f"({len(grids)} image(s) for the batch): an image of this turn was dropped"
                    )
                    continue
                grid = grids[matched]
                matched += 1
                need = math.prod(grid) // self.merge**2
                if block.pads != need:
                    problems.append(
                        f"{where}: {block.pads} image pad tokens, its image (grid {list(grid)}) needs {need}"
                    )
            if self.expect_image_each_turn:
                shown = {block.turn for block in blocks}
                missing = [t for t in range(2, turns + 1) if t not in shown]
                if missing:
                    problems.append(
                        f"sample {sample}: turn(s) {', '.join(map(str, missing))} hold no image: "
                        "later-turn images were dropped"
                    )
        if matched < len(grids):
            problems.append(f"{len(grids) - matched} image(s) in the forward have no image pad tokens")
        if pixel_values is not None and grids and pixel_values.shape[0] != sum(math.prod(g) for g in grids):
            problems.append(
                f"pixel_values has {pixel_values.shape[0]} rows, the images' grids need "
                f"{sum(math.prod(g) for g in grids)}"
            )
        elif pixel_values is None and grids:
            problems.append(f"{len(grids)} image grid(s) but no pixel_values")
        return ForwardReport(samples=input_ids.shape[0], images=min(matched, len(grids)), problems=problems)

    def _blocks(self, row: list[int]) -> tuple[list[Block], int]:
        """The sample's image pad blocks, each with its turn, and how many turns the sample has."""
        blocks: list[Block] = []
        turn = 0
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
        return blocks, turn

    def _is_observation(self, row: list[int], at: int) -> bool:
        return any(row[at : at + len(ids)] == ids for ids in self._roles.values())


def _token_id(tokenizer: Any, token: str) -> int:
    token_id = tokenizer.convert_tokens_to_ids(token)
    if not isinstance(token_id, int) or token_id == tokenizer.unk_token_id:
        raise ValueError(
            f"the tokenizer has no {token} token: ImageFidelityCheck reads the Qwen-VL chat format"
        )
    return token_id
