"""PolyominoPacking's answers, one action a turn: ``<answer>piece B, rotate 90, at row 2 col 3</answer>``
(``mirror`` before ``rotate`` where mirroring is allowed: ``piece B, mirror, rotate 90, at row 2 col 3``)
or ``<answer>remove B</answer>``. Rows and columns count from 1 at the top left."""

from __future__ import annotations

import re
from typing import NamedTuple

from vlm_envs.envs.answers import answer_block, shown
from vlm_envs.envs.polyomino_packing.shapes import ROTATIONS

_PLACE = re.compile(
    r"(?:piece\s*)?([a-z])\s*[,;:]?\s*"
    r"(?:(mirror(?:ed)?)\s*[,;]?\s*)?"
    r"(?:rotat(?:e|ed|ion)\s*(?:by\s*)?([0-9]{1,4})\s*(?:°|deg(?:rees?)?)?\s*(?:clockwise|cw)?\s*[,;]?\s*)?"
    r"(mirror(?:ed)?\s*[,;]?\s*)?"
    r"(?:at\s*)?row\s*([0-9]{1,4})\s*[,;]?\s*(?:col(?:umn)?)\s*([0-9]{1,4})",
    re.IGNORECASE | re.ASCII,
)
_REMOVE = re.compile(r"remove\s*(?:piece\s*)?([a-z])", re.IGNORECASE | re.ASCII)
_TAIL = " ."
_SPACES = re.compile(r"\s+")


class Action(NamedTuple):
    """One action: place ``piece`` (0 is A) turned ``degrees`` clockwise, mirrored first where ``mirror``,
    its bounding box's top-left cell at (``row``, ``col``), 0-based; or, where ``remove``, take it back."""

    piece: int
    remove: bool = False
    degrees: int = 0
    mirror: bool = False
    row: int = 0
    col: int = 0


class ParsedAction(NamedTuple):
    """The action when the answer is well formed, else ``error`` says why."""

    action: Action | None
    error: str | None


def parse_action(text: str) -> ParsedAction:
    """The one action in the last ``<answer>`` block. A letter names a piece whether or not the level has
    it, and rows and columns may lie off the board (the env refuses such actions as invalid moves)."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedAction(None, block.error)
    content = _SPACES.sub(" ", block.content).strip(_TAIL)  # one space a gap: bounded regex work
    removal = _REMOVE.fullmatch(content)
    if removal is not None:
        return ParsedAction(Action(ord(removal.group(1).upper()) - ord("A"), remove=True), None)
    match = _PLACE.fullmatch(content)
    if match is None:
        return ParsedAction(
            None,
            f"{shown(content, 40, '_+-, ')!r} is not one action (write e.g. piece B, rotate 90, at row 2 "
            "col 3, or remove B)",
        )
    letter, mirror, degrees, late_mirror, row, col = match.groups()
    if late_mirror:
        return ParsedAction(None, "write mirror before rotate: a piece is flipped first, then turned")
    turn = int(degrees or 0)
    if turn not in ROTATIONS:
        return ParsedAction(None, f"rotate {turn} is not a quarter turn (write 0, 90, 180 or 270)")
    piece = ord(letter.upper()) - ord("A")
    return ParsedAction(Action(piece, False, turn, bool(mirror), int(row) - 1, int(col) - 1), None)


def letter(piece: int) -> str:
    """A piece's name: A for piece 0."""
    return chr(ord("A") + piece)


def format_action(action: Action) -> str:
    """An answer block, e.g. ``<answer>piece B, rotate 90, at row 2 col 3</answer>``."""
    return f"<answer>{describe(action)}</answer>"


def describe(action: Action) -> str:
    """The action as an answer writes it."""
    name = letter(action.piece)
    if action.remove:
        return f"remove {name}"
    flip = "mirror, " if action.mirror else ""
    return f"piece {name}, {flip}rotate {action.degrees}, at row {action.row + 1} col {action.col + 1}"
