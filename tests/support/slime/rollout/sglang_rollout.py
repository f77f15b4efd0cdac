"""Stand-in for ``slime.rollout.sglang_rollout.GenerateState``: a per-process singleton holding the
tokenizer, the processor, the default sampling params and the ``aborted`` flag.

The real one loads the processor from ``args.hf_checkpoint``; a Qwen-VL processor cannot be loaded
from disk here (it needs torchvision), so this one builds the tiny offline processor instead.
"""

from __future__ import annotations

from typing import Any

from vlm_envs.testing import build_tiny_processor


class GenerateState:
    _instance: GenerateState | None = None

    def __new__(cls, args: Any) -> GenerateState:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
            cls._instance._init(args)
        return cls._instance

    def _init(self, args: Any) -> None:
        self.args = args
        self.processor = build_tiny_processor(getattr(args, "tiny_family", "qwen2_vl"))
        self.tokenizer = self.processor.tokenizer
        self.sampling_params: dict[str, Any] = dict(
            temperature=args.rollout_temperature,
            top_p=1.0,
            top_k=-1,
            max_new_tokens=args.rollout_max_response_len,
            stop=None,
            stop_token_ids=None,
            skip_special_tokens=False,
            no_stop_trim=True,
            spaces_between_special_tokens=False,
        )
        self.reset()

    def reset(self) -> None:
        self.remaining_batch_size = 0
        self.pendings: set = set()
        self.aborted = False

    @classmethod
    def forget(cls) -> None:
        """Test helper: drop the singleton (the real one lives as long as the rollout process)."""
        cls._instance = None
