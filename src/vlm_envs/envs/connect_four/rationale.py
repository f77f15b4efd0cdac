"""Connect Four's oracle rationale: a win now and where its four lies; else the engine's threat it must
block, how many of its moves the chosen column wins in (whatever the engine replies, or against this
engine's known replies past its horizon) and the cells that column threatens; or, where no win is found,
that the column is a plain search's choice."""

from __future__ import annotations

from vlm_envs.envs.connect_four.board import (
    Geometry,
    cell_words,
    cells,
    four_through,
    landing,
    line_words,
    winning_cells,
)
from vlm_envs.envs.phrasing import series

#: Threatened cells a rationale names at most.
MAX_THREATS_NAMED = 3


def explain(
    g: Geometry, you: int, engine: int, column: int, moves: int | None, horizon: int, depth: int
) -> str:
    """The rationale for dropping a stone into ``column`` (0 the leftmost), the first move of a win in
    ``moves`` of your moves (``None``: no win found; the column is a ``depth``-ply search's choice)."""
    mask = you | engine
    move = landing(g, mask, column)
    name = f"Column {column + 1}"
    if moves == 1:
        line = four_through(g, you | move, move)
        return f"{name} makes four in a row {line_words(g, line)}: I win now."
    if move & winning_cells(g, engine, mask):
        text = f"The engine would make four at {cell_words(g, move)} next, so I block it."
    else:
        text = "No column wins at once."
    if moves is None:
        return (
            f"{text} I find no win within my search, so I play {name.lower()}, a {depth}-ply search's choice."
        )
    how = "whatever the engine replies" if moves <= horizon else "against this engine's replies"
    text += f" {name} wins in {moves} of my moves {how}, and no column wins sooner."
    threats = cells(winning_cells(g, you | move, mask | move))[:MAX_THREATS_NAMED]
    if threats:
        text += f" It threatens four at {series(cell_words(g, cell) for cell in threats)}."
    return text
