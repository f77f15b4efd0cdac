"""What ``vlm-envs make-sft`` prints: progress on a terminal, what it wrote, and how to train on it."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from vlm_envs.sft.build import SftFiles
from vlm_envs.sft.formats import LLAMAFACTORY_NAME
from vlm_envs.sft.trl_template import PER_REPLY
from vlm_envs.sft.writers import DATA_FILES


class ProgressBar:
    """``make-sft [####------] 120/500 episodes, kept 118`` redrawn in place, at most 10 times a second."""

    WIDTH = 24

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream, self.last, self.drawn = stream, 0.0, False

    def __call__(self, done: int, total: int, kept: int) -> None:
        now = time.monotonic()
        if done < total and now - self.last < 0.1:
            return
        self.last, self.drawn = now, True
        filled = self.WIDTH * done // max(total, 1)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        self.stream.write(f"\rmake-sft [{bar}] {done}/{total} episodes, kept {kept}")
        self.stream.flush()

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def summary(files: SftFiles) -> str:
    """Lines for the user: the counts, the source's success rate per env, and how to train."""
    manifest = files.manifest
    lines = [f"wrote {files.rows} rows ({files.conversations} conversations) to {files.out} ({files.format})"]
    for name, entry in manifest["envs"].items():
        rate = entry["source_success_rate"]
        rate_text = "n/a" if rate is None else f"{rate:.1%}"
        extra = "".join(f", {count} skipped ({why})" for why, count in entry.get("skipped", {}).items())
        extra += f", {len(entry['failed'])} failed" if entry.get("failed") else ""
        kept = f"kept {entry['kept']} of {entry['episodes']} episodes"
        lines.append(f"  {name}: {kept} (source success {rate_text}){extra}")
    data = files.out / DATA_FILES[files.format]
    windowed = manifest["history"] != "full"
    if files.format == "trl" and windowed:
        lines.append(
            f'train: datasets.load_dataset("parquet", data_files="{data}")["train"] as SFTTrainer\'s '
            "train_dataset (prompt-completion rows: the loss is on each row's reply only)"
        )
    elif files.format == "trl":
        lines.append(
            f'train: datasets.load_dataset("parquet", data_files="{data}")["train"] as SFTTrainer\'s '
            "train_dataset with SFTConfig(assistant_only_loss=True) (one conversation per episode; TRL masks "
            f"Qwen2-VL, Qwen2.5-VL and Qwen3-VL templates; for other models use {PER_REPLY})"
        )
    elif files.format == "swift":
        lines.append(
            f"train: ROOT_IMAGE_DIR={files.out} swift sft --dataset {data} (image paths are relative to the "
            "folder; past replies of a windowed turn carry loss: false)"
        )
    else:
        mask = " --mask_history true" if windowed else ""
        lines.append(
            f"train: llamafactory-cli train ... --dataset_dir {files.out} --dataset {LLAMAFACTORY_NAME}{mask}"
        )
        if manifest.get("tool_turns"):
            lines.append(
                "note: LLaMA-Factory's qwen2_vl template renders a tool turn as a user turn with "
                "<tool_response>, not the tool role of Qwen2.5-VL's own template and the RL rollout; "
                "qwen3_vl_nothink renders it as Qwen3-VL's does"
            )
    return "\n".join(lines)
