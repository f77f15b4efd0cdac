"""The board envs' shared frame (vlm_envs.envs.board) and the answer reading they share."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest
from PIL import Image

from vlm_envs.envs.answers import answer_block, shown
from vlm_envs.envs.board import BoardEnv, ending
from vlm_envs.envs.config import RenderedConfig, RenderMode
from vlm_envs.protocol import Observation, StepInfo


class _DotConfig(RenderedConfig):
    render_mode: RenderMode = "vision"
    max_turns: int = 3


@dataclasses.dataclass
class _Dot:
    turns: int = 0
    done: bool = False
    success: bool = False


class _DotEnv(BoardEnv[_DotConfig, _Dot]):
    """A one-cell board: any reply ends it."""

    config_class = _DotConfig
    board_heading = "The dot now:"

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        self._configure(options)
        self._ep = _Dot()
        header = self._rules_header(
            ["Look at the dot."], image_legend="It is red.", text_legend="'o' is the dot.", answer="Say hi."
        )
        return self._observation(header), {}

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        ep = self._playing()
        ep.turns, ep.done = 1, True
        error = None if response_text else "the reply is empty"
        header = self._turn_header(error, "Nothing happened.", "You said hi.", ending(False, True, "Won!"))
        return self._binary_step(self._observation(header), False, True, {}, {})

    def _board_image(self) -> Image.Image:
        return Image.new("RGB", (2, 2), "red")

    def _board_text(self) -> str:
        return "o"

    def _status(self) -> str:
        return f"Turns left: {self.config.max_turns - self._episode().turns}."


@pytest.mark.parametrize(
    ("mode", "images", "lines"),
    [
        ("vision", 1, ["Look at the dot.", "It is red.", "Say hi.", "The dot now:", "", "Turns left: 3."]),
        (
            "text",
            0,
            ["Look at the dot.", "'o' is the dot.", "Say hi.", "The dot now:", "o", "Turns left: 3."],
        ),
        (
            "vision+text",
            1,
            [
                "Look at the dot.",
                "It is red.",
                "'o' is the dot.",
                "Say hi.",
                "The dot now:",
                "",
                "o",
                "Turns left: 3.",
            ],
        ),
    ],
)
def test_observation_shows_the_board_as_render_mode_says(
    mode: RenderMode, images: int, lines: list[str]
) -> None:
    obs, _ = _DotEnv(render_mode=mode).reset(seed=0)
    assert len(obs.images) == images
    assert obs.text.split("\n") == lines


def test_turn_header_words_a_malformed_answer_and_the_ending() -> None:
    env = _DotEnv(render_mode="text")
    env.reset(seed=0)
    obs, done, _ = env.step("")
    assert done
    assert obs.text.startswith(
        "Invalid answer: the reply is empty. Nothing happened. The episode is over: no turns are left.\n"
        "The dot now:\n"
    )
    env.reset(seed=0)
    assert env.step("hi")[0].text.startswith("You said hi. The episode is over")


def test_ending() -> None:
    assert ending(True, True, "Solved!") == "Solved!"
    assert (
        ending(False, True, "Solved!", "moves or turns") == "The episode is over: no moves or turns are left."
    )
    assert ending(False, False, "Solved!") is None


def test_from_trainer_reads_the_sample_then_config_and_args() -> None:
    sample = {"metadata": {"env_config": {"render_mode": "text", "max_turns": 9}}}
    args = type("Args", (), {"max_turns": 5})()
    assert _DotEnv.from_trainer(sample, args).config.max_turns == 5
    assert _DotEnv.from_trainer(sample, args, max_turns=2).config == _DotConfig(
        render_mode="text", max_turns=2
    )
    with pytest.raises(ValueError, match="extra"):
        _DotEnv.from_trainer(colour="red")


def test_answer_block_may_leave_an_empty_answer_to_the_env() -> None:
    assert answer_block("<answer> </answer>").error == "the answer is empty"
    assert answer_block("<answer> </answer>", allow_empty=True) == ("", None)


def test_shown_keeps_only_the_symbols_asked_for() -> None:
    assert shown("x+<|im_end|>") == "x+??im_end??"
    assert shown("x+_-", symbols="_-") == "x?_-"
