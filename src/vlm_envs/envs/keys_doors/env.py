"""The KeysDoors env: reach the goal through locked doors, fetching each door's key first, around lava.

MiniGrid's DoorKey, MultiRoom and LavaGap in one grid: rooms in a row joined by locked doors of several
colours, each door's key lying on the side the player comes from, distractor keys that open nothing, lava
that ends the game. Each turn the model answers 1 to ``max_actions_per_turn`` actions in
``<answer>...</answer>``: ``Up``, ``Down``, ``Left``, ``Right``, ``Pickup`` (the key on its cell), ``Open``
(the locked doors next to it whose keys it carries). A malformed answer costs the turn (no action) and the
next observation says why. Every action counts toward the budget (``max_actions``), wasted ones included
(a step into a wall or a locked door, nothing to pick up or open). The episode ends on the goal (terminated,
reward 1.0), in lava (terminated, 0.0), or when the budget's actions or ``max_turns`` turns are used
(truncated). ``view: local`` shows only the cells around the player that walls and locked doors do not hide.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image

from vlm_envs.envs.board import BoardEnv, ending
from vlm_envs.envs.keys_doors import rationale
from vlm_envs.envs.keys_doors.actions import format_actions, parse_actions
from vlm_envs.envs.keys_doors.config import KeysDoorsConfig
from vlm_envs.envs.keys_doors.generate import generate_level
from vlm_envs.envs.keys_doors.render import board_image, level_text, local_text, still_image, visible
from vlm_envs.envs.keys_doors.solver import DistanceTable, plan, solver_state
from vlm_envs.envs.keys_doors.world import (
    ACTION_NAMES,
    COLOURS,
    OPEN,
    PICKUP,
    RIGHT,
    UP,
    Effect,
    Level,
    State,
    act,
    bits,
    carried,
    openable,
    standing_on,
)
from vlm_envs.envs.phrasing import series
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import UNREACHABLE, turns_for


@dataclasses.dataclass
class _Episode:
    level: Level
    table: DistanceTable
    still: Image.Image | None
    state: State
    optimal_actions: int
    #: ``local`` view: what the player sees now, and every cell it has seen.
    sight: np.ndarray | None = None
    seen: set[tuple[int, int]] = dataclasses.field(default_factory=set)
    actions: int = 0
    wasted: int = 0
    turns: int = 0
    burned: bool = False
    done: bool = False

    @property
    def success(self) -> bool:
        return self.state.cell == self.level.goal


class KeysDoorsEnv(BoardEnv[KeysDoorsConfig, _Episode]):
    """KeysDoors: fetch the key of each locked door, open it, avoid the lava, reach the goal (MiniGrid's
    DoorKey, MultiRoom and LavaGap)."""

    config_class = KeysDoorsConfig
    board_heading = "What you see now:"

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A level drawn from the seed; ``options`` override config fields for this episode."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        level, table = generate_level(
            cfg.rooms, cfg.room_size, cfg.distractors, cfg.lava, cfg.lava_gaps, seed
        )
        state = State(level.start)
        margin = cfg.view_size // 2 if cfg.view == "local" else 0
        still = still_image(level, cfg.cell_size, margin) if cfg.shows_image else None
        self._ep = _Episode(level, table, still, state, table[state])
        info = {
            "seed": seed,
            "level": level_text(level, state),
            "doors": [COLOURS[door.colour] for door in level.doors],
            "keys": [COLOURS[key.colour] for key in level.keys],
            "optimal_actions": table[state],
            "view": cfg.view,
        }
        return self._observation(self._instructions()), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Play the actions in the reply's ``<answer>`` block (or spend the turn on a format error)."""
        ep = self._playing()
        cfg = self.config
        parsed = parse_actions(response_text, cfg.max_actions_per_turn)
        ep.turns += 1
        played: list[tuple[int, Effect, State]] = []
        for action in parsed.actions:
            before = ep.state
            ep.state, effect = act(ep.level, before, action)
            ep.actions += 1
            ep.wasted += effect.wasted
            played.append((action, effect, before))
            if effect is Effect.LAVA:
                ep.burned = True
            if effect in (Effect.LAVA, Effect.GOAL) or ep.actions >= cfg.action_budget:
                break
        success, burned = ep.success, ep.burned
        truncated = not (success or burned) and (
            ep.actions >= cfg.action_budget or ep.turns >= cfg.turn_limit
        )
        ep.done = success or burned or truncated
        obs = self._observation(self._feedback(parsed.error, played))
        metrics: dict[str, float | int | bool] = {
            "format_valid": parsed.error is None,
            "action_valid": parsed.error is None and not any(effect.wasted for _, effect, _ in played),
            "actions": ep.actions,
            "wasted_actions": ep.wasted,
            "keys_held": len(bits(ep.state.held)),
            "doors_open": len(bits(ep.state.opened)),
        }
        if cfg.view == "local":
            metrics["cells_seen"] = len(ep.seen)
        if ep.done:
            metrics.update(success=success, fell_in_lava=burned, optimal_actions=ep.optimal_actions)
        info = {
            "played": [ACTION_NAMES[action] for action, _, _ in played],
            "error": parsed.error,
            "cell": list(ep.state.cell),
            "carrying": carried(ep.level, ep.state.held),
        }
        return self._binary_step(obs, success, truncated, metrics, info, terminated=success or burned)

    def oracle_response(self) -> str | None:
        """The next actions of a shortest way to the goal (the oracle knows the whole level), or None when
        done."""
        ep = self._unfinished()
        if ep is None:
            return None
        return format_actions(plan(ep.level, ep.table, ep.state, self.config.max_actions_per_turn))

    def oracle_rationale(self) -> str | None:
        """What the player carries, the lava by it, the next sub-goal and the oracle's actions; None when
        done."""
        ep = self._unfinished()
        if ep is None:
            return None
        cfg = self.config
        way = plan(ep.level, ep.table, ep.state, ep.table[solver_state(ep.level, ep.state)])
        in_sight = ep.sight if cfg.view == "local" else None
        return rationale.explain(ep.level, ep.state, way, cfg.max_actions_per_turn, in_sight)

    def random_response(self, rng: random.Random) -> str:
        """A well-formed answer of random actions."""
        picked = [rng.choice(ACTION_NAMES) for _ in range(rng.randint(1, self.config.max_actions_per_turn))]
        sep = rng.choice([", ", " ", "; "])
        return f"<think>I will try {picked[0]}.</think>\n<answer>{sep.join(picked)}</answer>"

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """The whole level (unseen cells too) with the player, what it stands on and the keys it carries."""
        lines = [level_text(ep.level, ep.state)]
        under = standing_on(ep.level, ep.state)
        if under is not None:
            lines.append(f"Under you: {under}.")
        keys = carried(ep.level, ep.state.held)
        lines.append(f"Carrying: {', '.join(keys) if keys else 'nothing'}.")
        return "\n".join(lines)

    def _distance(self, ep: _Episode) -> int:
        """Turns of ``max_actions_per_turn`` actions along a shortest way (the level known); ``UNREACHABLE``
        in lava."""
        if ep.burned:
            return UNREACHABLE
        return turns_for(ep.table[solver_state(ep.level, ep.state)], self.config.max_actions_per_turn)

    # ----- helpers -----

    def _observation(self, header: str) -> Observation:
        """``header``, the level as the config shows it (in ``local``, the sight is worked out first and its
        cells remembered) and the status line."""
        ep, cfg = self._episode(), self.config
        if cfg.view == "local":
            ep.sight = visible(ep.level, ep.state, cfg.view_size // 2)
            ep.seen.update((int(r), int(c)) for r, c in zip(*np.nonzero(ep.sight), strict=True))
        return super()._observation(header)

    def _board_image(self) -> Image.Image:
        ep, cfg = self._episode(), self.config
        assert ep.still is not None  # drawn at reset wherever the config shows the image
        sight = (cfg.view_size // 2, ep.sight) if ep.sight is not None else None
        return board_image(ep.still, ep.level, ep.state, cfg.cell_size, sight)

    def _board_text(self) -> str:
        ep = self._episode()
        if ep.sight is None:
            return level_text(ep.level, ep.state)
        return local_text(ep.level, ep.state, self.config.view_size // 2, ep.sight)

    def _status(self) -> str:
        ep, cfg = self._episode(), self.config
        keys = carried(ep.level, ep.state.held)
        text = (
            f"You carry the {series(keys)} key{'s' if len(keys) > 1 else ''}."
            if keys
            else "You carry no key."
        )
        under = standing_on(ep.level, ep.state)
        if under is not None:
            text += f" You stand on {under}."
        return f"{text} Actions left: {cfg.action_budget - ep.actions}."

    def _instructions(self) -> str:
        cfg = self.config
        rules = [
            "You are in a row of rooms joined by locked doors. Reach the goal (the green square).",
            "A locked door opens only with the key of its colour: stand on the key and answer Pickup to take "
            "it, then stand next to the door and answer Open. You keep your keys, and an open door stays "
            "open. Some keys open nothing.",
            "Up, Down, Left and Right walk one cell; walls and locked doors block you. Stepping into lava "
            "ends the game.",
        ]
        image_legend = (
            "In the image: dark grey walls, beige floor, orange lava with yellow waves, the green square is "
            "the goal, you are the black circle; a locked door is a block of its colour with a keyhole, an "
            "open door only its coloured frame, and a key lies on the floor in its colour."
        )
        text_legend = (
            "In the text map: '#' wall, '.' floor, '~' lava, 'G' goal, '@' you, 'R' 'B' 'Y' 'P' 'C' a locked "
            "door (red, blue, yellow, purple, cyan), 'r' 'b' 'y' 'p' 'c' a key of that colour, '/' an open "
            "door."
        )
        if cfg.view == "local":
            n = cfg.view_size
            rules.append(
                f"You see only the {n}x{n} cells around you, you in the middle, and nothing that walls or "
                "locked doors hide: remember what you saw."
            )
            image_legend += " Grey cells are hidden from you; black is outside the level."
            text_legend += " '?' is hidden from you; blank is outside the level."
        example = format_actions((UP, PICKUP, RIGHT, OPEN)[: min(4, cfg.max_actions_per_turn)])
        return self._rules_header(
            rules,
            image_legend=image_legend,
            text_legend=text_legend,
            answer=(
                f"Answer with 1 to {cfg.max_actions_per_turn} actions inside <answer></answer>, separated by "
                f"commas, for example {example}. You have {cfg.action_budget} actions in total."
            ),
        )

    def _feedback(self, error: str | None, played: list[tuple[int, Effect, State]]) -> str:
        ep = self._episode()
        sentences = ["You played: " + ", ".join(ACTION_NAMES[action] for action, _, _ in played) + "."]
        sentences += [event for step in played if (event := _event(ep.level, *step)) is not None]
        refused = (
            f"No action was played this turn. Answer with 1 to {self.config.max_actions_per_turn} actions."
        )
        if ep.burned:
            end: str | None = "The game is over."
        else:
            end = ending(ep.success, ep.done, "You reached the goal!", "actions or turns")
        return self._turn_header(error, refused, " ".join(sentences), end)


def _event(level: Level, action: int, effect: Effect, before: State) -> str | None:
    """The sentence one action earns in a turn's feedback; None for a plain step."""
    if effect is Effect.PICKED:
        return f"You picked up the {COLOURS[level.keys[level.key_at[before.cell]].colour]} key."
    if effect is Effect.OPENED:
        doors = bits(openable(level, before))
        colours = series(COLOURS[level.doors[d].colour] for d in doors)
        return f"You opened the {colours} door{'s' if len(doors) > 1 else ''}."
    if effect is Effect.NO_KEY:
        return "Pickup found no key on your cell."
    if effect is Effect.NO_DOOR:
        return "Open found no locked door next to you that a key you carry opens."
    if effect in (Effect.WALL, Effect.LOCKED, Effect.LAVA):
        return f"{ACTION_NAMES[action]} {effect.value}."
    return None
