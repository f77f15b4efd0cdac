"""The TransitMap env: travel across a schematic transit map from a start stop to a destination in the fewest
rides.

The map (drawn from the seed) shows coloured lines through named stops; interchanges, where two or more
lines stop, are rings. Each turn the model names one ride, ``<answer>ride Red line to Musdale</answer>``:
board a line that stops where it is and ride it to another stop on that line, in either direction. A reply
that names no ride (malformed), a line that does not stop here or a stop not on that line changes nothing and
the observation says why. An episode allows the fewest rides of its trip plus ``ride_slack``: arriving within
them ends it with reward 1.0 (``optimal_route`` says whether in the fewest); the last ride allowed, or the
turn cap, ends it otherwise (truncated). Each observation shows the map with where the player is, the
destination and the ride just taken.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

from PIL import Image

from vlm_envs.envs.board import BoardEnv
from vlm_envs.envs.transit_map import rationale
from vlm_envs.envs.transit_map.actions import format_ride, parse_ride, plain_key, quoted
from vlm_envs.envs.transit_map.config import TransitMapConfig
from vlm_envs.envs.transit_map.network import Network, Trip, draw_trip
from vlm_envs.envs.transit_map.rationale import Ride
from vlm_envs.envs.transit_map.render import (
    MapDrawing,
    draw_map,
    line_phrase,
    line_title,
    marked,
    network_text,
)
from vlm_envs.protocol import Observation, StepInfo

#: The stop of the instructions' example: longer than any generated name, so never a stop of the map.
EXAMPLE_STOP = "Oakfield"


@dataclasses.dataclass
class _Episode:
    trip: Trip
    at: int
    #: The fewest rides from each stop to the destination.
    to_goal: tuple[int, ...]
    ride_budget: int
    #: The map without markers, drawn when an observation first shows it.
    drawing: MapDrawing | None = None
    #: The stops the last ride passed, boarding stop first (what the map traces).
    last_ride: tuple[int, ...] | None = None
    rides: int = 0
    invalid_rides: int = 0
    turns: int = 0
    done: bool = False

    @property
    def network(self) -> Network:
        return self.trip.network

    @property
    def success(self) -> bool:
        return self.at == self.trip.destination


class TransitMapEnv(BoardEnv[TransitMapConfig, _Episode]):
    """TransitMap: read a schematic transit map and travel from a start stop to a destination in the fewest
    rides, changing lines at interchanges."""

    config_class = TransitMapConfig
    board_heading = "The map now:"

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A network and a trip drawn from the seed; ``options`` override config fields for this episode."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        trip = draw_trip(cfg.grid, cfg.lines, cfg.stops, cfg.min_rides, cfg.numbered, seed)
        network = trip.network
        budget = trip.fewest_rides + cfg.ride_slack
        self._ep = _Episode(trip, trip.start, network.rides_to(trip.destination), budget)
        info = {
            "seed": seed,
            "lines": {
                self._title(i): [network.names[s] for s in line.stops] for i, line in enumerate(network.lines)
            },
            "start": network.names[trip.start],
            "destination": network.names[trip.destination],
            "optimal_rides": trip.fewest_rides,
            "ride_budget": budget,
        }
        return self._observation(self._instructions()), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Take the ride in the reply's ``<answer>`` block, if it can be taken."""
        ep = self._playing()
        parsed = parse_ride(response_text)
        ep.turns += 1
        taken, error = (None, parsed.error) if parsed.error else self._ride(ep, parsed.line, parsed.stop)
        if taken is None:
            ep.invalid_rides += 1
        else:
            stops = ep.network.lines[taken[0]].stops
            a, b = stops.index(taken[1]), stops.index(taken[2])
            ep.last_ride = stops[a : b + 1] if a < b else stops[b : a + 1][::-1]
            ep.at = taken[2]
            ep.rides += 1
        success = ep.success
        truncated = not success and (ep.rides >= ep.ride_budget or ep.turns >= self.config.turn_limit)
        ep.done = success or truncated
        metrics: dict[str, float | int | bool] = {
            "format_valid": parsed.error is None,
            "action_valid": taken is not None,
            "rides": ep.rides,
            "invalid_rides": ep.invalid_rides,
        }
        if ep.done:
            optimal = ep.trip.fewest_rides
            metrics.update(
                success=success, optimal_rides=optimal, optimal_route=success and ep.rides == optimal
            )
        obs = self._observation(self._feedback(error, taken, success, truncated))
        names = ep.network.names
        info = {
            "ride": None if taken is None else [self._title(taken[0]), names[taken[1]], names[taken[2]]],
            "error": error,
            "at": names[ep.at],
        }
        return self._binary_step(obs, success, truncated, metrics, info)

    def oracle_response(self) -> str | None:
        """The first ride of a fewest-rides route, or None when done."""
        route = self._route()
        return None if route is None else self._answer(route[0][0], route[0][2])

    def oracle_rationale(self) -> str | None:
        """Where the player is, the fewest rides to the destination and a route of them; None when done."""
        route, ep = self._route(), self._ep
        if route is None or ep is None:
            return None
        return rationale.explain(ep.network, ep.at, ep.trip.destination, route, self.config.numbered)

    def random_response(self, rng: random.Random) -> str:
        """A ride that can be taken from where the player is: a random line of the stop, a random other stop
        of that line (a well-formed answer naming no real ride before ``reset``)."""
        ep = self._ep
        if ep is None:
            return format_ride(line_title_example(self.config.numbered), EXAMPLE_STOP)
        line = rng.choice(ep.network.serving[ep.at])
        stop = rng.choice([s for s in ep.network.lines[line].stops if s != ep.at])
        return "<think>I will take a ride.</think>\n" + self._answer(line, stop)

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """Each line's stops in order (with its colour where lines are numbered), where the player is and the
        destination."""
        network = ep.network
        lines = network_text(network, self.config.numbered, colors=self.config.numbered)
        names = network.names
        return f"{lines}\nYou are at: {names[ep.at]}\nDestination: {names[ep.trip.destination]}"

    def _distance(self, ep: _Episode) -> int:
        """The fewest rides from where the player is to the destination (one ride a turn)."""
        return ep.to_goal[ep.at]

    # ----- helpers -----

    def _title(self, line: int) -> str:
        return line_title(self._episode().network.lines[line], self.config.numbered)

    def _answer(self, line: int, stop: int) -> str:
        return format_ride(self._title(line), self._episode().network.names[stop])

    def _route(self) -> list[Ride] | None:
        ep = self._unfinished()
        return None if ep is None else rationale.shortest_route(ep.network, ep.at, ep.to_goal)

    def _ride(self, ep: _Episode, line_name: str, stop_name: str) -> tuple[Ride | None, str | None]:
        """The ride (line, from, to) the names say, or why it cannot be taken."""
        network, names = ep.network, ep.network.names
        line_key, stop_key = plain_key(line_name), plain_key(stop_name)
        line = next((i for i, ln in enumerate(network.lines) if ln.name.lower() == line_key), None)
        here = ", ".join(self._title(i) for i in network.serving[ep.at])
        if line is None:
            return None, f"there is no line called {quoted(line_name)!r} (the lines here: {here})"
        title = line_phrase(network.lines[line], self.config.numbered)
        if ep.at not in network.lines[line].stops:
            return None, f"{title} does not stop at {names[ep.at]}, where you are (the lines here: {here})"
        stop = next((s for s, name in enumerate(names) if name.lower() == stop_key), None)
        if stop is None:
            return None, f"there is no stop called {quoted(stop_name)!r} on the map"
        if stop == ep.at:
            return None, f"you are already at {names[stop]}"
        if stop not in network.lines[line].stops:
            return None, f"{title} does not stop at {names[stop]}"
        return (line, ep.at, stop), None

    def _board_image(self) -> Image.Image:
        ep = self._episode()
        if ep.drawing is None:
            ep.drawing = draw_map(ep.network, self.config.spacing, self.config.numbered)
        return marked(ep.drawing, ep.at, ep.trip.destination, ep.last_ride)

    def _board_text(self) -> str:
        return network_text(self._episode().network, self.config.numbered)

    def _status(self) -> str:
        ep = self._episode()
        names = ep.network.names
        left = min(ep.ride_budget - ep.rides, self.config.turn_limit - ep.turns)
        where = f"You are at {names[ep.at]}; your destination is {names[ep.trip.destination]}."
        return f"{where} Rides left: {left}."

    def _instructions(self) -> str:
        cfg = self.config
        ep = self._episode()
        names = ep.network.names
        legend = (
            "the legend under the map gives each line's number"
            if cfg.numbered
            else "the legend names the lines"
        )
        rules = [
            f"A transit map: coloured lines through named stops. Travel from {names[ep.trip.start]} to "
            f"{names[ep.trip.destination]} in as few rides as you can.",
            "Each reply is one ride: board a line that stops where you are and ride it to any other stop on "
            "that line, in either direction. To change lines, take a ride to a stop where both lines stop.",
        ]
        return self._rules_header(
            rules,
            image_legend=(
                "On the map, small dots are stops, white rings with a black edge are interchanges (stops of "
                "two or more lines), the thick black ring is where you are and the magenta square your "
                f"destination; {legend}; a thin black trace follows your last ride."
            ),
            text_legend="The text lists each line's stops in order.",
            answer=(
                "Answer with one ride inside <answer></answer>, for example "
                f"{format_ride(line_title_example(cfg.numbered), EXAMPLE_STOP)}. You have {ep.ride_budget} "
                f"rides and {cfg.turn_limit} turns."
            ),
        )

    def _feedback(self, error: str | None, taken: Ride | None, success: bool, truncated: bool) -> str:
        ep = self._episode()
        names = ep.network.names
        played = ""
        if taken is not None:
            hops = len(ep.last_ride or ()) - 1
            line = line_phrase(ep.network.lines[taken[0]], self.config.numbered)
            played = f"You rode {line} from {names[taken[1]]} to {names[taken[2]]} "
            played += f"({hops} stop{'s' if hops != 1 else ''})."
        if success:
            fewest = ep.rides == ep.trip.fewest_rides
            ending = f"You arrived at {names[ep.trip.destination]}" + (
                " in the fewest rides!" if fewest else "!"
            )
        elif truncated:
            ending = "The episode is over: no rides or turns are left."
        else:
            ending = None
        return self._turn_header(
            error, f"No ride was taken: you are still at {names[ep.at]}.", played, ending
        )


def line_title_example(numbered: bool) -> str:
    """The line the instructions' example names."""
    return "Line 2" if numbered else "Red line"
