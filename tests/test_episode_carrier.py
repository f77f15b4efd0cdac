"""The episode carrier: a row's env, seed and config ride on a prompt message, through parquet and
through what TRL does to a prompt, and never reach the chat template's output."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest

from vlm_envs.episode_carrier import CARRIER_KEY, EpisodeSpec, attach, find, strip


def test_a_spec_round_trips_through_its_json() -> None:
    spec = EpisodeSpec("sokoban", 7, {"size": 6, "boxes": 2}, max_turns=5, history="full")
    assert EpisodeSpec.from_json(spec.to_json()) == spec
    assert EpisodeSpec.from_json(EpisodeSpec("geo3k", None).to_json()) == EpisodeSpec("geo3k")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "JSON object"),
        ('{"env": "sokoban", "sed": 1}', "unknown keys"),
        ('{"env": ""}', "env name"),
        ('{"env": "sokoban", "seed": -1}', "invalid"),
        ('{"env": "sokoban", "seed": true}', "invalid"),
        ('{"env": "sokoban", "max_turns": 0}', "max_turns"),
        ('{"env": "sokoban", "env_config": [1]}', "invalid"),
    ],
)
def test_a_malformed_carrier_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        find([{"role": "user", "content": "x", CARRIER_KEY: text}])


def test_the_carrier_is_found_on_any_message_and_stripped_for_the_template() -> None:
    spec = EpisodeSpec("sokoban", 3)
    messages = attach([{"role": "user", "content": "play"}], spec)
    # a user's own preprocessing put a system message first: the carrier is still found
    messages = [{"role": "system", "content": "be brief", CARRIER_KEY: None}, *messages]
    assert find(messages) == spec
    assert strip(messages) == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "play"}]
    assert find([{"role": "user", "content": "no episode"}]) is None
    assert find("a plain text prompt") is None


def test_the_carrier_survives_parquet_and_trls_image_filling(tmp_path: Path) -> None:
    from PIL import Image
    from trl.data_utils import prepare_multimodal_messages

    from vlm_envs.testing import build_tiny_processor

    spec = EpisodeSpec("sokoban", 11, {"size": 6})
    system = {"role": "system", "content": [{"type": "text", "text": "S"}]}
    user = {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image", "text": None}]}
    rows = [{"prompt": attach([system, user], spec), "images": [Image.new("RGB", (56, 56), "red")]}]
    path = tmp_path / "rows.parquet"
    datasets.Dataset.from_list(rows).cast_column("images", datasets.Sequence(datasets.Image())).to_parquet(
        path
    )
    row = datasets.load_dataset("parquet", data_files=str(path))["train"][0]
    prompt = prepare_multimodal_messages(row["prompt"], images=row["images"])
    assert find(prompt) == spec
    processor = build_tiny_processor()
    rendered = processor.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    plain = processor.apply_chat_template(strip(prompt), tokenize=False, add_generation_prompt=True)
    assert rendered == plain and "sokoban" not in rendered
