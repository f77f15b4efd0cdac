"""``vlm-envs make-dataset ENV --trainer trl``: the rows TRL's ``GRPOTrainer`` reads, and a training script.

Rows follow TRL's vision-language layout: ``prompt`` (chat messages whose content is a list of
``{"type": "text", "text"}`` / ``{"type": "image"}`` parts, in the order the env shows them; TRL puts
the images into the image parts) and ``images``. The prompt is the env's own first observation (and
its system prompt); its first message carries the episode (:mod:`vlm_envs.episode_carrier`: env,
seed and, where given, env config and ``max_turns``), which is all the rollout needs to replay it.
Every content is a list of parts, so the parquet column keeps one schema. The script written next to
the rows trains on them with :class:`vlm_envs.rollout.trl.VlmEnvsGRPOTrainer`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from vlm_envs.configured import build_configured_env
from vlm_envs.episode_carrier import EpisodeSpec, attach
from vlm_envs.files import write_atomic
from vlm_envs.imaging import image_column
from vlm_envs.protocol import DEFAULT_MAX_TURNS

DEFAULT_MODEL = "Qwen/Qwen3-VL-2B-Instruct"
#: Token budgets of the printed run: a completion holds every turn's reply and observation (with its
#: image); one turn generates at most TURN_TOKENS.
COMPLETION_TOKENS, TURN_TOKENS = 4096, 512


def prompt_messages(env: Any, obs: Any) -> list[dict[str, Any]]:
    """The env's system prompt and first observation as dataset messages (image parts without the
    image: TRL fills them from the ``images`` column, in order)."""
    system = env.system_prompt()
    messages = [{"role": "system", "content": [{"type": "text", "text": system}]}] if system else []
    message = env.format_observation(obs)
    parts = [
        {"type": "image", "text": None} if part["type"] == "image" else {"type": "text", "text": part["text"]}
        for part in message["content"]
    ]
    messages.append({"role": message["role"], "content": parts})
    return messages


def trl_rows(
    env_name: str, n: int, seed: int, max_turns: int | None, env_config: dict[str, Any]
) -> list[dict[str, Any]]:
    """One row per seed ``seed .. seed + n - 1`` from the env's first observation."""
    env = build_configured_env(env_name, max_turns, env_config)
    rows = []
    try:
        for s in range(seed, seed + n):
            obs, _ = env.reset(seed=s)
            spec = EpisodeSpec(env_name, s, env_config, max_turns)
            rows.append(
                {
                    "prompt": attach(prompt_messages(env, obs), spec),
                    "images": image_column(obs.images),
                }
            )
    finally:
        env.close()
    return rows


def script_path(path: Path) -> Path:
    """Where the training script of the rows at ``path`` goes: ``NAME_grpo.py`` beside them."""
    return path.with_name(f"{path.stem}_grpo.py")


_SCRIPT = '''\
"""GRPO on {env} with TRL: written by `vlm-envs make-dataset {env} --trainer trl`.

Run: python {script}
With vLLM, start TRL's server first (`trl vllm-serve --model MODEL`) and set USE_VLLM = True.
"""

import datasets
import torch
from transformers import AutoModelForImageTextToText
from trl import GRPOConfig

from vlm_envs.rollout.trl import VlmEnvsGRPOTrainer, load_processor

MODEL = {model!r}
DATA = {data!r}
USE_VLLM = False


def train(model, processor, **overrides):
    """GRPO on the rows at DATA; ``overrides`` change GRPOConfig's settings."""
    dataset = datasets.load_dataset("parquet", data_files=DATA)["train"]
    gpu = torch.cuda.is_available()
    settings = dict(
        output_dir={output!r},
        num_generations=8,  # one GRPO group: 8 episodes of the same seed
        per_device_train_batch_size=8,
        gradient_accumulation_steps=4,
        max_completion_length={completion},  # every turn's reply and observation, images included
        generation_kwargs={{"max_new_tokens": {turn}}},  # one turn's reply ("max_tokens" with vLLM)
        learning_rate=1e-6,
        beta=0.0,
        num_train_epochs=1,
        bf16=gpu,
        use_cpu=not gpu,
        use_vllm=USE_VLLM,
        vllm_mode="server",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
    )
    settings.update(overrides)
    trainer = VlmEnvsGRPOTrainer(
        model=model,
        args=GRPOConfig(**settings),
        train_dataset=dataset,
        processing_class=processor,
    )
    trainer.train()
    return trainer


def main():
    processor = load_processor(MODEL, padding_side="left")  # needs no torchvision
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    model = AutoModelForImageTextToText.from_pretrained(MODEL, dtype=dtype)
    train(model, processor)


if __name__ == "__main__":
    main()
'''


@dataclasses.dataclass(frozen=True)
class TrlFiles:
    """What make-dataset wrote for TRL: the rows and the script that trains on them."""

    parquet: Path
    script: Path
    rows: int
    env: str
    max_turns: int
    model: str = DEFAULT_MODEL

    def script_text(self) -> str:
        """The training script (runnable as it stands: ``python SCRIPT``)."""
        return _SCRIPT.format(
            env=self.env,
            script=self.script,
            model=self.model,
            data=str(self.parquet),
            output=f"{self.env}-grpo",
            completion=COMPLETION_TOKENS,
            turn=TURN_TOKENS,
        )


def write_trl_script(path: Path, n: int, env_name: str, max_turns: int | None) -> TrlFiles:
    """Write the training script beside the rows at ``path`` (:func:`script_path`)."""
    files = TrlFiles(
        parquet=path.resolve(),
        script=script_path(path).resolve(),
        rows=n,
        env=env_name,
        max_turns=max_turns or DEFAULT_MAX_TURNS,
    )
    write_atomic(files.script, files.script_text())
    return files
