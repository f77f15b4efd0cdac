"""The frame of the bundled board envs: how they show a board and word their turns.

A :class:`BoardEnv` is an :class:`~vlm_envs.envs.episodic.EpisodicEnv` whose config says, through its
``render_mode`` (:class:`~vlm_envs.envs.config.RenderedConfig`), whether the board shows as an image, as
text or both. Every observation is a header (the instructions, or a turn's feedback), the board as shown,
and a status line; the env gives the board's pictures and words, its rules stay its own.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from typing import ClassVar, TypeVar

from PIL import Image

from vlm_envs.envs.config import RenderedConfig
from vlm_envs.envs.episodic import EpisodeState, EpisodicEnv
from vlm_envs.protocol import Observation

RenderedT = TypeVar("RenderedT", bound=RenderedConfig)
EpisodeT = TypeVar("EpisodeT", bound=EpisodeState)


def ending(success: bool, over: bool, solved: str, left: str = "turns") -> str | None:
    """The sentence that closes a turn's feedback: ``solved`` on success, else where the episode is ``over``
    that no ``left`` (``turns``, ``moves or turns``) are left; ``None`` while it goes on."""
    if success:
        return solved
    return f"The episode is over: no {left} are left." if over else None


class BoardEnv(EpisodicEnv[RenderedT, EpisodeT]):
    """An episodic env that shows a board as its config's ``render_mode`` says, under a header."""

    #: The line that closes the instructions and every turn's feedback, just above the board.
    board_heading: ClassVar[str] = "The board now:"

    @abc.abstractmethod
    def _board_image(self) -> Image.Image:
        """The board now, as an image."""

    @abc.abstractmethod
    def _board_text(self) -> str:
        """The board now, as text."""

    @abc.abstractmethod
    def _status(self) -> str:
        """The line under the board (``Turns left: 3.``)."""

    def _observation(self, header: str) -> Observation:
        """``header``, the board's image and/or text as the config shows it, and the status line."""
        cfg = self.config
        pieces: list[str | Image.Image] = [header + "\n"]
        if cfg.shows_image:
            pieces += [self._board_image(), "\n"]
        if cfg.shows_text:
            pieces.append(self._board_text() + "\n")
        pieces.append(self._status())
        return Observation.compose(*pieces)

    def _rules_header(
        self,
        rules: Iterable[str],
        *,
        image_legend: str | None = None,
        text_legend: str | None = None,
        answer: str,
    ) -> str:
        """The first observation's header: the ``rules``, the legend of each view of the board shown, how to
        ``answer``, and the board heading; one line each."""
        cfg = self.config
        lines = list(rules)
        if cfg.shows_image and image_legend is not None:
            lines.append(image_legend)
        if cfg.shows_text and text_legend is not None:
            lines.append(text_legend)
        return "\n".join([*lines, answer, self.board_heading])

    def _turn_header(self, error: str | None, refused: str, played: str, ending: str | None = None) -> str:
        """A turn's feedback: ``Invalid answer: <error>. <refused>`` for a malformed answer, else ``played``;
        then the ``ending`` (where the episode ended) and the board heading."""
        text = f"Invalid answer: {error}. {refused}" if error is not None else played
        if ending is not None:
            text += " " + ending
        return f"{text}\n{self.board_heading}"
