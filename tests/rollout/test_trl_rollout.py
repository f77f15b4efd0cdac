"""The TRL rollout function, reward function and trainer, called directly on a real trainer: which
episode each prompt plays, what a failure looks like, what is refused, and the TRL version pin."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import torch
import trl
import trl_helpers
from trl import GRPOConfig

from vlm_envs.episode_carrier import EpisodeSpec, attach
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.record import RECORD_KEY
from vlm_envs.rollout.trl import (
    TESTED_TRL_VERSIONS,
    TrlVersionError,
    VlmEnvsGRPOTrainer,
    check_trl,
    episode_metrics,
    episode_reward,
    rollout_func,
)
from vlm_envs.rollout.trl.engines import image_runs
from vlm_envs.rollout.trl.rollout import plan_episode, turn_tokens
from vlm_envs.rollout.trl.trainer import trl_problems


@pytest.fixture(scope="module")
def trainer(tmp_path_factory: pytest.TempPathFactory) -> VlmEnvsGRPOTrainer:
    torch.set_num_threads(1)
    data = trl_helpers.dataset("sokoban", 2, max_turns=2)
    args = trl_helpers.config(tmp_path_factory.mktemp("trl"), max_completion_length=200)
    return trl_helpers.trainer(data, args, cls=VlmEnvsGRPOTrainer)


def prompt_of(spec: EpisodeSpec, text: str = "anything") -> list[dict[str, Any]]:
    return attach([{"role": "user", "content": [{"type": "text", "text": text}]}], spec)


def test_each_prompt_plays_the_episode_its_carrier_names(trainer: VlmEnvsGRPOTrainer) -> None:
    """The env's own first observation is the prompt, whatever text the user's prompt holds; the
    completion keeps the budget; every entry is a consistent TRL entry."""
    prompts = [prompt_of(EpisodeSpec("sokoban", 4, max_turns=2), text=f"user text {i}") for i in range(2)]
    out = rollout_func(prompts, trainer)
    assert {len(v) for v in out.values()} == {2}
    first = trl_helpers.dataset("sokoban", 5, max_turns=2)[4]["prompt"]
    codec = ChatCodec(trainer.processing_class)
    obs_text = first[-1]["content"][0]["text"]
    for prompt_ids, completion, logprobs, mask, record in zip(
        out["prompt_ids"],
        out["completion_ids"],
        out["logprobs"],
        out["env_mask"],
        out[RECORD_KEY],
        strict=True,
    ):
        assert obs_text in codec.decode(prompt_ids) and "user text" not in codec.decode(prompt_ids)
        assert len(completion) == len(logprobs) == len(mask) <= 200
        assert record["env"] == "sokoban" and record["seed"] == 4 and record["num_turns"] <= 2
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask, strict=True) if not m)


def test_a_failed_episode_is_one_masked_token_without_advantage(trainer: VlmEnvsGRPOTrainer) -> None:
    out = rollout_func([prompt_of(EpisodeSpec("no_such_env", 1))], trainer)
    codec = ChatCodec(trainer.processing_class)
    assert out["prompt_ids"] == [[codec.end_of_turn_id]] and out["completion_ids"] == [[codec.end_of_turn_id]]
    assert out["env_mask"] == [[0]] and out["logprobs"] == [[0.0]]
    record = out[RECORD_KEY][0]
    assert record["status"] == "failed" and "no_such_env" in record["error"]
    assert episode_reward([None], [None], **{RECORD_KEY: [record]}) == [None]


@pytest.mark.parametrize("env", ["builtins:print", "os:system", "FILE"])
def test_a_carrier_never_chooses_code_to_run(
    trainer: VlmEnvsGRPOTrainer, env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A downloaded row naming a callable or a module file: FAILED, saying why; nothing imported or called."""
    marker = tmp_path / "imported"
    module = tmp_path / "row_chosen_env.py"
    module.write_text(f"open({str(marker)!r}, 'w').close()\ndef build_env(**kw):\n    raise SystemExit\n")
    calls: list[Any] = []
    monkeypatch.setattr("os.system", lambda *a: calls.append(a))
    out = rollout_func([prompt_of(EpisodeSpec(str(module) if env == "FILE" else env, 1))], trainer)
    record = out[RECORD_KEY][0]
    assert (
        record["status"] == "failed"
        and "refused" in record["error"]
        and "vlm_envs.register" in record["error"]
    )
    assert not marker.exists() and calls == [] and capsys.readouterr().out == ""


def test_a_prompt_without_a_carrier_or_with_a_window_is_refused(trainer: VlmEnvsGRPOTrainer) -> None:
    with pytest.raises(ValueError, match=r"names no episode.*make-dataset ENV --trainer trl"):
        rollout_func([[{"role": "user", "content": "hello"}]], trainer)
    with pytest.raises(ValueError, match=r"window:2.*one completion per prompt"):
        rollout_func([prompt_of(EpisodeSpec("sokoban", 1, history="window:2"))], trainer)


def test_budgets_and_turn_caps_resolve_from_the_config_and_the_carrier(tmp_path: Path) -> None:
    plan = plan_episode(prompt_of(EpisodeSpec("sokoban", 1, max_turns=4)), 300, 20)
    assert (plan.episode.max_turns, plan.episode.max_response_tokens, plan.episode.max_new_tokens) == (
        4,
        300,
        20,
    )
    assert plan_episode(prompt_of(EpisodeSpec("sokoban", 1, {"max_turns": 6})), 300).episode.max_turns == 6
    assert plan_episode(prompt_of(EpisodeSpec("sokoban", 1)), None).episode.max_turns == 8
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, max_completion_length=300)
    assert turn_tokens(args) == 300
    args.generation_kwargs = {"max_tokens": 40}
    assert turn_tokens(args) == 40


def test_rewards_and_metrics_of_a_batch() -> None:
    records = [
        {"status": "completed", "reward": 1.0, "num_turns": 2, "metrics": {"success": True}},
        {"status": "truncated", "reward": 0.0, "num_turns": 4, "metrics": {}},
        {"status": "failed", "reward": 0.0, "num_turns": 0, "metrics": {}},
        {"status": "aborted", "reward": 0.0, "num_turns": 1, "metrics": {}},
        {"status": "completed", "reward": None, "num_turns": 1, "metrics": {}},  # no episode reward
    ]
    logged: dict[str, float] = {}
    rewards = episode_reward([None] * 5, [None] * 5, log_metric=logged.__setitem__, **{RECORD_KEY: records})
    assert rewards == [1.0, 0.0, None, None, None]
    assert logged["vlm_envs/success"] == pytest.approx(0.2) and logged["vlm_envs/num_turns"] == pytest.approx(
        1.6
    )
    assert logged["vlm_envs/status/completed"] == pytest.approx(0.4)
    assert math.isclose(sum(v for k, v in episode_metrics(records).items() if k.startswith("status/")), 1.0)


def test_image_runs_point_at_each_images_pads() -> None:
    assert image_runs([1, 9, 9, 2, 9, 3, 9, 9, 9], 9) == [
        {"offset": 1, "length": 2},
        {"offset": 4, "length": 1},
        {"offset": 6, "length": 3},
    ]


def test_trls_other_routes_and_colocated_vllm_are_refused(tmp_path: Path) -> None:
    processor = trl_helpers.build_tiny_processor()
    model = trl_helpers.build_tiny_qwen2_vl(processor)
    args = trl_helpers.config(tmp_path)
    with pytest.raises(ValueError, match="tools and environment_factory"):
        VlmEnvsGRPOTrainer(model=model, args=args, processing_class=processor, tools=[len])
    colocated = trl_helpers.config(tmp_path, use_vllm=True, vllm_mode="colocate")
    with pytest.raises(ValueError, match=r"vllm_mode='colocate'.*trl vllm-serve"):
        VlmEnvsGRPOTrainer(model=model, args=colocated, processing_class=processor)


def test_the_installed_trl_is_a_tested_one_with_what_the_trainer_relies_on() -> None:
    assert trl.__version__ in TESTED_TRL_VERSIONS, (
        f"TRL {trl.__version__} is installed; VlmEnvsGRPOTrainer was tested with {TESTED_TRL_VERSIONS}: "
        "run the TRL tests against it and add it, or pin a tested TRL"
    )
    assert trl_problems() == [], f"TRL {trl.__version__} changed what VlmEnvsGRPOTrainer relies on"


def test_a_trl_that_changed_what_the_trainer_relies_on_is_refused_by_name() -> None:
    class ChangedTrainer(trl.GRPOTrainer):
        def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep):
            raise NotImplementedError

    with pytest.raises(TrlVersionError, match=r"TRL 9\.9\.9 changed.*no longer takes .*pixel_values"):
        check_trl("9.9.9", ChangedTrainer)
    with pytest.warns(UserWarning, match=r"tested with TRL 1\.16\.0, not 9\.9\.9"):
        check_trl("9.9.9")
