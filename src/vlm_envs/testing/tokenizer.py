"""A small byte-level BPE tokenizer with the Qwen special tokens, trained in code, fully offline."""

from __future__ import annotations

from functools import cache

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from vlm_envs.testing.templates import DEFAULT_SYSTEM_PROMPT, QWEN2_VL_TEMPLATE

# The Qwen2 pre-tokenizer split (from Qwen2's published tokenizer.json), applied before byte-level BPE.
QWEN2_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Qwen2-VL's special tokens, in the order of their ids (they follow the regular vocabulary there too).
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
# Added but not special in Qwen2.5 / Qwen3 (they stay in decoded text).
EXTRA_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>")

_CORPUS = (
    DEFAULT_SYSTEM_PROMPT,
    "system user assistant tool",
    "You are playing Sokoban. Push every box onto a target. The player moves Up, Down, Left or Right.",
    "Walls block the player. A box on a target is done.",
    "Answer with <answer>Left</answer> or <answer>Up</answer>.",
    "Invalid action. The board did not change. You solved the puzzle! Boxes left: 2. Steps taken: 5.",
    "Find the value of x. The triangle has angles of 30 degrees and 60 degrees; the side is 3\\sqrt{2}.",
    "Your answer is wrong. Try again: give the final answer in \\boxed{12}. The area of the circle is 4\\pi.",
    "Let me think step by step. First, the sum of the angles in a triangle is 180 degrees, so x = 90.",
    "The quick brown fox jumps over the lazy dog. 0 1 2 3 4 5 6 7 8 9 10 100 3.14 -1 + - * / = ( ) [ ] { }",
    '{"name": "move", "arguments": {"direction": "up"}} <tool_call> </tool_call> <think> </think>',
)


@cache
def _trained_bpe(vocab_size: int) -> str:
    """The serialized BPE tokenizer (training is deterministic, so every process gets the same one)."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(list(_CORPUS) * 4, trainer)
    return tok.to_str()


def build_tiny_tokenizer(
    vocab_size: int = 600, chat_template: str = QWEN2_VL_TEMPLATE
) -> PreTrainedTokenizerFast:
    """A Qwen-style tokenizer: byte-level BPE (any text round-trips), Qwen special tokens, chat template.

    ``eos_token`` is ``<|im_end|>`` and ``pad_token`` is ``<|endoftext|>``, as in Qwen2-VL-Instruct.
    """
    backend = Tokenizer.from_str(_trained_bpe(vocab_size))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, clean_up_tokenization_spaces=False)
    tokenizer.add_special_tokens({"additional_special_tokens": list(SPECIAL_TOKENS)})
    tokenizer.add_tokens(list(EXTRA_TOKENS))
    tokenizer.eos_token = "<|im_end|>"
    tokenizer.pad_token = "<|endoftext|>"
    tokenizer.chat_template = chat_template
    return tokenizer
