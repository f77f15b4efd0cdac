"""``vlm-envs make-dataset ENV --trainer trl``: TRL's rows for every registered env, and the training
script it writes and prints, run as it stands (but for loading a model from the hub)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import datasets
import pytest

pytest.importorskip("trl")

import torch
from trl.data_utils import prepare_multimodal_messages

from vlm_envs import list_envs
from vlm_envs.cli import main
from vlm_envs.datasets.build import make_dataset
from vlm_envs.episode_carrier import EpisodeSpec, find
from vlm_envs.testing import build_tiny_processor, build_tiny_qwen2_vl, save_tiny_model


@pytest.mark.parametrize("env", [spec.name for spec in list_envs()])
def test_every_env_writes_rows_trl_reads(env: str, tmp_path: Path) -> None:
    files = make_dataset(env, 2, tmp_path / "train.parquet", seed=5, max_turns=4, trainer="trl")
    assert files.script == tmp_path / "train_grpo.py" and files.script.is_file()
    rows = datasets.load_dataset("parquet", data_files=str(files.parquet))["train"]
    assert rows.column_names == ["prompt", "images"]
    for seed, row in zip((5, 6), rows, strict=True):
        assert find(row["prompt"]) == EpisodeSpec(env, seed, max_turns=4)
        assert all(isinstance(m["content"], list) for m in row["prompt"])
        prompt = prepare_multimodal_messages(row["prompt"], images=row["images"])  # what TRL does
        parts = [p for m in prompt for p in m["content"] if p["type"] == "image"]
        assert [p["image"].size for p in parts] == [im.size for im in row["images"]]


def test_the_printed_script_trains_on_the_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "train.parquet"
    args = ["make-dataset", "sokoban", "-n", "2", "--out", str(out), "--trainer", "trl", "--max-turns", "2"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    script = tmp_path / "train_grpo.py"
    assert f"TRL run: python {script}" in printed and printed.endswith(script.read_text())
    assert main(args) == 2 and str(script) in capsys.readouterr().err  # kept unless --force

    spec = importlib.util.spec_from_file_location("train_grpo", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.chdir(tmp_path)
    torch.set_num_threads(1)
    processor = build_tiny_processor()
    trainer = module.train(  # main() loads MODEL from the hub; the rest of the script runs as written
        build_tiny_qwen2_vl(processor).train(),
        processor,
        max_steps=1,
        num_generations=2,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=1,
        max_completion_length=200,
        generation_kwargs={"max_new_tokens": 16},
    )
    assert trainer.state.global_step == 1
    assert "vlm_envs/status/failed" in trainer.state.log_history[0]


def test_the_printed_script_loads_its_model_and_processor_without_torchvision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "train.parquet"
    assert main(["make-dataset", "sokoban", "-n", "1", "--out", str(out), "--trainer", "trl"]) == 0
    assert "AutoProcessor" not in capsys.readouterr().out  # it needs torchvision, which no extra installs
    spec = importlib.util.spec_from_file_location("train_grpo", tmp_path / "train_grpo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    loaded = {}
    monkeypatch.setattr(module, "MODEL", str(save_tiny_model(tmp_path / "model")))
    monkeypatch.setattr(
        module, "train", lambda model, processor: loaded.update(model=model, processor=processor)
    )
    module.main()  # as `python train_grpo.py` runs it, the model a local folder instead of the hub's
    processor = loaded["processor"]
    assert processor.tokenizer.padding_side == "left" and hasattr(processor, "image_processor")
    assert type(loaded["model"]).__name__ == "Qwen2VLForConditionalGeneration"
