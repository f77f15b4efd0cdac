"""Tiny Qwen-VL processors and models: real transformers parts, offline, deterministic."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

from vlm_envs.testing import SamplingParams, TinyEngine, build_test_engine, build_tiny_processor

DIGEST_SCRIPT = """
import hashlib, torch
from vlm_envs.testing import build_test_engine
for family in ("qwen2_vl", "qwen3_vl"):
    engine = build_test_engine(family, seed=3)
    h = hashlib.sha256(engine.tokenizer.backend_tokenizer.to_str().encode())
    for name, p in sorted(engine.model.state_dict().items()):
        h.update(name.encode()); h.update(p.detach().numpy().tobytes())
    print(h.hexdigest())
"""


def digests(pythonhashseed: str) -> list[str]:
    env = {**os.environ, "PYTHONHASHSEED": pythonhashseed}
    child = subprocess.run(
        [sys.executable, "-c", DIGEST_SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    return child.stdout.split()


def gray(size: int) -> Image.Image:
    return Image.new("RGB", (size, size), (120, 130, 140))


def test_qwen2_vl_processor_without_torchvision_gives_the_published_shapes():
    # FACTS.md: at the default pixel limits a 192x192 image gives 196 x 1176 pixel rows, grid [1, 14, 14]
    # and 49 image pad tokens (patch 14, temporal patch 2, merge 2).
    processor = build_tiny_processor("qwen2_vl", min_pixels=56 * 56, max_pixels=28 * 28 * 1280)
    text = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "hi"}]}], tokenize=False
    )
    out = processor(text=[text], images=[gray(192)], return_tensors="pt")
    assert tuple(out["pixel_values"].shape) == (196, 1176)
    assert out["image_grid_thw"].tolist() == [[1, 14, 14]]
    assert out["input_ids"][0].tolist().count(processor.image_token_id) == 49


def test_qwen3_vl_processor_uses_patch_16():
    processor = build_tiny_processor("qwen3_vl", min_pixels=64 * 64, max_pixels=32 * 32 * 1280)
    out = processor.image_processor(images=[gray(192)], return_tensors="pt")
    assert tuple(out["pixel_values"].shape) == (144, 3 * 2 * 16 * 16)
    assert out["image_grid_thw"].tolist() == [[1, 12, 12]]


def test_unknown_family_is_refused():
    with pytest.raises(ValueError, match="family"):
        build_tiny_processor("llava")


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl"])
def test_generation_log_probs_are_the_models(family):
    engine = build_test_engine(family)
    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (60, 90, 3), dtype=np.uint8))
    text = engine.processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Go"}]}],
        tokenize=False,
        add_generation_prompt=True,
    )
    ids = engine.tokenizer(text, add_special_tokens=False)["input_ids"]  # one pad per image: prepare expands
    inputs = engine.prepare(ids, [image])
    assert len(inputs.input_ids) > len(ids)
    gen = engine.generate(inputs, SamplingParams(max_new_tokens=8, ignore_eos=True))
    assert gen.finish_reason == {"type": "length", "length": 8}
    np.testing.assert_allclose(gen.log_probs, engine.score(inputs, gen.token_ids), atol=1e-4)
    hot = engine.generate(inputs, SamplingParams(max_new_tokens=8, ignore_eos=True, temperature=2.0))
    np.testing.assert_allclose(hot.log_probs, engine.score(inputs, hot.token_ids, temperature=2.0), atol=1e-4)
    greedy = engine.generate(inputs, SamplingParams(max_new_tokens=8, ignore_eos=True, temperature=0.0))
    full = engine.model(**engine.model_kwargs(inputs, inputs.input_ids)).logits[0, -1]
    assert greedy.token_ids[0] == int(torch.argmax(full))


def test_same_seed_same_parts_in_any_process(capsys):
    exec(DIGEST_SCRIPT, {})
    here = capsys.readouterr().out.split()
    assert len(here) == 2
    assert digests("1") == here
    assert digests("98765") == here


def test_sampling_is_seeded_by_request():
    engine = build_test_engine("qwen2_vl")
    inputs = engine.prepare(engine.tokenizer("hello there", add_special_tokens=False)["input_ids"], [])
    params = SamplingParams(max_new_tokens=10, ignore_eos=True)
    assert engine.generate(inputs, params).token_ids == engine.generate(inputs, params).token_ids
    seeded = [SamplingParams(max_new_tokens=10, ignore_eos=True, sampling_seed=s) for s in (1, 2)]
    assert engine.generate(inputs, seeded[0]).token_ids != engine.generate(inputs, seeded[1]).token_ids
    assert isinstance(engine, TinyEngine)


def test_sampling_params_validation():
    assert SamplingParams.from_request({"stop": "x"}).stop == ("x",)
    assert SamplingParams.from_request({"stop_token_ids": [3, "4"]}).stop_token_ids == (3, 4)
    for bad in (
        {"max_new_tokens": -1},
        {"stop": [""]},
        {"temperature": "hot"},
        {"temperature": float("nan")},
    ):
        with pytest.raises(ValueError):
            SamplingParams.from_request(bad)


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl"])
def test_a_saved_tiny_processor_loads_offline_as_the_same_processor(family: str, tmp_path) -> None:
    from vlm_envs.rollout.processors import load_processor
    from vlm_envs.testing import save_tiny_processor

    folder = save_tiny_processor(tmp_path / "proc", family)
    code = (
        "import sys\nfrom vlm_envs.rollout.processors import load_processor\n"
        "p = load_processor(sys.argv[1]); print(type(p).__name__, p.image_processor.patch_size)"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    child = subprocess.run(
        [sys.executable, "-c", code, str(folder)], env=env, capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == [
        type(build_tiny_processor(family)).__name__.removeprefix("Tiny"),
        str(14 if family == "qwen2_vl" else 16),
    ]
    built, loaded = build_tiny_processor(family), load_processor(str(folder))
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "hi"}]}]
    texts = [p.apply_chat_template(messages, tokenize=False) for p in (built, loaded)]
    assert texts[0] == texts[1]
    a, b = (p(text=[texts[0]], images=[gray(100)], return_tensors="pt") for p in (built, loaded))
    assert a["input_ids"].tolist() == b["input_ids"].tolist()
    assert torch.equal(a["pixel_values"], b["pixel_values"])
    assert a["image_grid_thw"].tolist() == b["image_grid_thw"].tolist()


def test_head_dim_sets_the_heads_and_the_default_is_unchanged() -> None:
    from vlm_envs.testing import TinySize, build_tiny_qwen2_vl, build_tiny_qwen3_vl

    processor = build_tiny_processor()
    default = build_tiny_qwen2_vl(processor).config.text_config
    assert (default.num_attention_heads, default.rope_parameters["mrope_section"]) == (4, [2, 3, 3])
    wide = build_tiny_qwen2_vl(processor, size=TinySize(head_dim=32)).config.text_config
    assert (wide.num_attention_heads, wide.rope_parameters["mrope_section"]) == (2, [4, 6, 6])
    qwen3 = build_tiny_qwen3_vl(
        build_tiny_processor("qwen3_vl"), size=TinySize(head_dim=32)
    ).config.text_config
    assert (qwen3.num_attention_heads, qwen3.head_dim) == (2, 32)
    with pytest.raises(ValueError, match="head_dim"):
        TinySize(head_dim=24)  # does not divide hidden 64


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl"])
def test_a_saved_tiny_model_loads_as_the_model_built_in_code(family: str, tmp_path) -> None:
    from transformers import AutoModelForImageTextToText

    from vlm_envs.rollout.processors import load_processor
    from vlm_envs.testing import TinySize, build_tiny_qwen2_vl, build_tiny_qwen3_vl, save_tiny_model

    size = TinySize(head_dim=32)
    folder = save_tiny_model(tmp_path / "model", family, size, seed=5)
    assert (folder / "video_preprocessor_config.json").exists()  # engines that build the full processor
    loaded = AutoModelForImageTextToText.from_pretrained(folder).eval()
    build = build_tiny_qwen2_vl if family == "qwen2_vl" else build_tiny_qwen3_vl
    built = build(build_tiny_processor(family), seed=5, size=size)
    assert loaded.state_dict().keys() == built.state_dict().keys()
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in built.state_dict().items())
    assert type(load_processor(str(folder))).__name__ == type(
        build_tiny_processor(family)
    ).__name__.removeprefix("Tiny")
