"""TransitMap: networks drawn from the seed (lattice lines, no shared steps, connected, names), the fewest
rides against a search over stops, the oracle's route on hand-built networks, rides and invalid rides, the
ride budget and the turn cap, answers, the map (labels placed clear of each other, markers), seed-exactness
across processes, hostile replies, oracle and random play per level, presets and config."""

from __future__ import annotations

import itertools
import math
import re
from collections import deque

import numpy as np
import pytest
from puzzle_helpers import (
    assert_hostile_never_raise,
    assert_malformed_replies_end_at_the_cap,
    assert_seed_exact,
    play,
    success_rate,
)

from vlm_envs.envs.transit_map import Line, Network, TransitMapConfig, draw_trip
from vlm_envs.envs.transit_map.actions import parse_ride
from vlm_envs.envs.transit_map.network import COLORS
from vlm_envs.envs.transit_map.rationale import shortest_route
from vlm_envs.envs.transit_map.render import draw_map
from vlm_envs.registry import build_env

TARGET = "vlm_envs.envs.transit_map"
LEVELS = ("easy", "medium", "hard")


def fewest_rides(lines: list[list[str]], start: str, goal: str) -> int:
    """Rides from ``start`` to ``goal``, a ride any two stops of one line (written from the rules)."""
    dist, queue = {start: 0}, deque([start])
    while queue:
        at = queue.popleft()
        for stops in lines:
            for stop in stops if at in stops else ():
                if stop not in dist:
                    dist[stop] = dist[at] + 1
                    queue.append(stop)
    return dist.get(goal, -1)


def named_lines(network: Network) -> list[list[str]]:
    return [[network.names[s] for s in line.stops] for line in network.lines]


def trips(level: str, seeds: range):
    cfg = TransitMapConfig(difficulty=level)
    for seed in seeds:
        yield cfg, draw_trip(cfg.grid, cfg.lines, cfg.stops, cfg.min_rides, cfg.numbered, seed)


@pytest.mark.parametrize("level", LEVELS)
def test_networks_are_lattice_lines_that_share_no_step_and_connect_every_stop(level):
    for cfg, trip in trips(level, range(60)):
        net = trip.network
        assert len(net.lines) == cfg.lines and len(set(net.points)) == len(net.points) == len(net.names)
        steps = []
        for line in net.lines:
            assert len(set(line.stops)) == len(line.stops) >= 2 and len(line.stops) <= cfg.stops[1]
            for a, b in itertools.pairwise(line.stops):
                (ax, ay), (bx, by) = net.points[a], net.points[b]
                assert max(abs(ax - bx), abs(ay - by)) == 1  # one octilinear step
                assert 0 <= ax < cfg.grid[0] and 0 <= ay < cfg.grid[1]
                steps.append(frozenset((net.points[a], net.points[b])))
            own = {frozenset((net.points[a], net.points[b])) for a, b in itertools.pairwise(line.stops)}
            for a, b in itertools.pairwise(line.stops):  # a line never crosses its own diagonal
                (ax, ay), (bx, by) = net.points[a], net.points[b]
                assert frozenset(((bx, ay), (ax, by))) not in own or ax == bx or ay == by
        assert len(steps) == len(set(steps))  # no two lines along one step
        named = named_lines(net)
        start = named[0][0]
        assert all(fewest_rides(named, start, name) > 0 for name in net.names if name != start)
        assert len({line.name for line in net.lines}) == len({line.color for line in net.lines}) == cfg.lines


@pytest.mark.parametrize("level", LEVELS)
def test_stop_names_are_short_distinct_words_and_lines_are_named_by_colour_or_number(level):
    for cfg, trip in trips(level, range(60)):
        names = trip.network.names
        assert all(re.fullmatch(r"[A-Z][a-z]{3,6}", name) for name in names), names
        assert len({name.lower()[:3] for name in names}) == len(names)
        line_names = [line.name for line in trip.network.lines]
        if cfg.numbered:
            assert sorted(int(n) for n in line_names) == list(range(1, cfg.lines + 1))
        else:
            assert set(line_names) <= {name for name, _ in COLORS}
            assert not set(n.lower() for n in names) & {c.lower() for c, _ in COLORS}


@pytest.mark.parametrize("level", LEVELS)
def test_the_fewest_rides_match_a_search_over_stops_and_trips_are_far_enough(level):
    for cfg, trip in trips(level, range(60)):
        net = trip.network
        named = named_lines(net)
        goal = net.names[trip.destination]
        to_goal = net.rides_to(trip.destination)
        assert [fewest_rides(named, name, goal) for name in net.names] == list(to_goal)
        assert trip.fewest_rides == to_goal[trip.start] >= cfg.min_rides


def _hand_network() -> Network:
    """Red Abo-Bel-Cor-Dun, Blue Dun-Eza-Fim, Green Fim-Gol and a Teal shortcut Bel-Gol (the points only
    place the drawing)."""
    names = ("Abo", "Bel", "Cor", "Dun", "Eza", "Fim", "Gol")
    red, blue, green, teal = (COLORS[i] for i in (0, 1, 2, 7))
    lines = (
        Line("Red", *red, (0, 1, 2, 3)),
        Line("Blue", *blue, (3, 4, 5)),
        Line("Green", *green, (5, 6)),
        Line("Teal", *teal, (1, 6)),
    )
    return Network((8, 8), names, tuple((i, 0) for i in range(7)), lines)


def test_the_oracle_route_on_a_hand_built_network_takes_the_shortcut():
    net = _hand_network()
    to_gol = net.rides_to(6)
    assert to_gol == (2, 1, 2, 2, 2, 1, 0)  # not Red, Blue, Green from Abo: Red to Bel, Teal to Gol
    assert shortest_route(net, 0, to_gol) == [(0, 0, 1), (3, 1, 6)]
    assert shortest_route(net, 3, to_gol) == [(0, 3, 1), (3, 1, 6)]  # Dun: the Red line comes first
    assert shortest_route(net, 4, to_gol) == [(1, 4, 5), (2, 5, 6)]  # Eza: Blue to Fim, Green to Gol
    assert shortest_route(net, 6, to_gol) == []
    only_red = Network(net.grid, net.names[:4], net.points[:4], (net.lines[0],))
    assert only_red.rides_to(3) == (1, 1, 1, 0)
    apart = Network(net.grid, net.names, net.points, (net.lines[0], net.lines[2]))  # Red, Green: no change
    assert apart.rides_to(6) == (-1, -1, -1, -1, -1, 1, 0)


@pytest.mark.parametrize("level", LEVELS)
def test_the_oracle_wins_200_seeds_in_the_fewest_rides(level):
    env = build_env(TARGET, difficulty=level, render_mode="text")
    for seed in range(200):
        end = play(env, seed, "oracle")
        assert end["success"] is True and end["reward"] == 1.0 and end["optimal_route"] is True
        assert end["rides"] == end["optimal_rides"] == end["steps"] and end["invalid_rides"] == 0


def test_the_random_player_is_far_below_the_oracle_and_hard_is_harder():
    easy = success_rate(TARGET, {"difficulty": "easy", "render_mode": "text"}, "random", range(100))
    hard = success_rate(TARGET, {"difficulty": "hard", "render_mode": "text"}, "random", range(100))
    assert hard < easy <= 0.6 and hard <= 0.05


def test_answers_name_the_line_and_the_stop_in_any_case_with_or_without_filler():
    for reply, ride in [
        ("<answer>ride Red line to Musdale</answer>", ("Red", "Musdale")),
        ("<answer>Ride the red LINE to the musdale station.</answer>", ("red", "musdale")),
        ("<answer>Blue to Tali</answer>", ("Blue", "Tali")),
        ("<answer>ride Line 3 to Tali</answer>", ("3", "Tali")),
        ("<answer> line 3 to 'Tali' </answer>", ("3", "Tali")),
    ]:
        assert parse_ride(reply) == (*ride, None), reply
    for reply, says in [
        ("<answer>Red line Musdale</answer>", "no 'to'"),
        ("<answer>ride Red to Abo, ride Blue to Tali</answer>", "more than one ride"),
        ("<answer>ride Red Blue to Tali</answer>", "does not name one line"),
        ("<answer>ride Red to New Tali</answer>", "does not name one stop"),
        ("<answer>ride Red to</answer>", "does not name one stop"),
        ("ride Red to Tali", "no <answer>"),
    ]:
        assert says in parse_ride(reply).error, reply


def _start(env, seed: int, **options):
    _, info = env.reset(seed=seed, options=options or None)
    here = info["start"]
    serving = [title for title, stops in info["lines"].items() if here in stops]
    other = [title for title, stops in info["lines"].items() if here not in stops]
    return info, here, serving, other


def test_an_invalid_ride_changes_nothing_and_says_why():
    env = build_env(TARGET, render_mode="text")
    info, here, serving, other = _start(env, 0)
    key, distance = env.state_key(), env.distance_to_goal()
    line = serving[0]
    elsewhere = next(s for t in other for s in info["lines"][t] if s not in info["lines"][line])
    for reply, says in [
        (
            f"<answer>ride {other[0]} to {info['lines'][other[0]][0]}</answer>",
            f"does not stop at {here}, where",
        ),
        (f"<answer>ride {line} to {elsewhere}</answer>", f"the {line} does not stop at {elsewhere}"),
        (f"<answer>ride {line} to {here}</answer>", f"you are already at {here}"),
        (f"<answer>ride Gold line to {here}</answer>", "there is no line called 'Gold'"),
        (f"<answer>ride {line} to Oakfield</answer>", "there is no stop called 'Oakfield'"),
        ("<answer>ride \u212aasto</answer>", "no 'to'"),
    ]:
        obs, done, step = env.step(reply)
        assert says in obs.text and "No ride was taken" in obs.text and not done, reply
        assert step.metrics["action_valid"] is False and step.metrics["rides"] == 0, reply
        assert (env.state_key(), env.distance_to_goal()) == (key, distance)
    assert step.metrics["invalid_rides"] == 6 and step.metrics["format_valid"] is False


def test_a_look_alike_letter_names_no_stop():
    env = build_env(TARGET, render_mode="text")
    looks = str.maketrans({"k": "\u212a", "s": "\u017f", "i": "\u0131"})
    for seed in range(20):
        env.reset(seed=seed)
        ride = re.fullmatch(r"<answer>ride (.+) to (\w+)</answer>", env.oracle_response())
        alike = ride.group(2).translate(looks)
        if alike != ride.group(2):
            obs, _, step = env.step(f"<answer>ride {ride.group(1)} to {alike}</answer>")
            assert step.metrics["action_valid"] is False and "there is no stop called" in obs.text
            return
    raise AssertionError("no stop name with a look-alike letter")


def _detour(env, level: str) -> tuple[int, str]:
    """A seed and a ride from its start that brings the destination no nearer."""
    for seed in range(100):
        info, here, serving, _ = _start(env, seed, difficulty=level)
        before = env.distance_to_goal()
        for title in serving:
            for stop in info["lines"][title]:
                if stop != here:
                    env.reset(seed=seed, options={"difficulty": level})
                    env.step(f"<answer>ride {title} to {stop}</answer>")
                    if env.distance_to_goal() >= before:
                        return seed, f"<answer>ride {title} to {stop}</answer>"
    raise AssertionError("no detour found")


def test_a_detour_within_the_slack_still_arrives_but_not_by_the_fewest_rides():
    env = build_env(TARGET, render_mode="text")
    seed, detour = _detour(env, "easy")
    env.reset(seed=seed, options={"difficulty": "easy"})
    _, done, step = env.step(detour)
    while not done:
        _, done, step = env.step(env.oracle_response())
    assert step.metrics["success"] is True and step.metrics["optimal_route"] is False
    assert step.metrics["rides"] > step.metrics["optimal_rides"] and env.episode_reward() == 1.0


def test_without_slack_a_detour_loses_once_the_rides_allowed_are_used():
    env = build_env(TARGET, render_mode="text")
    seed, detour = _detour(env, "hard")
    _, info = env.reset(seed=seed, options={"difficulty": "hard"})
    assert info["ride_budget"] == info["optimal_rides"]
    obs, done, step = env.step(detour)
    for _ in range(info["ride_budget"] - 1):
        assert not done
        obs, done, step = env.step(env.oracle_response())
    assert done and step.truncated and step.metrics["success"] is False and env.episode_reward() == 0.0
    assert "no rides or turns are left" in obs.text and env.distance_to_goal() > 0


def test_a_stream_of_malformed_replies_ends_at_the_turn_cap():
    assert_malformed_replies_end_at_the_cap(TARGET, 3)
    assert (
        TransitMapConfig().turn_limit == 8
        and TransitMapConfig(lines=8, grid=(8, 8), ride_slack=20).turn_limit == 28
    )


def test_the_state_is_the_network_the_stop_and_the_destination_and_the_distance_the_fewest_rides():
    env = build_env(TARGET, difficulty="hard")
    _, info = env.reset(seed=3)
    text = env.state_text()
    assert f"You are at: {info['start']}\nDestination: {info['destination']}" in text
    assert re.search(r"^Line 1 \((Red|Blue|Green|Orange|Purple|Brown|Pink|Teal)\): ", text, re.MULTILINE)
    lines = list(info["lines"].values())
    distances = [env.distance_to_goal()]
    while (reply := env.oracle_response()) is not None:
        env.step(reply)
        distances.append(env.distance_to_goal())
    assert distances == list(range(info["optimal_rides"], -1, -1))
    assert distances[0] == fewest_rides(lines, info["start"], info["destination"])


def test_one_stop_reached_two_ways_has_one_key():
    env = build_env(TARGET, render_mode="text")
    info, here, serving, _ = _start(env, 1)
    stops = [s for s in info["lines"][serving[0]] if s != here]
    env.step(f"<answer>ride {serving[0]} to {stops[0]}</answer>")
    direct = env.state_key()
    if len(stops) > 1:
        env.reset(seed=1)
        env.step(f"<answer>ride {serving[0]} to {stops[1]}</answer>")
        assert env.state_key() != direct
        env.step(f"<answer>ride {serving[0]} to {stops[0]}</answer>")
        assert env.state_key() == direct


@pytest.mark.parametrize("level", LEVELS)
def test_every_name_is_drawn_inside_the_map_clear_of_other_names_and_dots_and_nearest_its_stop(level):
    for cfg, trip in trips(level, range(30)):
        drawing = draw_map(trip.network, cfg.spacing, cfg.numbered)
        width, _ = drawing.image.size
        map_height = (cfg.grid[1] - 1) * cfg.spacing + 2 * drawing.sizes.margin
        pixels = np.asarray(drawing.image)
        for a, b in itertools.combinations(drawing.labels, 2):
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3])
        for stop, box in enumerate(drawing.labels):
            assert 0 <= box[0] < box[2] <= width and 0 <= box[1] < box[3] <= map_height
            ink = pixels[box[1] : box[3], box[0] : box[2]]
            assert (ink.max(axis=2) < 80).any()  # the name's dark ink is there
            gap = [
                math.dist(c, (min(max(c[0], box[0]), box[2]), min(max(c[1], box[1]), box[3])))
                for c in drawing.centres
            ]
            assert min(range(len(gap)), key=gap.__getitem__) == stop and sorted(gap)[1] > drawing.sizes.ring


def test_the_map_marks_where_you_are_and_traces_the_ride():
    env = build_env(TARGET, render_mode="vision+text")
    obs, info = env.reset(seed=2)
    cfg = env.config
    margin = round(cfg.spacing * 0.85)
    assert obs.images[0].width == (cfg.grid[0] - 1) * cfg.spacing + 2 * margin
    assert all(f"{title}: " in obs.text for title in info["lines"])
    before = np.asarray(obs.images[0])
    reply = env.oracle_response()
    obs, _, step = env.step(reply)
    after = np.asarray(obs.images[0])
    moved = np.argwhere((after != before).any(axis=2))
    assert len(moved) > 100 and f"You rode the {step.info['ride'][0]} from {info['start']}" in obs.text
    assert build_env(TARGET, render_mode="text").reset(seed=0)[0].images == []


@pytest.mark.parametrize("config", [{}, {"difficulty": "hard", "render_mode": "vision+text"}])
def test_same_seed_same_episode_in_another_process(config):
    assert_seed_exact(TARGET, config, 7)


def test_hostile_replies_get_an_observation():
    assert_hostile_never_raise(build_env(TARGET, render_mode="vision+text"), 3)


def test_presets_grow_the_network_and_the_trip_and_take_away_the_slack():
    easy, medium, hard = (TransitMapConfig(difficulty=level) for level in LEVELS)
    assert easy.lines < medium.lines < hard.lines and easy.min_rides < medium.min_rides < hard.min_rides
    assert easy.ride_slack > medium.ride_slack > hard.ride_slack == 0
    assert hard.numbered and not medium.numbered
    assert TransitMapConfig(difficulty="hard", line_names="colors").numbered is False


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"grid": (2, 5)}, "3 to 16 columns"),
        ({"stops": (5, 3)}, "2 <= min <= max <= 12"),
        ({"lines": 8, "stops": (5, 12), "grid": (8, 6)}, "need at least 96 lattice points"),
        ({"lines": 2, "min_rides": 3}, "min_rides 3 exceeds lines 2"),
        ({"lines": 9}, "less than or equal to 8"),
        ({"line_names": "letters"}, "'colors' or 'numbers'"),
    ],
)
def test_bad_configs_are_value_errors(config, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        build_env(TARGET, **config)
