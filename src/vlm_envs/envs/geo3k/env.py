"""``Geo3kEnv``: a geometry problem with a diagram, a scoring tool, and a binary reward."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from vlm_envs.envs.config import MAX_GRADE_TIMEOUT, MAX_TURNS, EpisodeSeeds, plain, preset_of
from vlm_envs.envs.geo3k import messages, rationale
from vlm_envs.envs.geo3k.diagrams import DEFAULT_IMAGE_SIZE, check_image_size
from vlm_envs.envs.geo3k.problems import KINDS, Geo3kProblem, check_kinds, generate_problem
from vlm_envs.envs.geo3k.tool_calls import CLOSE_TAG, OPEN_TAG, CallStatus, ToolCall, parse_tool_call
from vlm_envs.protocol import IMAGE_PLACEHOLDER, Env, EpisodeFinishedError, Observation, StepInfo
from vlm_envs.state_signals import answer_distance
from vlm_envs.verify import Verdict, agrade, extract_boxed, grade

DEFAULT_MAX_TURNS = 3
#: ``difficulty``: problem kinds and replies. Easy: one formula on the labelled numbers (areas, arcs,
#: inscribed angles) with two answer checks; hard: trigonometry, angle algebra, composite polygons and
#: similar triangles, one reply and no check. Medium: the defaults (every kind).
PRESETS: dict[str, dict[str, Any]] = {
    "easy": {"kinds": ("triangle", "circle"), "max_turns": 3},
    "medium": {"kinds": tuple(KINDS), "max_turns": 3},
    "hard": {"kinds": ("right_triangle", "angle", "polygon", "similar"), "max_turns": 1},
}


@dataclass(frozen=True)
class _Turn:
    """What one model reply holds: its tool call, its last answer, and the answers still to grade."""

    call: ToolCall
    boxed: str | None
    answer: str | None
    to_grade: tuple[str, ...]


@dataclass
class _Episode:
    problem: Geo3kProblem
    #: A digest of the diagrams' pixels.
    diagrams: str = ""
    turn: int = 0
    #: A ``calc_score`` call has graded an answer correct.
    confirmed: bool = False
    #: A reply without a tool call ended the episode.
    answered: bool = False
    done: bool = False
    final_answer: str | None = None
    final_verdict: Verdict | None = None
    correct_turn: int = 0
    tool_calls: int = 0
    tool_call_errors: int = 0
    verdicts: dict[str, Verdict] = field(default_factory=dict)


class Geo3kEnv(Env):
    """Geo3k geometry: solve the problem in the diagram, optionally checking answers with a tool.

    Problems come from one fixed problem (a dataset row or slime sample), a list of problems
    (picked by ``seed % len``), or the procedural generator (seeded by ``reset(seed)``). A reply
    with a ``calc_score`` tool call gets a ``tool`` observation saying whether the answer matches;
    a reply without one ends the episode. The final answer is the last ``\\boxed{}`` the model wrote
    or its last tool answer, whichever came later; the reward is 1.0 if it is correct, else 0.0.
    Tool instructions are in the first observation (``system_prompt()`` is ``None``). ``difficulty``
    picks a preset of ``kinds`` and ``max_turns`` (:data:`PRESETS`); a knob given explicitly wins.
    """

    description: ClassVar[str] = "Geo3k geometry problems with diagrams and a calc_score answer-checking tool"
    #: The ``difficulty`` presets (:data:`PRESETS`).
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = PRESETS

    def __init__(
        self,
        *,
        problem: Geo3kProblem | None = None,
        problems: Sequence[Geo3kProblem] | None = None,
        max_turns: int | None = None,
        kinds: Sequence[str] | None = None,
        image_size: int = DEFAULT_IMAGE_SIZE,
        grade_timeout: float | None = None,
        difficulty: str | None = None,
    ):
        if problem is not None and problems is not None:
            raise ValueError("give either one problem or a list of problems, not both")
        if problems is not None and not len(problems):
            raise ValueError("the list of problems is empty")
        difficulty = plain(difficulty)
        preset = {} if difficulty is None else preset_of(PRESETS, difficulty, "Geo3k")
        max_turns = preset.get("max_turns", DEFAULT_MAX_TURNS) if max_turns is None else max_turns
        kinds = preset.get("kinds") if kinds is None else kinds
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or not 1 <= max_turns <= MAX_TURNS:
            raise ValueError(f"max_turns must be an int from 1 to {MAX_TURNS}, got {max_turns!r:.40}")
        if grade_timeout is not None and not (
            isinstance(grade_timeout, int | float)
            and not isinstance(grade_timeout, bool)
            and 0 < grade_timeout <= MAX_GRADE_TIMEOUT
        ):
            raise ValueError(
                f"grade_timeout must be None or seconds in (0, {MAX_GRADE_TIMEOUT:g}], "
                f"got {grade_timeout!r:.40}"
            )
        self.max_turns = max_turns
        self.difficulty = difficulty
        self.kinds = check_kinds(kinds)
        self.image_size = check_image_size(image_size)
        self.grade_timeout = grade_timeout
        self._problems = [problem] if problem is not None else list(problems or [])
        self._seeds = EpisodeSeeds()
        self._episode: _Episode | None = None

    def episode_seed(self) -> int | None:
        """The seed the current episode plays (an unseeded ``reset`` continues from the last one)."""
        return self._seeds.last

    def snapshot_config(self) -> dict[str, Any]:
        """The knobs (the preset resolved; ``build_env`` takes them back) and a digest of the problems given,
        if any: a snapshot of one sample's problem is refused by an env built for another."""
        config: dict[str, Any] = {
            "max_turns": self.max_turns,
            "kinds": list(self.kinds),
            "image_size": self.image_size,
            "grade_timeout": self.grade_timeout,
        }
        if self._problems:
            config["problems"] = self._problems_digest
        return config

    @functools.cached_property
    def _problems_digest(self) -> str:
        digest = hashlib.sha256()
        for p in self._problems:
            digest.update(json.dumps([p.text, p.answer, p.kind, p.source, p.id, p.solution]).encode())
            for image in p.images:
                digest.update(f"{image.mode}{image.size}".encode() + image.tobytes())
        return digest.hexdigest()

    @staticmethod
    def tools() -> list[dict[str, Any]]:
        """The scoring tool in OpenAI function format, for chat templates and OpenAI-compatible clients."""
        return [messages.TOOL_SCHEMA]

    @staticmethod
    def tool_call(answer: str) -> str:
        """The text of a well-formed ``calc_score`` call with ``answer`` (for scripted policies)."""
        return f"{OPEN_TAG}{json.dumps({'name': 'calc_score', 'arguments': {'answer': answer}})}{CLOSE_TAG}"

    @property
    def problem(self) -> Geo3kProblem:
        """The current episode's problem; ``RuntimeError`` before the first ``reset``."""
        if self._episode is None:
            raise RuntimeError("call reset() first")
        return self._episode.problem

    @property
    def reference_answer(self) -> str:
        """The ground-truth answer of the current episode (for a scripted ``reference`` policy)."""
        return self.problem.answer

    def oracle_response(self) -> str | None:
        """The reference player: checks the true answer with the tool first (when a turn is left
        for the final answer), then answers it in ``\\boxed{}``."""
        ep = self._episode
        if ep is None or ep.done:
            return None
        if ep.turn == 0 and self.max_turns > 1:
            return f"Let me check my answer. {self.tool_call(ep.problem.answer)}"
        return f"The answer is \\boxed{{{ep.problem.answer}}}."

    def oracle_rationale(self) -> str | None:
        """The relation that gives the answer, and why the oracle checks it first; None when done."""
        ep = self._episode
        if ep is None or ep.done:
            return None
        verdict = ep.verdicts.get(ep.problem.answer)
        confirmed = verdict is not None and verdict.correct and ep.tool_calls > ep.tool_call_errors
        return rationale.explain(ep.problem, ep.turn == 0 and self.max_turns > 1, confirmed)

    # -- where the episode stands -------------------------------------------------------------

    def state_text(self) -> str | None:
        """The problem (statement, a digest of its diagrams, the answer), whether the tool has confirmed an
        answer, whether the answer standing now is right, and how the episode ended; ``None`` before
        ``reset``."""
        ep = self._episode
        if ep is None:
            return None
        standing = "none" if ep.final_verdict is None else ("right" if ep.final_verdict.correct else "wrong")
        ended = "no" if not ep.done else ("by the answer" if ep.answered else "by the reply limit")
        return (
            f"Problem: {ep.problem.text}\nDiagrams: sha256:{ep.diagrams}\nAnswer: {ep.problem.answer}\n"
            f"Confirmed by the tool: {'yes' if ep.confirmed else 'no'}\nStanding answer: {standing}\n"
            f"Over: {ended}"
        )

    def distance_to_goal(self) -> int | None:
        """The reference player's turns: the tool confirms the answer (where a reply is left for the final
        one), then the answer; 0 once over with a right answer, ``UNREACHABLE`` after a wrong final one."""
        ep = self._episode
        if ep is None:
            return None
        right = ep.final_verdict is not None and ep.final_verdict.correct
        to_answer = 1 if ep.confirmed or right or self.max_turns == 1 else 2
        return answer_distance(ep.done and right, lost=ep.answered, to_answer=to_answer)

    # -- episode -------------------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A new episode on the problem for ``seed`` (``None``: the seed after the previous one).

        ``options``: ``{"kinds": [...]}`` draws a generated problem of those kinds; ``{"index": i}``
        takes problem ``i`` of the env's list.
        """
        options = dict(options or {})
        unknown = set(options) - {"kinds", "index"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; Geo3k takes 'kinds' and 'index'")
        seed = self._seeds.next(seed, first=0)
        if "index" in options:
            index = options["index"]
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self._problems):
                raise ValueError(
                    f"option index={index!r:.40} does not name one of {len(self._problems)} problems"
                )
            problem = self._problems[index]
        elif self._problems and "kinds" not in options:
            problem = self._problems[seed % len(self._problems)]
        else:
            kinds = check_kinds(options["kinds"]) if "kinds" in options else self.kinds
            problem = generate_problem(seed, kinds, self.image_size)
        self._episode = _Episode(problem, _digest(problem.images))
        text = _place_images(problem.text, len(problem.images))
        if not messages.already_instructed(text):
            text = f"{text}\n\n{messages.instructions(self.max_turns)}"
        obs = Observation.with_placeholders(text, problem.images, metadata={"problem_id": problem.id})
        info = {
            "problem": problem.text,
            "ground_truth": problem.answer,
            "kind": problem.kind,
            "source": problem.source,
            "problem_id": problem.id,
            "max_turns": self.max_turns,
        }
        return obs, info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Answer one model reply (see the class docstring)."""
        turn = self._read(response_text)
        truth = self.problem.answer
        verdicts = {a: grade(a, truth, timeout=self.grade_timeout) for a in turn.to_grade}
        return self._apply(turn, verdicts)

    async def astep(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """:meth:`step` with parsing in a thread and grading through the async grader."""
        turn = await asyncio.to_thread(self._read, response_text)
        truth = self.problem.answer
        verdicts = {a: await agrade(a, truth, timeout=self.grade_timeout) for a in turn.to_grade}
        return self._apply(turn, verdicts)

    def episode_reward(self) -> float:
        """1.0 if the final answer so far is correct, else 0.0."""
        ep = self._episode
        return 1.0 if ep is not None and ep.final_verdict is not None and ep.final_verdict.correct else 0.0

    def random_response(self, rng: random.Random) -> str:
        """Plausible and broken replies: tool calls, boxed answers, malformed calls, wrong tools."""
        answer = rng.choice([str(rng.randint(1, 200)), f"{rng.randint(1, 9)}\\sqrt{{{rng.randint(2, 7)}}}"])
        string_args = json.dumps({"name": "calc_score", "arguments": json.dumps({"answer": answer})})
        wrong_tool = json.dumps({"name": "calculator", "arguments": {"answer": answer}})
        return rng.choice(
            [
                f"Let me check. {self.tool_call(answer)}",
                f"The answer is \\boxed{{{answer}}}.",
                f"{OPEN_TAG}{string_args}{CLOSE_TAG}",
                f'{OPEN_TAG}{{"name": "calc_score", "arguments": {{"answer": {answer!r}{CLOSE_TAG}',
                f"{OPEN_TAG}{wrong_tool}{CLOSE_TAG}",
                f'{OPEN_TAG}{{"name": "calc_score", "arguments": {{}}}}{CLOSE_TAG}',
                f"{self.tool_call('1')} then {self.tool_call(answer)} and more text \\boxed{{{answer}}}",
                f"{OPEN_TAG}{{not json",
                "I am not sure.",
                "",
            ]
        )

    # -- step internals ------------------------------------------------------------------------

    def _read(self, text: str) -> _Turn:
        """Parse a reply; no episode state changes, so it can run in a thread."""
        ep = self._episode
        if ep is None:
            raise EpisodeFinishedError("call reset() before step()")
        if ep.done:
            raise EpisodeFinishedError("the episode is over; call reset() to start a new one")
        call = parse_tool_call(text)
        ok = call.status is CallStatus.OK
        boxed = extract_boxed(text[call.end :] if ok else text)
        answer = boxed if boxed is not None else call.answer
        wanted = [a for a in (call.answer, answer) if a is not None]
        return _Turn(call, boxed, answer, tuple(dict.fromkeys(a for a in wanted if a not in ep.verdicts)))

    def _apply(self, turn: _Turn, verdicts: dict[str, Verdict]) -> tuple[Observation, bool, StepInfo]:
        ep = self._episode
        assert ep is not None  # _read checked
        ep.turn += 1
        ep.verdicts.update(verdicts)
        call = turn.call
        if call.status is not CallStatus.NONE:
            ep.tool_calls += 1
            ep.tool_call_errors += call.status is not CallStatus.OK
        for answer in (call.answer, turn.answer):
            if answer is not None and ep.verdicts[answer].correct and not ep.correct_turn:
                ep.correct_turn = ep.turn
        if turn.answer is not None:
            ep.final_answer, ep.final_verdict = turn.answer, ep.verdicts[turn.answer]
        terminated = call.status is CallStatus.NONE
        truncated = not terminated and ep.turn >= self.max_turns
        ep.done, ep.answered = terminated or truncated, terminated
        call_correct = ep.verdicts[call.answer].correct if call.answer is not None else None
        ep.confirmed |= call_correct is True
        text = "" if terminated else messages.tool_feedback(call, call_correct)
        if ep.done:
            text = f"{text} {messages.episode_over(ep.final_answer, truncated=truncated)}".strip()
        elif ep.turn == self.max_turns - 1:
            text = f"{text}\n{messages.LAST_ANSWER}"
        obs = Observation(text=text, role="user" if terminated else "tool")
        info = StepInfo(
            reward=self.episode_reward() if ep.done else 0.0,
            terminated=terminated,
            truncated=truncated,
            metrics={
                "turn": ep.turn,
                "tool_calls": ep.tool_calls,
                "tool_call_errors": ep.tool_call_errors,
                "format_valid": call.status is CallStatus.OK or (terminated and turn.boxed is not None),
                "correct": ep.final_verdict is not None and ep.final_verdict.correct,
                "correct_turn": ep.correct_turn,
            },
            info={
                "tool_call": {"status": call.status.value, "name": call.name, "answer": call.answer},
                "tool_call_error": call.error,
                "final_answer": ep.final_answer,
                "verdict_reason": ep.final_verdict.reason if ep.final_verdict is not None else None,
                "ground_truth": ep.problem.answer,
            },
        )
        return obs, ep.done, info


def _digest(images: Sequence[Any]) -> str:
    """A digest of ``images``' modes, sizes and pixels."""
    digest = hashlib.sha256()
    for image in images:
        digest.update(f"{image.mode}{image.size}".encode() + image.tobytes())
    return digest.hexdigest()


def _place_images(text: str, n_images: int) -> str:
    """``text`` with exactly one ``<image>`` per image: kept where it has that many, else put first."""
    if text.count(IMAGE_PLACEHOLDER) == n_images:
        return text
    return IMAGE_PLACEHOLDER * n_images + text.replace(IMAGE_PLACEHOLDER, "").lstrip()
