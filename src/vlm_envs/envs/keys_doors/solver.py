"""KeysDoors' exact solver: the fewest actions to the goal from every state the player can reach.

A breadth-first search over (cell, keys held, doors open) from the start finds every reachable state;
a second one, backwards from the states on the goal, gives each its distance in actions. Distractor keys
open nothing, so they are left out of the states searched (:func:`solver_state`): picking one up changes
no distance. Lava is never stepped on. Every reachable state can still win (keys are kept and doors stay
open, so the start's way remains), which the tests check.

:func:`winnable` answers whether the start can win at all, faster: the player must reach, for each door in
turn, its key and the cell before it with the doors before it open, and then the goal.
"""

from __future__ import annotations

from collections import deque

from vlm_envs.envs.keys_doors.world import ACTION_NAMES, WASTED, Cell, Effect, Level, State, act

#: The effects that lead to another state (lava is left out: it loses).
_LEADS = frozenset({Effect.MOVED, Effect.GOAL, Effect.PICKED, Effect.OPENED})
#: Actions to the goal per state reachable from the start (distractor bits cleared).
DistanceTable = dict[State, int]


def solver_state(level: Level, state: State) -> State:
    """``state`` as the solver keys it: the distractor keys' bits cleared."""
    return State(state.cell, state.held & level.door_keys, state.opened)


def _successors(level: Level, state: State) -> list[State]:
    """The states one action leads to (lava, wasted actions and distractor keys left out)."""
    found = []
    for action in range(len(ACTION_NAMES)):
        nxt, effect = act(level, state, action)
        if effect in _LEADS and not nxt.held & ~level.door_keys:  # a distractor picked up: no new state
            found.append(nxt)
    return found


def _flood(level: Level, opened: int) -> set[Cell]:
    """The cells the player can walk to from the start with the doors of ``opened`` open."""
    reached = {level.start}
    queue = [State(level.start, 0, opened)]
    for state in queue:  # grows as cells are found
        if state.cell == level.goal:
            continue
        for direction in range(4):
            nxt, effect = act(level, state, direction)
            if effect in (Effect.MOVED, Effect.GOAL) and nxt.cell not in reached:
                reached.add(nxt.cell)
                queue.append(nxt)
    return reached


def winnable(level: Level) -> bool:
    """Whether the start can reach the goal: for each door in turn, its key and the cell before it are
    within reach with the doors before it open, and the goal with all open."""
    for door, item in enumerate(level.doors):
        reached = _flood(level, (1 << door) - 1)
        before = (item.cell[0], item.cell[1] - 1)
        if level.keys[door].cell not in reached or before not in reached:
            return False
    return level.goal in _flood(level, level.door_keys)


def distance_table(level: Level) -> DistanceTable:
    """The fewest actions to the goal from every state reachable from the start from which the goal can
    be reached (empty where the start cannot reach it)."""
    start = State(level.start)
    predecessors: dict[State, list[State]] = {start: []}
    order = [start]
    for state in order:  # grows as states are found
        if state.cell == level.goal:
            continue
        for nxt in _successors(level, state):
            if nxt not in predecessors:
                predecessors[nxt] = []
                order.append(nxt)
            predecessors[nxt].append(state)
    distance = {state: 0 for state in order if state.cell == level.goal}
    queue = deque(distance)
    while queue:
        state = queue.popleft()
        for before in predecessors[state]:
            if before not in distance:
                distance[before] = distance[state] + 1
                queue.append(before)
    return distance


def plan(level: Level, table: DistanceTable, state: State, limit: int) -> list[int]:
    """The first ``limit`` actions of a shortest way to the goal from ``state`` (ties go to the lower
    action index: Up, Down, Left, Right, Pickup, Open); empty on the goal."""
    actions: list[int] = []
    here = state
    while len(actions) < limit and here.cell != level.goal:
        left = table[solver_state(level, here)]
        for action in range(len(ACTION_NAMES)):
            nxt, effect = act(level, here, action)
            if effect is Effect.LAVA or effect in WASTED:
                continue
            if table.get(solver_state(level, nxt)) == left - 1:
                actions.append(action)
                here = nxt
                break
        else:  # a state of the table always has a successor one action nearer (it was found so)
            raise ValueError(f"no action leads nearer to the goal from {here}")
    return actions
