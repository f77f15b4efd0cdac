"""Run by test_trl_conversations.py in a child process whose PYTHONPATH puts transformers 5.24 first
(TRL's assistant-only loss on images needs transformers>=5.18; the venv holds verl's <5.11).

``python trl_conversation_child.py DATA_DIR OUT_JSON FAMILY...``: for each family and every
``--format trl`` row of DATA_DIR, TRL's own SFTTrainer (``assistant_only_loss=True``, the family's chat
template as Qwen ship it, stored in TRL) collates the row; the child writes what the test checks: per
row, the ids, the labels, the image grids and the rollout's tokens of the same episode; then the loss
before and after a few training steps.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import datasets
import torch
import transformers
from trl import SFTConfig, SFTTrainer
from trl.chat_template_utils import qwen2_5_vl_chat_template, qwen3_vl_chat_template

sys.path.insert(0, str(Path(__file__).parents[1] / "support"))
from sft_helpers import rollout

from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.sft.trl_template import training_chat_template
from vlm_envs.testing import build_tiny_processor, build_tiny_qwen2_vl, build_tiny_qwen3_vl

#: The chat template each family ships (Qwen2-VL's is byte-identical to Qwen2.5-VL's), as TRL stores it.
SHIPPED = {"qwen2_vl": qwen2_5_vl_chat_template, "qwen3_vl": qwen3_vl_chat_template}


def main() -> None:
    data, out = Path(sys.argv[1]), Path(sys.argv[2])
    results = {family: one_family(data, family, out.parent) for family in sys.argv[3:]}
    out.write_text(json.dumps({"transformers": transformers.__version__, **results}))


def one_family(data: Path, family: str, tmp: Path) -> dict:
    """What TRL made of the rows of ``data`` with the ``family``'s shipped template."""
    processor = build_tiny_processor(family)
    processor.chat_template = processor.tokenizer.chat_template = SHIPPED[family]
    assert training_chat_template(processor) is not None  # TRL swaps in its marked version
    build = build_tiny_qwen2_vl if family == "qwen2_vl" else build_tiny_qwen3_vl
    model = build(processor).train()
    config = SFTConfig(
        output_dir=str(tmp / "trainer"),
        use_cpu=True,
        bf16=False,
        assistant_only_loss=True,
        per_device_train_batch_size=4,
        max_steps=3,
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
        max_length=None,
        seed=0,
    )
    dataset = datasets.load_dataset("parquet", data_files=str(data / "train.parquet"))["train"]
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=processor)
    codec = ChatCodec(processor)
    rows = []
    for index in range(len(trainer.train_dataset)):
        row = trainer.train_dataset[index]
        batch = trainer.data_collator([row])
        replies = [m["content"][0]["text"] for m in dataset[index]["messages"] if m["role"] == "assistant"]
        traj = rollout(codec, dataset[index]["env"], dataset[index]["seed"], replies)
        rows.append(
            {
                "env": dataset[index]["env"],
                "roles": [m["role"] for m in dataset[index]["messages"]],
                "images": len(dataset[index]["images"]),
                "ids": batch["input_ids"][0].tolist(),
                "labels": batch["labels"][0].tolist(),
                "grids": batch["image_grid_thw"].tolist(),
                "pixel_rows": batch["pixel_values"].shape[0],
                "rollout": list(traj.tokens),
            }
        )
    everything = trainer.data_collator([trainer.train_dataset[i] for i in range(len(trainer.train_dataset))])

    def loss() -> float:
        with torch.no_grad():
            return float(trainer.model(**everything).loss)

    start = loss()
    trainer.train()
    return {
        "rows": rows,
        "loss": [start, loss()],
        "special": {
            "im_start": codec.tokenizer.convert_tokens_to_ids("<|im_start|>"),
            "im_end": codec.end_of_turn_id,
            "assistant": codec.tokenize("assistant\n"),
            "newline": codec.tokenize("\n"),
            "vision": sorted(codec.special_image_ids),
        },
    }


if __name__ == "__main__":
    main()
