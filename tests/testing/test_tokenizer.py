"""The tiny Qwen-style tokenizer and the Qwen-format chat templates."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vlm_envs.testing import DEFAULT_SYSTEM_PROMPT, QWEN3_VL_TEMPLATE, build_tiny_tokenizer
from vlm_envs.testing.tokenizer import EXTRA_TOKENS, SPECIAL_TOKENS


@pytest.fixture(scope="module")
def tok():
    return build_tiny_tokenizer()


def test_special_tokens_are_single_ids_after_the_vocabulary(tok):
    base = tok.backend_tokenizer.get_vocab_size(with_added_tokens=False)
    ids = [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS]
    assert ids == list(range(base, base + len(SPECIAL_TOKENS)))
    for token in (*SPECIAL_TOKENS, *EXTRA_TOKENS):
        assert tok(f"a{token}b", add_special_tokens=False)["input_ids"][1] == tok.convert_tokens_to_ids(token)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.decode(ids, skip_special_tokens=True) == ""
    assert tok.decode([tok.convert_tokens_to_ids("<think>")], skip_special_tokens=True) == "<think>"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_round_trips(tok, text):
    if any(t in text for t in (*SPECIAL_TOKENS, *EXTRA_TOKENS)):
        return
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == unicodedata.normalize("NFC", text)


def test_bpe_merges_common_words(tok):
    assert len(tok("You are a helpful assistant.", add_special_tokens=False)["input_ids"]) < 10


def test_qwen2_vl_template(tok):
    messages = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Look."}]},
        {"role": "assistant", "content": "ok"},
        {"role": "tool", "content": "r"},
    ]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        f"<|im_start|>system\n{DEFAULT_SYSTEM_PROMPT}<|im_end|>\n"
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Look.<|im_end|>\n"
        "<|im_start|>assistant\nok<|im_end|>\n"
        "<|im_start|>tool\nr<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    with_system = [{"role": "system", "content": "S"}, *messages[1:2]]
    assert tok.apply_chat_template(with_system, tokenize=False) == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>assistant\nok<|im_end|>\n"
    )


def test_qwen3_vl_template_wraps_tool_messages(tok):
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
        {"role": "tool", "content": "r1"},
        {"role": "tool", "content": [{"type": "text", "text": "r2"}, {"type": "image"}]},
    ]
    text = tok.apply_chat_template(messages, chat_template=QWEN3_VL_TEMPLATE, tokenize=False)
    assert text == (
        "<|im_start|>user\nq<|im_end|>\n"
        "<|im_start|>assistant\na<|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nr1\n</tool_response>"
        "\n<tool_response>\nr2<|vision_start|><|image_pad|><|vision_end|>\n</tool_response><|im_end|>\n"
    )
