"""The LLaMA-Factory and ms-swift layouts, field by field against what their readers accept.

The rules checked here are read from their source and docs (see :mod:`vlm_envs.sft.formats`):
LLaMA-Factory's ``SharegptDatasetConverter`` (system first, then user/observation at even and
assistant at odd positions, an even count) and ``dataset_info.json`` keys; ms-swift's standard
``messages`` + ``images`` lines with ``"loss"`` on assistant messages only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from sft_helpers import MAX_TURNS, oracle_demo

from vlm_envs import list_envs
from vlm_envs.sft import Conversation, FormatError, OracleSource, make_sft
from vlm_envs.sft.formats import ImageStore, llamafactory_record, swift_record, trl_conversation, trl_rows

SHAREGPT_ROLES = {"system", "user", "assistant", "tool"}


def _make(tmp_path: Path, env: str, fmt: str, history: str = "full", n: int = 2) -> Path:
    out = tmp_path / f"{env}-{fmt}-{history.replace(':', '')}"
    make_sft(OracleSource((env,), n, max_turns=MAX_TURNS), out, fmt=fmt, history=history)
    return out


def _check_sharegpt_record(record: dict, root: Path) -> None:
    assert set(record) <= {"messages", "images"}
    roles = [m["role"] for m in record["messages"]]
    assert set(roles) <= SHAREGPT_ROLES
    body = roles[1:] if roles[0] == "system" else roles
    assert len(body) % 2 == 0 and body[-1] == "assistant"
    assert all(r in ("user", "tool") for r in body[0::2]) and all(r == "assistant" for r in body[1::2])
    tags = sum(m["content"].count("<image>") for m in record["messages"])
    assert tags == len(record.get("images", []))
    for path in record.get("images", []):
        assert not Path(path).is_absolute()
        assert Image.open(root / path).format == "PNG"


@pytest.mark.parametrize("env", ["sokoban", "geo3k", "zoom_search"])
@pytest.mark.parametrize("history", ["full", "window:2"])
def test_llamafactory_layout(tmp_path: Path, env: str, history: str) -> None:
    out = _make(tmp_path, env, "llamafactory", history)
    info = json.loads((out / "dataset_info.json").read_text())
    (entry,) = info.values()
    assert entry["file_name"] == "data.json" and entry["formatting"] == "sharegpt"
    assert entry["columns"]["messages"] == "messages"
    assert entry["tags"] == {
        "role_tag": "role",
        "content_tag": "content",
        "user_tag": "user",
        "assistant_tag": "assistant",
        "observation_tag": "tool",
        "system_tag": "system",
    }
    records = json.loads((out / entry["file_name"]).read_text())
    assert records
    for record in records:
        _check_sharegpt_record(record, out)
    if "images" in entry["columns"]:
        assert any("images" in r for r in records)


def test_llamafactory_refuses_two_user_turns_in_a_row(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="alternation"):
        _make(tmp_path, "sokoban", "llamafactory", "window:0")


@pytest.mark.parametrize("history", ["full", "window:1"])
def test_swift_layout(tmp_path: Path, history: str) -> None:
    out = _make(tmp_path, "sokoban", "swift", history)
    lines = (out / "data.jsonl").read_text().splitlines()
    assert lines
    for line in lines:
        record = json.loads(line)
        assert set(record) <= {"messages", "images"}
        messages = record["messages"]
        assert {m["role"] for m in messages} <= SHAREGPT_ROLES
        assert messages[-1]["role"] == "assistant" and "loss" not in messages[-1]
        for m in messages:
            assert set(m) <= {"role", "content", "loss"}
            if "loss" in m:
                assert m["role"] == "assistant" and m["loss"] is False and history != "full"
        assert sum(m["content"].count("<image>") for m in messages) == len(record["images"])
        # relative to the folder, which ms-swift 4.6 reads them from with ROOT_IMAGE_DIR set to it
        assert all(not Path(p).is_absolute() and (out / p).is_file() for p in record["images"])


def _conversation(*messages: dict) -> Conversation:
    return Conversation(tuple(messages), tuple(m["role"] == "assistant" for m in messages))


def test_literal_image_tags_stay_text(tmp_path: Path) -> None:
    image = Image.new("RGB", (8, 8), "red")
    conv = _conversation(
        {"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": "go"}]},
        {"role": "assistant", "content": "I see <image> here <image>"},
    )
    store = ImageStore(tmp_path)
    record, broken = llamafactory_record(conv, store)
    assert broken == 2 and record["images"] == list(store.names)
    assert sum(m["content"].count("<image>") for m in record["messages"]) == 1
    record, _ = swift_record(conv, store)
    assert record["images"] == list(store.names)


def test_images_are_written_once_per_content(tmp_path: Path) -> None:
    store = ImageStore(tmp_path)
    a, b = Image.new("RGB", (8, 8), "red"), Image.new("RGB", (8, 8), "blue")
    assert store.add(a) == store.add(a.copy()) != store.add(b)
    assert len(store.names) == 2 and sorted(p.name for p in (tmp_path / "images").iterdir()) == sorted(
        Path(n).name for n in store.names
    )


def test_trl_refuses_an_image_in_a_tool_message() -> None:
    image = Image.new("RGB", (8, 8), "red")
    conv = _conversation(
        {"role": "user", "content": "find it"},
        {"role": "assistant", "content": "<tool_call>zoom</tool_call>"},
        {"role": "tool", "content": [{"type": "image", "image": image}]},
        {"role": "assistant", "content": "<answer>A</answer>"},
    )
    with pytest.raises(FormatError, match="tool message"):
        trl_rows(conv)
    with pytest.raises(FormatError, match="tool message"):
        trl_conversation(conv)
    assert len(trl_rows(_conversation(*conv.messages[:2]))) == 1


def test_a_trl_conversation_holds_every_turn_and_each_image_once() -> None:
    red, blue = Image.new("RGB", (8, 8), "red"), Image.new("RGB", (8, 8), "blue")
    conv = _conversation(
        {"role": "system", "content": "rules"},
        {"role": "user", "content": [{"type": "image", "image": red}, {"type": "text", "text": "go"}]},
        {"role": "assistant", "content": "<answer>Up</answer>"},
        {"role": "user", "content": [{"type": "image", "image": blue}, {"type": "text", "text": "again"}]},
        {"role": "assistant", "content": "<answer>Left</answer>"},
    )
    row = trl_conversation(conv)
    assert row["images"] == [red, blue]
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "user", "assistant"]
    assert row["messages"][3]["content"] == [
        {"type": "image", "text": None},
        {"type": "text", "text": "again"},
    ]
    assert row["messages"][4]["content"] == [{"type": "text", "text": "<answer>Left</answer>"}]
    # the per-reply layout repeats the context: reply k's prompt holds images 1..k
    assert [len(r["images"]) for r in trl_rows(conv)] == [1, 2]


@pytest.mark.parametrize("env", sorted(spec.name for spec in list_envs()))
def test_every_env_writes_one_trl_conversation_per_episode_or_names_another_format(
    tmp_path: Path, env: str
) -> None:
    """A new env inherits this: its oracle episode is one ``messages`` row holding each of its images
    once, or, where a tool answers with a picture, a one-line refusal naming the formats that can."""
    import datasets

    try:
        files = make_sft(OracleSource((env,), 1, max_turns=MAX_TURNS), tmp_path / "o", fmt="trl")
    except FormatError as err:
        assert "--format swift or --format llamafactory" in str(err)
        return
    (row,) = datasets.load_dataset("parquet", data_files=str(tmp_path / "o" / "train.parquet"))["train"]
    assert files.rows == files.conversations == 1 and row["env"] == env and row["seed"] == 0
    demo = oracle_demo(env, 0)
    assert [m["role"] for m in row["messages"]] == [m["role"] for m in demo.messages]
    shown = [p["image"] for m in demo.messages if not isinstance(m["content"], str) for p in m["content"]
             if p.get("type") == "image"]  # fmt: skip
    assert [im.convert("RGB").tobytes() for im in row["images"]] == [
        im.convert("RGB").tobytes() for im in shown
    ]
