"""Whether TRL can train a model on ``--format trl`` conversations with the loss on the replies only.

TRL 1.16's ``SFTTrainer`` with ``assistant_only_loss=True`` masks every token outside the template's
``{% generation %}`` markers. Where the model's own template has none, it swaps in one of its stored
training templates, chosen by exact comparison of the model's template with the originals it ships
(``trl/chat_template_utils.py``: ``get_training_chat_template``; among vision models Qwen2-VL and
Qwen2.5-VL, which ship the same template, and Qwen3-VL), and raises ``ValueError`` for any other.
"""

from __future__ import annotations

from typing import Any

from vlm_envs.sft.sources import SftError

#: What to use where TRL has no marked template: one prompt-completion row per reply.
PER_REPLY = (
    "--history window:K (one prompt-completion row per reply; K at least the turn cap keeps every turn)"
)


def training_chat_template(processing_class: Any) -> str | None:
    """The marked template TRL swaps in for ``processing_class`` (``None``: its own has markers).

    Raises :class:`SftError`, naming the per-reply layout, where TRL has none.
    """
    import trl
    from trl.chat_template_utils import get_training_chat_template

    try:
        return get_training_chat_template(processing_class)
    except ValueError:
        raise SftError(
            f"TRL {trl.__version__} has no {{% generation %}}-marked version of this model's chat template "
            f"(it has Qwen2-VL, Qwen2.5-VL and Qwen3-VL), so it cannot train a whole conversation on the "
            f"replies only: write per-reply rows with {PER_REPLY}"
        ) from None


def check_model(model: str) -> None:
    """Refuse ``--format trl`` conversations for ``model`` (a hub id or a folder) when TRL cannot
    mask them; its tokenizer is loaded for the template."""
    try:
        import trl  # noqa: F401
        from transformers import AutoTokenizer
    except ImportError as err:
        raise SftError(f"--model checks TRL's templates: pip install 'vlm-envs[trl]' ({err})") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(model)
    except (OSError, ValueError) as err:
        raise SftError(
            f"--model {model!r}: cannot load its tokenizer ({' '.join(str(err).split())[:200]})"
        ) from None
    if not tokenizer.chat_template:
        raise SftError(f"--model {model!r} has no chat template")
    training_chat_template(tokenizer)
