"""The FogMaze env: find the goal in a maze while seeing only what is near you.

Each turn the model answers 1 to ``max_actions_per_turn`` actions in ``<answer>...</answer>``; a
malformed answer costs the turn (no action) and the next observation says why. Every action counts
toward the action budget (``max_moves``, by default enough for the longest path of the maze's size),
blocked ones and turns included. The episode ends on reaching the goal (terminated, reward 1.0), or when
the budget's actions or ``max_turns`` turns are used (truncated); without ``max_turns`` the turn cap is the
budget (at most 1000), so a stream of malformed replies ends too.
The observation never shows the map: what the model learned about it earlier lives only in its
history. ``info`` carries the full layout for logs and replays.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

from PIL import Image

from vlm_envs.envs.board import BoardEnv, ending
from vlm_envs.envs.fog_maze import rationale
from vlm_envs.envs.fog_maze.actions import ACTION_NAMES, format_actions, parse_actions
from vlm_envs.envs.fog_maze.config import FogMazeConfig
from vlm_envs.envs.fog_maze.maze import Cell, Maze, apply_action, generate_maze, layout_ascii
from vlm_envs.envs.fog_maze.oracle import shortest_actions
from vlm_envs.envs.fog_maze.render import first_person, local_image, local_text
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import turns_for

_HEADINGS = ("north (up on the map)", "east", "south", "west")


@dataclasses.dataclass
class _Episode:
    maze: Maze
    cell: Cell
    heading: int
    optimal_moves: int
    visited: set[Cell]
    seen: set[Cell]
    #: Shortest action counts to the goal, per (cell, heading) asked.
    to_goal: dict[tuple[Cell, int], int] = dataclasses.field(default_factory=dict)
    moves: int = 0
    revisits: int = 0
    invalid_moves: int = 0
    turns: int = 0
    done: bool = False

    @property
    def success(self) -> bool:
        return self.cell == self.maze.goal


class FogMazeEnv(BoardEnv[FogMazeConfig, _Episode]):
    """FogMaze: reach the goal of a maze seen only nearby (local cells or a first-person corridor view)."""

    config_class = FogMazeConfig
    board_heading = "What you see now:"

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A new maze drawn from the seed; ``options`` override config fields for this episode."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        maze = generate_maze(cfg.size[0], cfg.size[1], cfg.loop_fraction, cfg.min_distance, seed)
        optimal = len(shortest_actions(maze.walls, maze.start, maze.heading, maze.goal, cfg.view))
        self._ep = _Episode(maze, maze.start, maze.heading, optimal, visited={maze.start}, seen=set())
        info = {
            "seed": seed,
            "layout": layout_ascii(maze),
            "start": list(maze.start),
            "heading": maze.heading,
            "goal": list(maze.goal),
            "optimal_moves": optimal,
            "view": cfg.view,
        }
        return self._observation(self._instructions()), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Play the actions in the reply's ``<answer>`` block (or spend the turn on a format error)."""
        ep = self._playing()
        cfg = self.config
        parsed = parse_actions(response_text, cfg.view, cfg.max_actions_per_turn)
        ep.turns += 1
        played, blocked = [], 0
        for action in parsed.actions:
            cell, ep.heading, hit = apply_action(ep.maze.walls, ep.cell, ep.heading, action, cfg.view)
            ep.moves += 1
            played.append(ACTION_NAMES[cfg.view][action])
            blocked += hit
            if cell != ep.cell:
                ep.revisits += cell in ep.visited
                ep.visited.add(cell)
            ep.cell = cell
            if ep.success or ep.moves >= cfg.move_budget:
                break
        ep.invalid_moves += blocked
        success = ep.success
        truncated = not success and (ep.moves >= cfg.move_budget or ep.turns >= cfg.turn_limit)
        ep.done = success or truncated
        obs = self._observation(self._feedback(parsed.error, played, blocked, success, truncated))
        metrics: dict[str, float | int | bool] = {
            "format_valid": parsed.error is None,
            "action_valid": parsed.error is None and blocked == 0,
            "moves": ep.moves,
            "revisits": ep.revisits,
            "cells_seen": len(ep.seen),
            "invalid_moves": ep.invalid_moves,
        }
        if ep.done:
            metrics.update(success=success, optimal_moves=ep.optimal_moves)
        info = {"played": played, "error": parsed.error, "cell": list(ep.cell), "heading": ep.heading}
        return self._binary_step(obs, success, truncated, metrics, info)

    def oracle_response(self) -> str | None:
        """The next actions of a shortest path (the oracle knows the map), or None when done."""
        ep = self._unfinished()
        if ep is None:
            return None
        path = shortest_actions(ep.maze.walls, ep.cell, ep.heading, ep.maze.goal, self.config.view)
        return format_actions(path[: self.config.max_actions_per_turn], self.config.view)

    def oracle_rationale(self) -> str | None:
        """What the view shows and which way the oracle's shortest path goes, or None when done."""
        ep = self._unfinished()
        return None if ep is None else rationale.explain(ep.maze, ep.cell, ep.heading, self.config)

    def random_response(self, rng: random.Random) -> str:
        """A well-formed answer of random actions."""
        names = ACTION_NAMES[self.config.view]
        picked = [rng.choice(names) for _ in range(rng.randint(1, self.config.max_actions_per_turn))]
        sep = rng.choice([", ", " ", "; "])
        return f"<think>I will try {picked[0]}.</think>\n<answer>{sep.join(picked)}</answer>"

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """The whole maze (unseen cells too) with the goal and the player, and the heading where turns
        are actions (``first_person``)."""
        text = layout_ascii(ep.maze, ep.cell, start=False)
        return f"{text}\nFacing: {_HEADINGS[ep.heading]}" if self.config.view == "first_person" else text

    def _distance(self, ep: _Episode) -> int:
        """Turns of ``max_actions_per_turn`` actions along a shortest path (the map known)."""
        heading = ep.heading if self.config.view == "first_person" else 0
        actions = ep.to_goal.get((ep.cell, heading))
        if actions is None:
            path = shortest_actions(ep.maze.walls, ep.cell, heading, ep.maze.goal, self.config.view)
            actions = ep.to_goal[ep.cell, heading] = len(path)
        return turns_for(actions, self.config.max_actions_per_turn)

    # ----- helpers -----

    def _observation(self, header: str) -> Observation:
        """``header``, what the player sees (the cells seen are remembered) and the status line: the view
        ahead in ``first_person``, else the board around the player as the config shows it."""
        ep, cfg = self._episode(), self.config
        if cfg.view == "first_person":
            image, cells = first_person(ep.maze.walls, ep.cell, ep.heading, ep.maze.goal, *cfg.image_size)
            ep.seen |= cells
            return Observation.compose(header + "\n", image, "\n", self._status())
        k = cfg.view_size // 2
        ep.seen |= {
            (r, c)
            for r in range(ep.cell[0] - k, ep.cell[0] + k + 1)
            for c in range(ep.cell[1] - k, ep.cell[1] + k + 1)
            if 0 <= r < ep.maze.rows and 0 <= c < ep.maze.cols
        }
        return super()._observation(header)

    def _board_image(self) -> Image.Image:
        ep, cfg = self._episode(), self.config
        return local_image(ep.maze.walls, ep.cell, ep.maze.goal, cfg.view_size // 2, cfg.cell_size)

    def _board_text(self) -> str:
        ep = self._episode()
        return local_text(ep.maze.walls, ep.cell, ep.maze.goal, self.config.view_size // 2)

    def _status(self) -> str:
        ep, cfg = self._episode(), self.config
        footer = f"Actions left: {cfg.move_budget - ep.moves}."
        return f"You face {_HEADINGS[ep.heading]}. " + footer if cfg.view == "first_person" else footer

    def _instructions(self) -> str:
        cfg = self.config
        names = ACTION_NAMES[cfg.view]
        rules = ["You are in a maze. Find the goal. You only see what is near you, so remember what you saw."]
        image_legend: str | None = None
        text_legend: str | None = None
        if cfg.view == "local":
            n = cfg.view_size
            rules.append(
                f"You see the {n}x{n} cells around you, you in the middle. Up, Down, Left and Right "
                "walk one cell; walls block you."
            )
            image_legend = (
                "In the image: dark strips are walls, beige cells floor, blue is you, green the goal."
            )
            text_legend = "In the text map: '#' wall, '.' floor, '@' you, 'G' goal, blank outside the maze."
        else:
            rules.append(
                "The image is what you see ahead: walls, corridors and, when in sight, the goal as a "
                "green block. Forward walks one cell ahead, TurnLeft and TurnRight turn you in place."
            )
        return self._rules_header(
            rules,
            image_legend=image_legend,
            text_legend=text_legend,
            answer=(
                f"Answer with 1 to {cfg.max_actions_per_turn} actions inside <answer></answer>, separated by "
                f"commas, for example {format_actions((0, 1 if len(names) > 1 else 0), cfg.view)}. "
                f"You have {cfg.move_budget} actions in total."
            ),
        )

    def _feedback(
        self, error: str | None, played: list[str], blocked: int, success: bool, truncated: bool
    ) -> str:
        text = "You played: " + ", ".join(played) + "."
        if blocked:
            text += f" {blocked} of them walked into a wall."
        refused = (
            f"No action was played this turn. Answer with 1 to {self.config.max_actions_per_turn} actions."
        )
        end = ending(success, truncated, "You reached the goal!", "actions or turns")
        return self._turn_header(error, refused, text, end)
