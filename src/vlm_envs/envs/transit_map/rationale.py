"""TransitMap's oracle rationale: where the player is and which lines stop there, how many rides the
destination is away, a route of that many rides (each ride a line and the stop to leave it at), and the ride
taken now (the route's first)."""

from __future__ import annotations

from vlm_envs.envs.phrasing import counted, series
from vlm_envs.envs.transit_map.network import Network
from vlm_envs.envs.transit_map.render import line_phrase, line_title

#: One ride: (line index, the stop boarded at, the stop left at).
Ride = tuple[int, int, int]


def shortest_route(network: Network, at: int, to_goal: tuple[int, ...]) -> list[Ride]:
    """A route of the fewest rides from ``at`` to the stop ``to_goal`` counts down to: each ride the first
    line (in the network's order) that reaches a stop one ride nearer, to the nearest such stop along it
    (ties to the earlier one on the line)."""
    route: list[Ride] = []
    serving = network.serving
    while to_goal[at] > 0:
        line = next(
            i for i in serving[at] if any(to_goal[s] == to_goal[at] - 1 for s in network.lines[i].stops)
        )
        stops = network.lines[line].stops
        here = stops.index(at)
        nearer = [s for s in stops if to_goal[s] == to_goal[at] - 1]
        stop = min(nearer, key=lambda s: (abs(stops.index(s) - here), stops.index(s)))
        route.append((line, at, stop))
        at = stop
    return route


def served_by(network: Network, stop: int, numbered: bool) -> str:
    """The lines of ``stop`` in words: ``the Red line``, ``the Red line and the Blue line``, ``Line 3``."""
    return series(line_phrase(network.lines[i], numbered) for i in network.serving[stop])


def ride_text(network: Network, ride: Ride, numbered: bool) -> str:
    """``Red line to Musdale``."""
    return f"{line_title(network.lines[ride[0]], numbered)} to {network.names[ride[2]]}"


def explain(network: Network, at: int, destination: int, route: list[Ride], numbered: bool) -> str:
    """Why the first ride of ``route`` (a fewest-rides route from ``at`` to ``destination``) is taken now."""
    names = network.names
    legs = ", then ".join(ride_text(network, ride, numbered) for ride in route)
    now = ride_text(network, route[0], numbered)
    return (
        f"I am at {names[at]}, served by {served_by(network, at, numbered)}. {names[destination]} is "
        f"{counted(len(route), 'ride')} away at the fewest: {legs}. Now: {now}."
    )
