"""``--format trl`` writes one conversation per episode, and TRL's own SFTTrainer trains exactly its
replies: with ``assistant_only_loss=True`` and the chat template Qwen ship (TRL swaps in its
``{% generation %}``-marked version), the labels are -100 on every system, user and tool token and
every image pad, each image is encoded once, and the ids are the RL rollout's tokens of the episode.

TRL 1.16 refuses assistant-only loss on images below transformers 5.18, and verl pins the venv's
transformers below 5.11, so TRL runs here in a child process with transformers 5.24 first on its path
(``make install`` puts it in .venv/overlays/trl-sft).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

from sft_helpers import MAX_TURNS

from vlm_envs.sft import OracleSource, SftError, make_sft
from vlm_envs.sft.trl_template import training_chat_template
from vlm_envs.testing import build_tiny_processor, save_tiny_processor

OVERLAY = Path(sys.prefix) / "overlays" / "trl-sft"
CHILD = Path(__file__).with_name("trl_conversation_child.py")
FAMILIES = ("qwen2_vl", "qwen3_vl")


@pytest.fixture(scope="module")
def conversations(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Sokoban (an image every turn) and Geo3k (a tool turn), one row per episode."""
    out = tmp_path_factory.mktemp("trl") / "data"
    make_sft(OracleSource(("sokoban", "geo3k"), 2, max_turns=MAX_TURNS), out, fmt="trl")
    return out


def _expected_mask(ids: list[int], special: dict) -> list[bool]:
    """True on the tokens of each assistant reply: from after ``<|im_start|>assistant\\n`` through
    its ``<|im_end|>`` and the newline the template puts after it."""
    opener = [special["im_start"], *special["assistant"]]
    mask, i = [False] * len(ids), 0
    while i < len(ids):
        if ids[i : i + len(opener)] == opener:
            j = i + len(opener)
            while ids[j] != special["im_end"]:
                mask[j], j = True, j + 1
            mask[j] = True
            newline = special["newline"]
            if ids[j + 1 : j + 1 + len(newline)] == newline:
                for k in range(len(newline)):
                    mask[j + 1 + k] = True
            i = j
        i += 1
    return mask


def test_trl_trains_exactly_the_replies_of_each_conversation(conversations: Path, tmp_path: Path) -> None:
    assert (OVERLAY / "transformers").is_dir(), f"{OVERLAY} is missing: run `make install`"
    result_file = tmp_path / "result.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(OVERLAY), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.run(
        [sys.executable, str(CHILD), str(conversations), str(result_file), *FAMILIES],
        capture_output=True,
        text=True,
        env=env,
        timeout=400,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    results = json.loads(result_file.read_text())
    assert results.pop("transformers") == "5.24.0"
    assert sorted(results) == sorted(FAMILIES)
    for family, result in results.items():
        _check(conversations, family, result)


def _check(conversations: Path, family: str, result: dict) -> None:
    special = result["special"]
    manifest = json.loads((conversations / "manifest.json").read_text())
    assert len(result["rows"]) == manifest["rows"] == manifest["conversations"] == 4  # one per episode
    assert {r["env"] for r in result["rows"]} == {"sokoban", "geo3k"}
    assert any("tool" in r["roles"] for r in result["rows"]), "no tool turn was tried"
    for row in result["rows"]:
        ids, labels = row["ids"], row["labels"]
        # the ids are the rollout's tokens of the episode, then the template's newline after the last reply
        assert ids == row["rollout"] + special["newline"]
        trained = [label != -100 for label in labels]
        assert trained == _expected_mask(ids, special), (family, row["env"])
        assert all(label == i for label, i in zip(labels, ids, strict=True) if label != -100)
        assert not {i for i, t in zip(ids, trained, strict=True) if t} & set(special["vision"])
        assert sum(trained) > 0 and row["roles"].count("assistant") >= 1
        # each image once: one grid per image of the episode, its pixels and pads once
        assert len(row["grids"]) == row["images"]
        assert row["pixel_rows"] == sum(math.prod(g) for g in row["grids"])
        pads = sum(math.prod(g) for g in row["grids"]) // 4
        assert sum(i in special["vision"] for i in ids) == pads + 2 * len(row["grids"])  # + start and end
    start, end = result["loss"]
    assert end < start, (family, start, end)  # three steps on the replies lower their loss


def test_a_template_trl_cannot_mark_is_refused_naming_the_per_reply_layout(tmp_path: Path) -> None:
    with pytest.raises(SftError, match=r"--history window:K"):
        training_chat_template(build_tiny_processor("qwen2_vl"))  # the tests' own template: not Qwen's file
    folder = save_tiny_processor(tmp_path / "model", "qwen2_vl")
    with pytest.raises(SftError, match=r"no \{% generation %\}-marked version.*--history window:K"):
        make_sft(OracleSource(("sokoban",), 1), tmp_path / "out", fmt="trl", model=str(folder))
    assert not (tmp_path / "out").exists()
    from trl.chat_template_utils import qwen2_5_vl_chat_template

    (Path(folder) / "chat_template.jinja").write_text(qwen2_5_vl_chat_template)
    files = make_sft(OracleSource(("sokoban",), 1), tmp_path / "out", fmt="trl", model=str(folder))
    assert files.rows == 1
    with pytest.raises(SftError, match="--format trl"):
        make_sft(
            OracleSource(("sokoban",), 1), tmp_path / "o2", fmt="trl", history="window:2", model=str(folder)
        )
