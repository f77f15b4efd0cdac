"""The FrozenLake env: walk over a frozen lake from the start to the goal without falling into a hole.

gymnasium's toy-text FrozenLake, as VAGEN and ROLL show it to a VLM: each turn the model answers 1 to
``max_actions_per_turn`` moves in ``<answer>...</answer>``; a malformed answer costs the turn (no move)
and the next observation says why. A move off the edge stays put (gymnasium). On slippery ice each press
goes the way pressed with ``success_rate``, else to a perpendicular side (gymnasium's rule; the slips
are drawn from the seed). The episode ends in a hole (terminated, reward 0.0), on the goal (terminated,
reward 1.0), or when ``max_moves`` moves or the turn cap are used (truncated).

The oracle walks a safe shortest path; on slippery ice it foresees the seeded slips and presses what
makes each move go its way, so it wins every seed, but its presses there are no policy a model can learn
(make SFT data from non-slippery lakes).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image

from vlm_envs.envs.board import BoardEnv, ending
from vlm_envs.envs.frozen_lake import rationale
from vlm_envs.envs.frozen_lake.actions import ACTION_NAMES, format_actions, parse_actions
from vlm_envs.envs.frozen_lake.config import FrozenLakeConfig
from vlm_envs.envs.frozen_lake.lake import (
    Cell,
    Lake,
    generate_lake,
    gymnasium_lake,
    moved,
    shortest_path,
    slip_offset,
)
from vlm_envs.envs.frozen_lake.render import lake_image, lake_text, with_player
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import UNREACHABLE, turns_for


@dataclasses.dataclass
class _Episode:
    lake: Lake
    picture: Image.Image | None
    cell: Cell
    optimal_moves: int
    slip_rng: np.random.Generator
    draws: list[float] = dataclasses.field(default_factory=list)
    moves: int = 0
    slips: int = 0
    turns: int = 0
    done: bool = False

    @property
    def success(self) -> bool:
        return self.cell == self.lake.goal

    @property
    def fell(self) -> bool:
        return self.lake.is_hole(self.cell)

    def draw(self, k: int) -> float:
        """The uniform draw that decides the slip of move ``k`` (0-based) of the episode."""
        while len(self.draws) <= k:
            self.draws.append(float(self.slip_rng.random()))
        return self.draws[k]


class FrozenLakeEnv(BoardEnv[FrozenLakeConfig, _Episode]):
    """FrozenLake: cross a frozen lake to the goal without falling into a hole (gymnasium's rules)."""

    config_class = FrozenLakeConfig
    board_heading = "The lake now:"

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A lake drawn from the seed (or gymnasium's fixed map); ``options`` override config fields once."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        if cfg.map_name == "random":
            lake = generate_lake(
                cfg.size, cfg.frozen_probability, cfg.placement == "corners", cfg.min_path, seed
            )
        else:
            lake = gymnasium_lake(cfg.map_name)
        optimal = len(shortest_path(lake, lake.start))
        picture = lake_image(lake, cfg.cell_size) if cfg.shows_image else None
        slip_rng = np.random.default_rng([seed, 0x5119])
        self._ep = _Episode(lake, picture, lake.start, optimal, slip_rng)
        info = {
            "seed": seed,
            "lake": list(lake.rows),
            "start": list(lake.start),
            "goal": list(lake.goal),
            "optimal_moves": optimal,
            "slippery": cfg.slippery,
        }
        return self._observation(self._instructions()), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Play the moves in the reply's ``<answer>`` block (or spend the turn on a format error)."""
        ep = self._playing()
        cfg = self.config
        parsed = parse_actions(response_text, cfg.max_actions_per_turn)
        ep.turns += 1
        pressed, went, bumped = [], [], 0
        for action in parsed.actions:
            direction = (action + self._offset(ep.moves)) % 4
            nxt = moved(ep.lake.size, ep.cell, direction)
            ep.moves += 1
            ep.slips += direction != action
            bumped += nxt == ep.cell
            pressed.append(action)
            went.append(direction)
            ep.cell = nxt
            if ep.success or ep.fell or ep.moves >= cfg.max_moves:
                break
        success, fell = ep.success, ep.fell
        truncated = not (success or fell) and (ep.moves >= cfg.max_moves or ep.turns >= cfg.turn_limit)
        ep.done = success or fell or truncated
        metrics: dict[str, float | int | bool] = {
            "format_valid": parsed.error is None,
            "action_valid": parsed.error is None and bumped == 0,
            "moves": ep.moves,
            "slips": ep.slips,
        }
        if ep.done:
            metrics.update(success=success, fell_in_hole=fell, optimal_moves=ep.optimal_moves)
        obs = self._observation(self._feedback(parsed.error, pressed, went, bumped))
        info = {"pressed": [ACTION_NAMES[a] for a in pressed], "moved": [ACTION_NAMES[d] for d in went]}
        info.update(error=parsed.error, cell=list(ep.cell))
        return self._binary_step(obs, success, truncated, metrics, info, terminated=success or fell)

    def oracle_response(self) -> str | None:
        """The presses making the next moves of a safe shortest path (slips foreseen); None when done."""
        plan = self._plan()
        return None if plan is None else format_actions(plan[2] if plan[2] is not None else plan[1])

    def oracle_rationale(self) -> str | None:
        """Where the goal is, the holes around, and the moves the oracle makes now; None when done."""
        plan = self._plan()
        if plan is None:
            return None
        ep = self._episode()
        return rationale.explain(ep.lake, ep.cell, *plan)

    def random_response(self, rng: random.Random) -> str:
        """A well-formed answer of random moves."""
        picked = [rng.choice(ACTION_NAMES) for _ in range(rng.randint(1, self.config.max_actions_per_turn))]
        sep = rng.choice([", ", " ", "; "])
        return f"<think>I will try {picked[0]}.</think>\n<answer>{sep.join(picked)}</answer>"

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """The lake in the text view's symbols, the player's tile marked (``X`` in a hole)."""
        return lake_text(ep.lake, ep.cell)

    def _distance(self, ep: _Episode) -> int:
        """Turns along a safe shortest path (on slippery ice, the oracle's: it foresees the slips, so no
        player needs fewer); ``UNREACHABLE`` in a hole or cut off from the goal."""
        if ep.fell:
            return UNREACHABLE
        try:
            return turns_for(len(shortest_path(ep.lake, ep.cell)), self.config.max_actions_per_turn)
        except ValueError:  # holes all around: no safe path
            return UNREACHABLE

    # ----- helpers -----

    def _offset(self, k: int) -> int:
        """How the ice turns move ``k``: -1, 0 or +1 in gymnasium's action order (0 on dry ice)."""
        ep, cfg = self._episode(), self.config
        return slip_offset(ep.draw(k), cfg.success_rate) if cfg.slippery else 0

    def _plan(self) -> tuple[list[int], list[int], list[int] | None] | None:
        """The safe shortest path from here, the moves of it made now, and (slippery ice) their presses."""
        ep, cfg = self._unfinished(), self.config
        if ep is None:
            return None
        path = shortest_path(ep.lake, ep.cell)
        moves = path[: min(cfg.max_actions_per_turn, cfg.max_moves - ep.moves)]
        if not cfg.slippery:
            return path, moves, None
        return path, moves, [(d - self._offset(ep.moves + k)) % 4 for k, d in enumerate(moves)]

    def _board_image(self) -> Image.Image:
        ep = self._episode()
        assert ep.picture is not None  # drawn at reset wherever the config shows the image
        return with_player(ep.picture, ep.cell, self.config.cell_size)

    def _board_text(self) -> str:
        ep = self._episode()
        return lake_text(ep.lake, ep.cell)

    def _status(self) -> str:
        return f"Moves left: {self.config.max_moves - self._episode().moves}."

    def _instructions(self) -> str:
        cfg = self.config
        rules = [
            "You are on a frozen lake. Walk to the goal without stepping into a hole: a hole ends the game.",
            "Left, Down, Right and Up move one tile; at the edge of the lake you stay where you are.",
        ]
        if cfg.slippery:
            rules.append(
                "The ice is slippery: a move may slide to one side of the way you pressed "
                f"(it goes your way {cfg.success_rate:.0%} of the time)."
            )
        return self._rules_header(
            rules,
            image_legend=(
                "In the image: ice is light blue, holes are dark circles, the red flag is the goal, "
                "you are orange."
            ),
            text_legend="In the text map: P you, _ ice, O hole, G goal, X you in a hole, √ you on the goal.",
            answer=(
                f"Answer with 1 to {cfg.max_actions_per_turn} moves inside <answer></answer>, separated by "
                f"commas, for example <answer>Right, Down</answer>. You have {cfg.max_moves} moves in total."
            ),
        )

    def _feedback(self, error: str | None, pressed: list[int], went: list[int], bumped: int) -> str:
        ep = self._episode()
        text = "You pressed: " + ", ".join(ACTION_NAMES[a] for a in pressed) + "."
        if went != pressed:
            text += " The ice slid: you moved " + ", ".join(ACTION_NAMES[d] for d in went) + "."
        if bumped:
            text += f" {bumped} of them hit the edge of the lake."
        refused = f"No move was made this turn. Answer with 1 to {self.config.max_actions_per_turn} moves."
        if ep.fell and not ep.success:
            end: str | None = "You fell into a hole. The game is over."
        else:
            end = ending(ep.success, ep.done, "You reached the goal!", "moves or turns")
        return self._turn_header(error, refused, text, end)
