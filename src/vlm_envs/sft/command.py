"""What ``vlm-envs make-sft`` prints: what it wrote, and how each trainer reads it."""

from __future__ import annotations

from vlm_envs.sft.build import DATA_FILES, SftFiles
from vlm_envs.sft.formats import LLAMAFACTORY_NAME


def summary(files: SftFiles) -> str:
    """Lines for the user: the counts, the source's success rate per env, and how to train."""
    manifest = files.manifest
    lines = [f"wrote {files.rows} rows ({files.conversations} conversations) to {files.out} ({files.format})"]
    for name, entry in manifest["envs"].items():
        rate = entry["source_success_rate"]
        rate_text = "n/a" if rate is None else f"{rate:.1%}"
        lines.append(
            f"  {name}: kept {entry['kept']} of {entry['episodes']} episodes (source success {rate_text})"
        )
    data = files.out / DATA_FILES[files.format]
    windowed = manifest["history"] != "full"
    if files.format == "trl":
        lines.append(
            f'train: datasets.load_dataset("parquet", data_files="{data}")["train"] as SFTTrainer\'s '
            "train_dataset (prompt-completion rows: the loss is on the replies only)"
        )
    elif files.format == "swift":
        lines.append(f"train: swift sft --dataset {data} (past replies of a windowed turn carry loss: false)")
    else:
        mask = " --mask_history true" if windowed else ""
        lines.append(
            f"train: llamafactory-cli train ... --dataset_dir {files.out} --dataset {LLAMAFACTORY_NAME}{mask}"
        )
    return "\n".join(lines)
