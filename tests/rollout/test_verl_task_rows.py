"""verl rows without a seed (a user's own geometry3k rows, as verl's dataset hands them over: the images in
``raw_prompt``'s image parts, the answer in ``reward_model``) play their own problem, image and answer."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip(
    "verl.experimental.agent_loop.agent_loop",
    reason="verl is not installed (pip install 'vlm-envs[verl]'; verl requires transformers<5.11)",
)

from PIL import Image
from row_helpers import oracle_replies
from sft_helpers import ReplyEngine
from verl.experimental.agent_loop import agent_loop
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl_support import SAMPLING, ScriptedServerManager, no_rollout_trace, verl_config

from vlm_envs.rollout import verl as loop_module
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.testing import build_tiny_processor

PROBLEM = "Find x. Give the answer in \\boxed{}."


@pytest.fixture(autouse=True)
def untraced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent_loop, "rollout_trace_attr", no_rollout_trace)


def geometry3k_row(image: Any, answer: str = "12") -> dict[str, Any]:
    """A row of verl's geometry3k example as its dataset hands it to an agent loop, naming our env."""
    return {
        "raw_prompt": [
            {
                "role": "user",
                "content": [{"type": "image", "image": image}, {"type": "text", "text": PROBLEM}],
            }
        ],
        "reward_model": {"style": "rule", "ground_truth": answer},
        "extra_info": {"env": "geo3k", "split": "train", "index": 3, "answer": answer, "question": PROBLEM},
        "data_source": "hiyouga/geometry3k",
    }


def play(row: dict[str, Any], replies: list[str]) -> Any:
    config = verl_config(["data.max_prompt_length=2048", "data.max_response_length=1024"])
    processor = build_tiny_processor()
    server = ScriptedServerManager(ReplyEngine(ChatCodec(processor), replies))
    loop = loop_module.VlmEnvsAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=server,
        tokenizer=processor.tokenizer,
        processor=processor,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
    )
    return asyncio.run(loop.run(dict(SAMPLING), **row)), server


def test_a_geometry3k_row_without_a_seed_plays_its_own_problem_image_and_answer() -> None:
    image = Image.new("RGB", (56, 56), (200, 30, 30))
    row = geometry3k_row(image)
    task = SimpleNamespace(prompt=row["raw_prompt"], label="12", images=[image])
    out, server = play(row, oracle_replies("geo3k", None, sample=task))
    record = out.extra_fields["vlm_envs"]
    assert record["status"] == "completed" and out.reward_score == 1.0, record
    assert server.requests[0]["images"] and server.requests[0]["images"][0].getpixel((0, 0)) == (200, 30, 30)


def test_the_answer_comes_from_extra_info_where_the_row_has_no_reward_model() -> None:
    image = Image.new("RGB", (56, 56), "white")
    row = {**geometry3k_row(image, "7"), "reward_model": None}
    out, _ = play(row, ["\\boxed{7}"] * 3)
    assert out.reward_score == 1.0, out.extra_fields["vlm_envs"]


def test_an_image_part_naming_a_file_fails_the_row_in_one_line() -> None:
    out, server = play(geometry3k_row("/etc/passwd"), ["\\boxed{12}"])
    record = out.extra_fields["vlm_envs"]
    assert record["status"] == "failed" and not server.requests
    assert record["error"] == "RowError: an image part of raw_prompt holds str, not an image"
