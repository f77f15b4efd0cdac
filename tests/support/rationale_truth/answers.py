"""Truth checks of the rationales of envs that end in one answer, with or without a tool."""

from __future__ import annotations

import itertools
import json
import re
from fractions import Fraction
from typing import Any

import numpy as np

from rationale_truth.common import answer_text
from vlm_envs.envs.chart_calc.calc import evaluate
from vlm_envs.envs.clutter_count.shapes import shape_masks
from vlm_envs.envs.image_probe import COLORS
from vlm_envs.envs.matchstick.equation import SEGMENTS


def _number(answer: str) -> Fraction | None:
    """A geo3k answer as an exact number where it is one (``12``, ``7.5``, ``\\frac{5}{2}``)."""
    frac = re.fullmatch(r"(-?)\\frac\{(\d+)\}\{(\d+)\}", answer)
    if frac:
        return Fraction(int(frac.group(2)), int(frac.group(3))) * (-1 if frac.group(1) else 1)
    return Fraction(answer) if re.fullmatch(r"-?\d+(\.\d+)?", answer) else None


def geo3k(env: Any, reason: str, reply: str) -> None:
    problem = env.problem
    assert problem.solution and reason.startswith(problem.solution), reason
    assert f"So the answer is {problem.answer}" in reason, reason
    assert ("<tool_call>" in reply) == ("I check it with calc_score" in reason), (reason, reply)
    for a, sign, b, total in re.findall(r"x² = (\d+)² ([+-]) (\d+)² = (\d+)", reason):
        assert int(a) ** 2 + (1 if sign == "+" else -1) * int(b) ** 2 == int(total), reason
        surd = re.fullmatch(r"(\d*)\\sqrt\{(\d+)\}", problem.answer)
        k, m = (int(surd.group(1) or 1), int(surd.group(2))) if surd else (int(problem.answer), 1)
        assert k * k * m == int(total), reason
    tail = re.search(r"(?:x = |: )([\d\s·/+\-()]+)\.$", problem.solution)
    value = _number(problem.answer)
    if tail and value is not None:  # the worked arithmetic gives the answer (at the asked rounding)
        assert abs(evaluate(tail.group(1).replace("·", "*")) - float(value)) < 0.051, reason


def zoom_search(env: Any, reason: str, reply: str) -> None:
    target = env._ep.scene.target_object
    assert f"the {target.color} {target.shape}" in reason, reason
    if "<tool_call>" not in reply:
        assert reason.endswith(f"{target.code}.") and f"\\boxed{{{target.code}}}" in reply, reason
        return
    box = re.search(r"inside \[([\d, ]+)\]", reason)
    assert box, reason
    named = [int(v) for v in box.group(1).split(", ")]
    call = json.loads(reply[reply.index("<tool_call>") + 11 : reply.index("</tool_call>")])
    assert named == call["arguments"]["bbox"], reason
    limit = 1000 if env.config.coords == "relative1000" else env.config.view
    factor = limit / env.config.canvas
    x0, y0, x1, y1 = (v * factor for v in target.box)
    assert named[0] <= x0 and named[1] <= y0 and named[2] >= x1 and named[3] >= y1, reason


def chart_calc(env: Any, reason: str, reply: str) -> None:
    table, question = env._ep.table, env._ep.question
    assert ("<tool_call>" in reply) == ("with calc" in reason), (reason, reply)
    if question.kind == "which" and len(table.series) > 1:
        first, second = re.search(r"its (\d{4}) value minus its (\d{4}) value", reason).groups()
        s, t = table.series.index(first), table.series.index(second)
        pairs = re.findall(r"([A-Z][a-z]+) (\d+) - (\d+)", reason)
        assert len(pairs) == len(table.categories), reason
        for category, a, b in pairs:
            c = table.categories.index(category)
            assert (table.values[s][c], table.values[t][c]) == (int(a), int(b)), reason
        return
    names = {
        f"{category}{f' in {series}' if series else ''}": (s, c)
        for s, series in enumerate(table.series)
        for c, category in enumerate(table.categories)
    }
    pairs = re.findall(r"([A-Z][a-z]+(?: in \d{4})?) = (\d+)", reason)
    assert [names[name] for name, _ in pairs] == list(question.reads), reason
    for name, value in pairs:
        s, c = names[name]
        assert table.values[s][c] == int(value), reason
    if "<tool_call>" not in reply:
        assert question.answer in reason, reason


def image_probe(env: Any, reason: str, reply: str) -> None:
    ep = env._ep
    color = ep.colors[len(ep.answers)]
    name, letter = COLORS[color][0], "ABCDEF"[color]
    assert f"filled with {name}" in reason and f"option {letter}" in reason, reason
    assert answer_text(reply) == letter, reason


def clock(env: Any, reason: str, reply: str) -> None:
    ep = env._ep
    hour, minute = divmod(ep.shown, 60)
    hour = hour or 12
    hands = re.match(
        r"The hour hand is (?:between (\d+) and (\d+)|on (\d+)) and the minute hand is on ", reason
    )
    assert hands, reason
    if minute:  # the hour hand has left the hour by minute/60 of the way to the next
        assert (int(hands.group(1) or 0), int(hands.group(2) or 0)) == (hour, hour % 12 + 1), reason
        assert f"the minute hand is on {minute} minutes," in reason, reason
    else:
        assert int(hands.group(3) or 0) == hour and "the minute hand is on the 12," in reason, reason
    assert f"so the clock shows {hour}:{minute:02d}." in reason, reason
    later = re.search(r" (\d+) minutes later it is (\d+):(\d\d)\.$", reason)
    assert (later is not None) == (ep.later is not None), reason
    if later:
        total = (hour % 12) * 60 + minute + int(later.group(1))
        assert int(later.group(1)) == ep.later, reason
        assert ((int(later.group(2)) % 12) * 60 + int(later.group(3))) == total % 720, reason
    said = later.group(2) + ":" + later.group(3) if later else f"{hour}:{minute:02d}"
    assert answer_text(reply) == said, reason


def matchstick(env: Any, reason: str, reply: str) -> None:
    shown = env.shown
    said = re.fullmatch(
        r"The sticks read (.+?), which is false: (\d+) ([+-]) (\d+) makes (-?\d+)\. Moving one stick turns "
        r"(.+), giving (.+?), which is true\.",
        reason,
    )
    assert said and said.group(1) == str(shown), reason
    a, op, b, value = int(said.group(2)), said.group(3), int(said.group(4)), int(said.group(5))
    assert (str(a), op, str(b)) == (shown.left, shown.op, shown.right), reason
    assert value == (a + b if op == "+" else a - b) != int(shown.result), reason
    answer = said.group(7)
    assert answer == answer_text(reply), reason
    left, sign, right, _, result = answer.split()
    assert (int(left) + int(right) if sign == "+" else int(left) - int(right)) == int(result), reason
    before, after = shown.symbols, left + sign + right + result
    assert len(before) == len(after), reason
    moved = sum(len(SEGMENTS[x] - SEGMENTS[y]) for x, y in zip(before, after, strict=True))
    added = sum(len(SEGMENTS[y] - SEGMENTS[x]) for x, y in zip(before, after, strict=True))
    assert moved == added == 1, reason
    named = re.findall(
        r"the (\d|plus sign|minus sign) (?:in the [a-z ]+ )?into a (\d|plus sign|minus sign)", reason
    )
    sign_name = {"+": "plus sign", "-": "minus sign"}
    changed = [
        (sign_name.get(x, x), sign_name.get(y, y)) for x, y in zip(before, after, strict=True) if x != y
    ]
    assert named == changed, reason


def clutter_count(env: Any, reason: str, reply: str) -> None:
    ep = env._ep
    scene = ep.scene
    plural = f"{scene.kind}es" if scene.kind.endswith("s") else f"{scene.kind}s"
    targets = [i for i, p in enumerate(scene.pieces) if (p.color, p.kind) == (scene.color, scene.kind)]
    shown = np.bincount(scene.owner[scene.owner >= 0], minlength=len(scene.pieces))
    hidden = sum(
        int(shown[i])
        < int(shape_masks(scene.pieces[i].kind, scene.pieces[i].radius, scene.pieces[i].angle).mask.sum())
        for i in targets
    )
    assert int(re.search(r"\d+", reason).group()) == len(targets), reason  # the first number is the count
    assert f"{len(targets)} {scene.color} {plural}" in reason, reason
    assert (f"{hidden} of them partly hidden" if hidden else "none of them hidden") in reason, reason
    if "<tool_call>" not in reply:
        assert f"\\boxed{{{len(targets)}}}" in reply, reply
        marked = {int(scene.owner[y, x]) for x, y in ep.marks}
        assert ("carries a mark" in reason) == (set(targets) <= marked), reason
        return
    points = json.loads(reply[reply.index("<tool_call>") + 11 : reply.index("</tool_call>")])["arguments"][
        "points"
    ]
    limit = 1000 if env.config.coords == "relative1000" else env.config.image_size
    size = env.config.image_size
    owners = [
        int(scene.owner[min(size - 1, y * size // limit), min(size - 1, x * size // limit)])
        for x, y in points
    ]
    unmarked = [i for i in targets if i not in {int(scene.owner[y, x]) for x, y in ep.marks}]
    assert sorted(owners) == unmarked and "I mark the centre" in reason, (reason, reply)


def _l1_motion(frames: Any, order: Any) -> int:
    """How far ``order`` (frame indices) moves the objects: L1 steps summed over objects and steps."""
    return sum(
        abs(p[0] - q[0]) + abs(p[1] - q[1])
        for a, b in itertools.pairwise(order)
        for p, q in zip(frames[a], frames[b], strict=True)
    )


def frame_order(env: Any, reason: str, reply: str) -> None:
    labels, frames = env.animation.labels, env.animation.motion.frames
    said = re.fullmatch(
        r"Frame ([A-H]) is the first\. Of the orders that start with \1, ([A-H](?:, [A-H])*) moves the "
        r"objects least: (\d+) units in all \(across plus up-down, summed over the objects\), and any other "
        r"order at least (\d+)\.",
        reason,
    )
    assert said and said.group(1) == labels[0], reason
    order = said.group(2).split(", ")
    assert said.group(2) == answer_text(reply) and tuple(order) == labels, reason
    time = {letter: t for t, letter in enumerate(labels)}
    assert int(said.group(3)) == _l1_motion(frames, [time[x] for x in order]), reason
    others = itertools.permutations(range(1, len(labels)))
    least = min(_l1_motion(frames, (0, *rest)) for rest in others if list(rest) != sorted(rest))
    assert int(said.group(4)) == least > int(said.group(3)), reason


def spot_difference(env: Any, reason: str, reply: str) -> None:
    scene, grid = env._ep.drawn.scene, env.config.grid
    names = {f"{chr(65 + c % grid)}{c // grid + 1}": c for c in range(grid * grid)}
    claims = re.findall(r"in ([A-L]\d+) the (.+?) (is|has) (.+?)(?:;|\. )", reason)
    assert [names[cell] for cell, *_ in claims] == list(scene.cells), reason
    count = re.search(r"(\d+) cells? differs?", reason)
    assert count and int(count.group(1)) == len(scene.cells), reason  # the count it states is the count
    image = "the copy" if env.config.altered == 1 else None
    for (cell, before, _, change), d in zip(claims, scene.differences, strict=True):
        assert before == d.before.described() and cell == f"{chr(65 + d.cell % grid)}{d.cell // grid + 1}"
        where = image or f"image {d.copy + 1}"
        assert change.endswith(f"in {where}") or change.endswith(f"from {where}"), reason
        if d.after is None:
            assert change.startswith("missing"), reason
        elif d.kind == "recoloured":
            assert change == f"{d.after.color} in {where}" != f"{d.before.color} in {where}", reason
        elif d.kind == "reshaped":
            assert change == f"a {d.after.shape} in {where}" and d.after.shape != d.before.shape, reason
        elif d.kind == "resized":
            assert change.startswith("larger" if d.after.side > d.before.side else "smaller"), reason
        else:
            assert change.startswith("moved") and d.after.box != d.before.box, reason
    if "<tool_call>" in reply:
        box = re.search(r"I zoom into ([A-L]\d+), \[([\d, ]+)\]", reason)
        assert box and names[box.group(1)] == scene.cells[0], reason
        call = json.loads(reply[reply.index("<tool_call>") + 11 : reply.index("</tool_call>")])
        assert [int(v) for v in box.group(2).split(", ")] == call["arguments"]["bbox"], reason
        return
    said = re.search(r"So the differing cells are (.+)\.$", reason)
    assert said, reason
    assert sorted(re.findall(r"[A-L]\d+", said.group(1))) == sorted(
        re.findall(r"[A-L]\d+", answer_text(reply))
    )
