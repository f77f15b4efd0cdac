"""``--format trl --history window:K`` data (one prompt-completion row per reply) through TRL's own
SFTTrainer: its collator masks everything but the reply, its ids are the rollout's, and a few real
training steps lower the loss on a tiny Qwen2-VL. (Whole conversations: test_trl_conversations.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("trl")

import datasets
import torch
from sft_helpers import MAX_TURNS, rollout
from trl import SFTConfig, SFTTrainer

from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.sft import OracleSource, make_sft
from vlm_envs.testing import build_tiny_processor, build_tiny_qwen2_vl


@pytest.fixture(scope="module")
def trl_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("trl") / "sokoban"
    # the per-reply layout: a window as long as the turn cap keeps every past turn in each row's prompt
    make_sft(
        OracleSource(("sokoban",), 3, max_turns=MAX_TURNS), out, fmt="trl", history=f"window:{MAX_TURNS}"
    )
    return out


def _trainer(data: Path, tmp_path: Path, steps: int) -> SFTTrainer:
    processor = build_tiny_processor()
    model = build_tiny_qwen2_vl(processor).train()
    config = SFTConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=2,
        max_steps=steps,
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
        max_length=None,
        seed=0,
    )
    dataset = datasets.load_dataset("parquet", data_files=str(data / "train.parquet"))["train"]
    return SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=processor)


def test_trls_collator_trains_on_the_replies_only_and_sees_the_rollouts_ids(trl_data: Path, tmp_path: Path):
    trainer = _trainer(trl_data, tmp_path, steps=1)
    rows = trainer.train_dataset
    codec = ChatCodec(trainer.processing_class)
    vision = set(codec.special_image_ids)
    for index in range(len(rows)):
        row = rows[index]
        batch = trainer.data_collator([row])
        ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
        first = next(i for i, label in enumerate(labels) if label != -100)
        # every prompt token (system, user, image pads) is masked, every completion token trained
        assert all(label == -100 for label in labels[:first])
        assert labels[first:] == ids[first:]
        assert not vision & set(ids[first:])
        assert codec.decode(ids[first:], skip_special_tokens=False) == (
            row["completion"][0]["content"][0]["text"] + "<|im_end|>\n"
        )
        # the ids are the rollout's context at that turn, then its reply (and the template's newline)
        demo_replies = [r["completion"][0]["content"][0]["text"] for r in rows if r["seed"] == row["seed"]]
        traj = rollout(codec, "sokoban", row["seed"], demo_replies)
        context = list(traj.context(row["turn"]).ids)
        reply = list(traj.turns[row["turn"]].reply.ids)
        assert ids == context + reply + codec.tokenize("\n")
        assert first == len(context)


def test_sft_steps_lower_the_loss_on_the_demonstrations(trl_data: Path, tmp_path: Path) -> None:
    trainer = _trainer(trl_data, tmp_path, steps=8)
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(len(trainer.train_dataset))])
    before_params = [p.detach().clone() for p in trainer.model.parameters()]

    def loss() -> float:
        with torch.no_grad():
            return float(trainer.model(**batch).loss)

    start = loss()
    trainer.train()
    end = loss()
    assert end < start - 0.3, (start, end)
    assert any(not torch.equal(a, b) for a, b in zip(before_params, trainer.model.parameters(), strict=True))
