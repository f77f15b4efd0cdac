"""The model's processor for TRL training, also where torchvision is not installed.

``AutoProcessor.from_pretrained`` builds a Qwen-VL processor with its video processor, which needs
torchvision; the ``rollout`` and ``trl`` extras install none (there is no CPU build of it that
matches ``torch==2.13.0``). :func:`load_processor` loads the processor as transformers does where it
can, else from its image processor and tokenizer alone (images and text work, videos do not), the
way ``vlm-envs eval`` loads a served model's processor.
"""

from __future__ import annotations

import os
from typing import Any

from huggingface_hub import snapshot_download

from vlm_envs.rollout import processors

#: The files of a hub model that make its processor (configs, tokenizer, chat template): no weights.
PROCESSOR_FILES = ("*.json", "*.txt", "*.jinja", "*.model", "*.tiktoken")


def load_processor(name: str, padding_side: str = "left") -> Any:
    """The processor of model ``name`` (a hub id or a local folder), its tokenizer padding on
    ``padding_side``. A hub id fetches only the processor's files (``HF_HUB_OFFLINE``: from the
    cache)."""
    folder = os.path.expanduser(name)
    if not os.path.isdir(folder):
        folder = snapshot_download(name, allow_patterns=list(PROCESSOR_FILES))
    processor = processors.load_processor(folder)
    getattr(processor, "tokenizer", processor).padding_side = padding_side
    return processor
