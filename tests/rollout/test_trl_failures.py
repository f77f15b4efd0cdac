"""Rows that cannot play are refused when ``VlmEnvsGRPOTrainer`` is built (the first bad row's index
and reason), and training whose every episode keeps failing stops with the episodes' reasons, not
TRL's "All reward functions returned None"."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import datasets
import trl_helpers

from vlm_envs import registry
from vlm_envs.episode_carrier import EpisodeSpec, attach
from vlm_envs.rollout.trl import VlmEnvsGRPOTrainer
from vlm_envs.rollout.trl.rollout import EpisodeRow
from vlm_envs.rollout.trl.trainer import TRL_LOGGER, DatasetError, EpisodesFailedError
from vlm_envs.testing.env_faults import reward_faults

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def broken_env(monkeypatch: pytest.MonkeyPatch) -> str:
    """A registered env (rows may name it) whose config its own checks refuse: it never builds."""
    monkeypatch.setattr(registry, "_registered", dict(registry._registered))
    return registry.register("sokoban_minus_boxes", "vlm_envs.envs.sokoban", num_boxes=-3).name


def prompt_of(spec: EpisodeSpec) -> list[dict[str, Any]]:
    return attach([{"role": "user", "content": [{"type": "text", "text": "play"}]}], spec)


def build(tmp_path: Path, rows: Any, **kwargs: Any) -> VlmEnvsGRPOTrainer:
    processor = trl_helpers.build_tiny_processor()
    model = trl_helpers.build_tiny_qwen2_vl(processor)
    args = trl_helpers.config(tmp_path, **kwargs.pop("config", {}))
    return VlmEnvsGRPOTrainer(
        model=model, args=args, train_dataset=rows, processing_class=processor, **kwargs
    )


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ([{"role": "user", "content": [{"type": "text", "text": "no carrier"}]}], r"names no episode"),
        (prompt_of(EpisodeSpec("builtins:print", 1)), r"'builtins:print', which is refused"),
        (prompt_of(EpisodeSpec("sokoban", 1, history="window:2")), r"window:2.*one completion per prompt"),
        (
            [{"role": "user", "content": [{"type": "text", "text": "x"}], "vlm_envs": "{"}],
            r"carrier is not JSON",
        ),
        # a config value the env's config refuses: found when the dataset is checked, not when sampled
        (prompt_of(EpisodeSpec("sokoban", 1, {"num_boxes": "2"})), r"env_config num_boxes: Input should be"),
        (
            prompt_of(EpisodeSpec("minesweeper", 1, {"mines": 99})),
            r"env_config: 99 mines on 8x8 is too dense",
        ),
    ],
)
def test_the_first_bad_row_is_refused_by_index_and_reason(tmp_path: Path, bad: Any, reason: str) -> None:
    good = [{"prompt": prompt_of(EpisodeSpec("sokoban", seed))} for seed in range(3)]
    rows = datasets.Dataset.from_list([*good, {"prompt": bad}, {"prompt": bad}])
    with pytest.raises(DatasetError, match=rf"^train_dataset row 3: .*{reason}"):
        build(tmp_path, rows)


def test_rows_without_a_prompt_and_eval_datasets_are_checked(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"train_dataset row 0 has no 'prompt'"):
        build(tmp_path, [{"question": "where is my prompt?"}])
    good = datasets.Dataset.from_list([{"prompt": prompt_of(EpisodeSpec("sokoban", 0))}])
    bad = datasets.Dataset.from_list([{"prompt": prompt_of(EpisodeSpec("no_such_env", 0))}])
    with pytest.raises(DatasetError, match=r"eval_dataset\['hard'\] row 0: .*'no_such_env'"):
        build(tmp_path, good, eval_dataset={"easy": good, "hard": bad})


def test_training_whose_episodes_all_fail_stops_with_their_reason(
    tmp_path: Path, broken_env: str, caplog: pytest.LogCaptureFixture
) -> None:
    rows = datasets.Dataset.from_list([{"prompt": prompt_of(EpisodeSpec(broken_env, s))} for s in range(4)])
    trainer = build(tmp_path, rows, max_failed_steps=2, config={"max_steps": 5})
    with caplog.at_level(logging.WARNING), pytest.raises(EpisodesFailedError) as raised:
        trainer.train()
    message = str(raised.value)
    assert "every episode FAILED in 2 generation round(s) in a row" in message
    assert "4x building the env: ValidationError" in message and "num_boxes" in message
    assert trainer.state.global_step == 1  # the first such round trained (nothing), the second stopped
    trl_says = [r for r in caplog.records if r.name == TRL_LOGGER and "returned None" in r.getMessage()]
    assert not trl_says, "TRL's warning about failed episodes names the wrong cause"


def test_a_round_with_any_episode_that_played_resets_the_count(tmp_path: Path) -> None:
    rows = datasets.Dataset.from_list([{"prompt": prompt_of(EpisodeSpec("sokoban", 0))}])
    trainer = build(tmp_path, rows, max_failed_steps=2)

    def row(status: str) -> EpisodeRow:
        return EpisodeRow([1], [1], [0.0], [0], {"status": status, "error": "env: boom"}, {}, "")

    trainer.count_failures([row("failed"), row("failed")])
    trainer.count_failures([row("failed"), row("completed")])
    trainer.count_failures([row("failed"), row("failed")])
    with pytest.raises(EpisodesFailedError, match=r"2x env: boom"):
        trainer.count_failures([row("failed"), row("failed")])
    with pytest.raises(ValueError, match="max_failed_steps"):
        build(tmp_path, rows, max_failed_steps=0)


def test_a_nan_reward_stops_training_naming_the_reward(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The episode core fails an episode whose reward is NaN (vlm_envs.rewards.check_reward); the
    trainer names that, where TRL alone said "All reward functions returned None"."""
    with reward_faults(["sokoban"], ["nan"]) as (name,):
        rows = trl_helpers.dataset(name, 2, max_turns=1)
        trainer = build(tmp_path, rows, max_failed_steps=1, config={"max_steps": 3})
        with caplog.at_level(logging.WARNING), pytest.raises(EpisodesFailedError, match=r"4x reward: .*nan"):
            trainer.train()
    assert trainer.state.global_step == 0
    assert not [r for r in caplog.records if "returned None" in r.getMessage()]
