"""The Sokoban env: the model answers moves in ``<answer>...</answer>``, the env shows the board.

Each turn the model gives 1 to ``max_actions_per_step`` moves. A malformed answer costs the turn
(no moves) and the next observation says why. Every attempted move counts toward ``max_steps``,
blocked ones included. The episode ends on success (terminated), when ``max_steps`` moves are used
or ``max_turns`` turns are played (truncated); without ``max_turns`` the turn cap is ``max_steps``, so a
stream of malformed replies ends too. The task instructions travel in the first
observation (no system prompt), so a dataset row's prompt is exactly that observation.

Rewards. ``episode_reward()`` is binary by default: 1.0 if every box ends on a target, else 0.0,
and each step's ``StepInfo.reward`` is 1.0 on the solving step, else 0.0. With
``reward_mode="shaped"`` a step pays ``phi(after) - phi(before) + success_bonus * solved -
invalid_format_penalty * malformed``, with the potential ``phi = boxes on targets / boxes``, and the
episode reward is the sum of step rewards. The shaping is potential-based (it telescopes to
``phi(end) - phi(start)``), so pushing a box on and off a target earns exactly nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from typing import Any

from PIL import Image

from vlm_envs.envs.board import BoardEnv, ending
from vlm_envs.envs.sokoban import rationale
from vlm_envs.envs.sokoban.actions import format_answer, parse_answer
from vlm_envs.envs.sokoban.board import (
    LEGEND,
    MOVE_NAMES,
    MOVES,
    Layout,
    State,
    apply_move,
    boxes_on_target,
    is_solved,
    to_ascii,
)
from vlm_envs.envs.sokoban.config import SokobanConfig
from vlm_envs.envs.sokoban.generator import MAX_SEARCH_WORK, generate_level, node_cost
from vlm_envs.envs.sokoban.render import Renderer, renderer
from vlm_envs.envs.sokoban.solver import Solver
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import UNREACHABLE, turns_for

_VISUAL_LEGEND = (
    "In the image: brown bricks are walls, beige cells are floor, a red ring is a target, an orange "
    "crate is a box, a green crate is a box on a target, and the blue figure is you."
)


@functools.lru_cache(maxsize=1024)
def _solve_given(layout: Layout, state: State, max_nodes: int) -> tuple[str | None, bool]:
    """Optimal solution of a given level within a node budget (deterministic, at most the generator's
    search budget), cached per level."""
    max_nodes = min(max_nodes, MAX_SEARCH_WORK // node_cost(layout.rows, layout.cols, len(state.boxes)))
    result = Solver(layout).solve(state, max_nodes=max_nodes)
    return result.moves, result.moves is not None


@dataclasses.dataclass
class _Episode:
    """Everything that changes during one episode."""

    layout: Layout
    start: State
    state: State
    renderer: Renderer
    optimal_moves: int | None
    optimal_exact: bool
    solutions: dict[State, str]
    #: Solutions known to solve a state though not shown optimal (a level too big to solve exactly keeps
    #: its generator's): the oracle's plan where the solver finds none within its budget.
    fallbacks: dict[State, str]
    #: States the solver proved unsolvable (a box stuck off target).
    unsolvable: set[State] = dataclasses.field(default_factory=set)
    moves_used: int = 0
    turns: int = 0
    done: bool = False
    rewards: list[float] = dataclasses.field(default_factory=list)

    @property
    def success(self) -> bool:
        return is_solved(self.layout, self.state)


class SokobanEnv(BoardEnv[SokobanConfig, _Episode]):
    """Sokoban: push every box onto a target; solvable levels of chosen difficulty, image and/or text."""

    config_class = SokobanConfig

    def __init__(self, config: SokobanConfig | None = None, **overrides: Any):
        super().__init__(config, **overrides)
        self._given = self.config.given_level()
        self._solver: Solver | None = None

    # ----- episode lifecycle -----

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A new episode; a generated level depends only on the seed and the config.

        ``options`` override config fields for this episode only: a ``level`` to play, or a
        difficulty (``grid_size``, ``num_boxes``, ``min_moves``, ``max_moves``, ...).
        """
        before = self.config
        cfg = self._configure(options)
        if cfg is not before:
            self._given = cfg.given_level()
        seed = self._episode_seed(seed, first=cfg.rng_seed)
        info: dict[str, Any] = {"seed": seed}
        if self._given is not None:
            layout, start = self._given
            if cfg.optimal_moves is not None:
                solution, optimal, exact = None, cfg.optimal_moves, bool(cfg.optimal_exact)
            else:
                solution, exact = _solve_given(layout, start, cfg.solver_max_nodes)
                optimal = None if solution is None else len(solution)
            info.update(source="given", attempt=0)
        else:
            level = generate_level(cfg.generator_params(), seed)
            layout, start = level.layout, level.state
            solution, optimal, exact = level.solution, level.optimal_moves, level.optimal_exact
            info.update(source="generated", attempt=level.attempt, wall_fraction=cfg.wall_fraction)
        self._ep = _Episode(
            layout=layout,
            start=start,
            state=start,
            renderer=renderer(layout, cfg.cell_size),
            optimal_moves=optimal,
            optimal_exact=exact,
            solutions={start: solution} if solution is not None and exact else {},
            fallbacks={start: solution} if solution is not None and not exact else {},
        )
        if self._solver is not None and self._solver.layout != layout:
            self._solver = None
        info.update(
            level=to_ascii(layout, start),
            optimal_moves=optimal,
            optimal_exact=exact,
            grid_size=[layout.rows, layout.cols],
            num_boxes=len(start.boxes),
            max_steps=cfg.max_steps,
        )
        return self._observation(self._instructions()), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Play the moves in the response's ``<answer>`` block (or spend the turn on a format error)."""
        ep = self._playing()
        cfg = self.config
        parsed = parse_answer(response_text, cfg.max_actions_per_step)
        ep.turns += 1
        before, phi_before = ep.state, boxes_on_target(ep.layout, ep.state)
        played: list[str] = []
        blocked = 0
        for direction in parsed.moves:
            result = apply_move(ep.layout, ep.state, direction)
            ep.state = result.state
            ep.moves_used += 1
            played.append(MOVES[direction])
            blocked += not result.moved
            if ep.success or ep.moves_used >= cfg.max_steps:
                break
        self._remember_suffix(before, "".join(played), blocked)
        success = ep.success
        truncated = not success and (ep.moves_used >= cfg.max_steps or ep.turns >= cfg.turn_limit)
        ep.done = success or truncated
        on_target = boxes_on_target(ep.layout, ep.state)
        reward = self._step_reward(phi_before, on_target, success, parsed.error is not None)
        ep.rewards.append(reward)

        metrics: dict[str, float | int | bool] = {
            "format_valid": parsed.error is None,
            "action_valid": parsed.error is None and blocked == 0,
            "action_effective": ep.state != before,
            "boxes_on_target": on_target,
        }
        if ep.done:
            metrics.update(success=success, moves_used=ep.moves_used)
            if ep.optimal_moves is not None:
                metrics["optimal_moves"] = ep.optimal_moves
        feedback = self._feedback(parsed.error, played, blocked, success, truncated)
        info = {"moves": "".join(played), "blocked": blocked, "error": parsed.error, "state": self.ascii()}
        step_info = StepInfo(
            reward=reward, terminated=success, truncated=truncated, metrics=metrics, info=info
        )
        return self._observation(feedback), ep.done, step_info

    def episode_reward(self) -> float:
        """Binary success (default) or the sum of shaped step rewards (``reward_mode="shaped"``)."""
        ep = self._ep
        if ep is None:
            return 0.0
        if self.config.reward_mode == "binary":
            return 1.0 if ep.success else 0.0
        return float(sum(ep.rewards))

    def close(self) -> None:
        """Drop the episode; calling it twice is fine."""
        super().close()
        self._solver = None

    # ----- views of the current state -----

    @property
    def layout(self) -> Layout:
        return self._episode().layout

    @property
    def state(self) -> State:
        return self._episode().state

    def ascii(self) -> str:
        """The current state in Boxoban symbols."""
        ep = self._episode()
        return to_ascii(ep.layout, ep.state)

    def frame_png(self) -> bytes:
        """Engine-ready PNG bytes of the current frame (cached by state)."""
        ep = self._episode()
        return ep.renderer.frame_png(ep.state)

    def frame_data_uri(self) -> str:
        """The current frame as a PNG data URI (cached by state)."""
        ep = self._episode()
        return ep.renderer.frame_data_uri(ep.state)

    # ----- policies -----

    def solution(self, max_nodes: int | None = None, time_limit: float | None = None) -> str | None:
        """An optimal move string over ``UDLR`` from the *current* state, or None (unsolvable, or
        not found within ``max_nodes`` expansions, default ``solver_max_nodes``, and ``time_limit``)."""
        ep = self._episode()
        known = ep.solutions.get(ep.state)
        if known is not None or ep.state in ep.unsolvable:
            return known
        if self._solver is None:
            self._solver = Solver(ep.layout)
        nodes = max_nodes if max_nodes is not None else self.config.solver_max_nodes
        result = self._solver.solve(ep.state, max_nodes=nodes, time_limit=time_limit)
        if result.moves is not None:
            ep.solutions[ep.state] = result.moves
        elif result.complete:
            ep.unsolvable.add(ep.state)
        return result.moves

    def solver_response(self, max_nodes: int | None = None, time_limit: float | None = None) -> str | None:
        """The next moves of an optimal solution as an answer (as many as one turn allows), or None."""
        moves = self.solution(max_nodes, time_limit)
        if not moves:
            return None
        return format_answer(moves[: self.config.max_actions_per_step])

    def oracle_response(self) -> str | None:
        """The optimal player's next answer (:meth:`solver_response`); where the solver finds none within
        its budget, the next moves of the level's known solution (its generator's, not shown optimal)."""
        answer = self.solver_response()
        fallback = self._episode().fallbacks.get(self.state)
        if answer is None and fallback:
            return format_answer(fallback[: self.config.max_actions_per_step])
        return answer

    def oracle_rationale(self) -> str | None:
        """Where the player and the boxes are and what the oracle's next moves do."""
        moves = self.solution()
        if not moves:
            return None
        return rationale.explain(self.layout, self.state, moves, self.config.max_actions_per_step)

    def random_response(self, rng: random.Random) -> str:
        """A well-formed answer with random moves, in varied spelling and separators."""
        n = rng.randint(1, self.config.max_actions_per_step)
        names = [rng.choice(MOVE_NAMES) for _ in range(n)]
        if rng.random() < 0.3:
            names = [name.lower() if rng.random() < 0.5 else name[0] for name in names]
        sep = rng.choice([", ", " ", "; ", "\n"])
        return f"<think>Let me try {names[0]}.</think>\n<answer>{sep.join(names)}</answer>"

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """The board in Boxoban symbols: walls, targets, boxes and the player."""
        return to_ascii(ep.layout, ep.state)

    def _distance(self, ep: _Episode) -> int | None:
        """Turns of ``max_actions_per_step`` moves along an optimal solution (the solver's, within
        ``solver_max_nodes``); ``UNREACHABLE`` where it proved none exists; ``None`` past its budget."""
        if ep.success:
            return 0
        moves = self.solution()
        if moves is not None:
            return turns_for(len(moves), self.config.max_actions_per_step)
        return UNREACHABLE if ep.state in ep.unsolvable else None

    # ----- helpers -----

    def _remember_suffix(self, before: State, played: str, blocked: int) -> None:
        """Following a known solution leaves its suffix a solution (optimal if it was): keep it for
        :meth:`solution` and :meth:`oracle_response`."""
        ep = self._episode()
        for solutions in (ep.solutions, ep.fallbacks):
            known = solutions.get(before)
            if known is not None and not blocked and known.startswith(played):
                solutions.setdefault(ep.state, known[len(played) :])

    def _step_reward(self, phi_before: int, on_target: int, success: bool, malformed: bool) -> float:
        cfg = self.config
        if cfg.reward_mode == "binary":
            return 1.0 if success else 0.0
        n = len(self._episode().state.boxes)
        reward = (on_target - phi_before) / n + (cfg.success_bonus if success else 0.0)
        return reward - (cfg.invalid_format_penalty if malformed else 0.0)

    def _board_image(self) -> Image.Image:
        ep = self._episode()
        return ep.renderer.frame(ep.state)

    def _board_text(self) -> str:
        return self.ascii()

    def _status(self) -> str:
        ep = self._episode()
        on_target, left = boxes_on_target(ep.layout, ep.state), self.config.max_steps - ep.moves_used
        return f"Boxes on targets: {on_target}/{len(ep.state.boxes)}. Moves left: {left}."

    def _instructions(self) -> str:
        cfg = self.config
        rules = [
            "You are playing Sokoban. Push every box onto a target.",
            "Each move walks you one cell Up, Down, Left or Right. Walking into a box pushes it one "
            "cell if the cell behind it is free. You cannot pull boxes, push two boxes at once, or "
            "walk through walls.",
        ]
        return self._rules_header(
            rules,
            image_legend=_VISUAL_LEGEND,
            text_legend="Grid legend: " + ", ".join(f"'{s}' {name}" for s, name in LEGEND.items()) + ".",
            answer=(
                f"Answer with 1 to {cfg.max_actions_per_step} moves inside <answer></answer>, separated by "
                f"commas, for example <answer>Up, Left</answer>. You have {cfg.max_steps} moves in total."
            ),
        )

    def _feedback(
        self, error: str | None, played: list[str], blocked: int, success: bool, truncated: bool
    ) -> str:
        text = "You played: " + ", ".join(MOVE_NAMES[MOVES.index(m)] for m in played) + "."
        if blocked:
            text += f" {blocked} of them hit a wall or a box that could not move."
        refused = (
            f"No move was played this turn. Answer with 1 to {self.config.max_actions_per_step} moves, for "
            "example <answer>Up, Left</answer>."
        )
        return self._turn_header(
            error,
            refused,
            text,
            ending(success, truncated, "Solved: every box is on a target!", "moves or turns"),
        )
