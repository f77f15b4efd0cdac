"""SFT data in the layouts trainers read: TRL, LLaMA-Factory (ShareGPT) and ms-swift.

Each builder turns a training :class:`~vlm_envs.sft.samples.Conversation` into one record (row) of
its layout; :mod:`vlm_envs.sft.writers` streams them to files. Images are PNG: embedded as bytes in
TRL's parquet (an image feature), written once per content as files for the others. Facts about
each layout, read from the trainers' source:

- TRL 1.16 (``trl/trainer/sft_trainer.py``, ``DataCollatorForVisionLanguageModeling``): a
  conversational ``messages`` row with ``images`` trains on the assistant replies only with
  ``assistant_only_loss=True``, through the template's ``{% generation %}`` markers (TRL swaps in its
  marked Qwen2-VL/Qwen2.5-VL and Qwen3-VL templates, :mod:`vlm_envs.sft.trl_template`; transformers
  >= 5.18 for images). So an episode is one row. A prompt-completion row trains its completion only,
  with any template: the layout of a windowed turn, whose context is not a prefix of the episode.
  ``prepare_multimodal_messages`` fills image parts of every role but ``tool``, so a tool message
  cannot carry an image there.
- LLaMA-Factory (``data/README.md``, ``src/llamafactory/data/converter.py``): ``sharegpt``
  formatting with OpenAI-style tags; after an optional system message, user/observation messages
  stand at even positions and assistant ones at odd, ending with an assistant one; one ``<image>``
  tag per entry of ``images``, paths relative to ``dataset_dir`` (its default ``media_dir``).
  ``--format sharegpt`` writes the same files (an alias).
- ms-swift 4.6.0 (``docs/source_en/Customization/Custom-dataset.md``; ``swift/template/
  vision_utils.py``): JSONL of ``messages`` with ``<image>`` tags and ``images`` paths; a relative
  path is read from the working folder, or from ``$ROOT_IMAGE_DIR`` when set, never from the data
  file's folder, so the paths are relative to the output folder and the command sets
  ``ROOT_IMAGE_DIR`` to it; ``"loss": false`` on an assistant message leaves it out of the loss; a
  ``tool`` message is not trained.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image

from vlm_envs.imaging import image_column, png_bytes
from vlm_envs.sft.samples import Conversation

#: The image tag of LLaMA-Factory's and ms-swift's text (``<image>`` in both, by default).
IMAGE_TAG = "<image>"
#: A literal tag in message text is broken with a zero-width non-joiner, so it stays text.
_BROKEN_TAG = "<\u200cimage>"
#: The dataset name LLaMA-Factory's ``dataset_info.json`` gives the data.
LLAMAFACTORY_NAME = "vlm_envs_sft"
FORMATS = ("trl", "llamafactory", "sharegpt", "swift")


class FormatError(ValueError):
    """The data cannot be written in the asked layout (a limit of the trainer's reader)."""


class ImageStore:
    """PNG files under ``images/`` of ``root``, one per distinct image, named by a digest of their
    bytes and written when first added."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.names: set[str] = set()

    def add(self, image: Image.Image) -> str:
        """The relative path of ``image``'s PNG (written once however often it is added)."""
        data = png_bytes(image)
        path = f"images/{hashlib.sha256(data).hexdigest()[:24]}.png"
        if path not in self.names:
            (self.root / "images").mkdir(exist_ok=True)
            (self.root / path).write_bytes(data)
            self.names.add(path)
        return path


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _is_image(part: dict[str, Any]) -> bool:
    return part.get("type") == "image"


# ---- TRL ------------------------------------------------------------------------------------------


def _trl_message(message: dict[str, Any], images: list[Image.Image]) -> dict[str, Any]:
    """A message with TRL's image placeholders (``{"type": "image"}``), its images appended to ``images``."""
    parts = []
    for part in _parts(message):
        if _is_image(part):
            if message["role"] == "tool":
                raise FormatError(
                    "TRL 1.16's vision collator places no image in a tool message "
                    "(prepare_multimodal_messages skips role 'tool'); write this env's data "
                    "with --format swift or --format llamafactory"
                )
            images.append(part["image"])
            parts.append({"type": "image", "text": None})
        else:
            parts.append({"type": "text", "text": str(part.get("text", ""))})
    return {"role": message["role"], "content": parts}


def trl_conversation(conversation: Conversation) -> dict[str, Any]:
    """One language-modeling row: every message (``messages``) and each image once, in order
    (``images``). With ``assistant_only_loss=True``, TRL trains the assistant replies only."""
    images: list[Image.Image] = []
    messages = [_trl_message(m, images) for m in conversation.messages]
    return {"messages": messages, "images": images}


def trl_rows(conversation: Conversation) -> list[dict[str, Any]]:
    """One prompt-completion row per trained reply (a windowed turn has one): the messages before
    it, it, and the prompt's images."""
    rows = []
    for index, trained in enumerate(conversation.trained):
        if not trained:
            continue
        images: list[Image.Image] = []
        prompt = [_trl_message(m, images) for m in conversation.messages[:index]]
        reply = conversation.messages[index]
        completion = [{"role": "assistant", "content": [{"type": "text", "text": reply["content"]}]}]
        rows.append({"prompt": prompt, "completion": completion, "images": images})
    return rows


def trl_features(per_reply: bool) -> Any:
    """The ``datasets`` features of a TRL file: ``messages`` rows, or ``prompt``/``completion``
    rows (``per_reply``), with ``images`` and the ``env``, ``seed`` (and ``turn``) they came from."""
    import datasets  # the data extra

    text = datasets.Value("string")
    message = {"role": text, "content": datasets.List({"type": text, "text": text})}
    columns = {"prompt": datasets.List(message), "completion": datasets.List(message)} if per_reply else {}
    return datasets.Features(
        {
            **(columns or {"messages": datasets.List(message)}),
            "images": datasets.List(datasets.Image()),
            "env": text,
            "seed": datasets.Value("uint64"),
            **({"turn": datasets.Value("int32")} if per_reply else {}),
        }
    )


def trl_arrow_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row as its parquet columns hold it (images as PNG bytes)."""
    return {**row, "images": image_column(row["images"])}


# ---- LLaMA-Factory and ms-swift -------------------------------------------------------------------


def tagged_messages(
    conversation: Conversation, store: ImageStore, image_path: Callable[[str], str]
) -> tuple[list[dict[str, Any]], list[str], int]:
    """Messages whose images are ``<image>`` tags in their text, the image paths in tag order, and
    how many literal tags were broken so that they stay text."""
    messages, images, broken = [], [], 0
    for message in conversation.messages:
        pieces = []
        for part in _parts(message):
            if _is_image(part):
                images.append(image_path(store.add(part["image"])))
                pieces.append(IMAGE_TAG)
            else:
                text = str(part.get("text", ""))
                broken += text.count(IMAGE_TAG)
                pieces.append(text.replace(IMAGE_TAG, _BROKEN_TAG))
        messages.append({"role": message["role"], "content": "".join(pieces)})
    return messages, images, broken


def llamafactory_record(conversation: Conversation, store: ImageStore) -> tuple[dict[str, Any], int]:
    """One ShareGPT record (OpenAI tags) and the count of broken literal tags."""
    messages, images, broken = tagged_messages(conversation, store, str)
    roles = [m["role"] for m in messages]
    body = roles[1:] if roles[:1] == ["system"] else roles
    expected = [("user", "tool"), ("assistant",)]
    if len(body) % 2 or any(role not in expected[i % 2] for i, role in enumerate(body)):
        raise FormatError(
            f"LLaMA-Factory's sharegpt needs user/tool and assistant turns in alternation, got {roles}: "
            "window:0 puts the current observation right after the task; use --format trl or swift"
        )
    record: dict[str, Any] = {"messages": messages}
    if images:
        record["images"] = images
    return record, broken


def llamafactory_info(file_name: str, with_images: bool) -> bytes:
    """The ``dataset_info.json`` entry that names the data and its OpenAI-style tags."""
    columns = {"messages": "messages", **({"images": "images"} if with_images else {})}
    tags = {
        "role_tag": "role",
        "content_tag": "content",
        "user_tag": "user",
        "assistant_tag": "assistant",
        "observation_tag": "tool",
        "system_tag": "system",
    }
    info = {
        LLAMAFACTORY_NAME: {
            "file_name": file_name,
            "formatting": "sharegpt",
            "columns": columns,
            "tags": tags,
        }
    }
    return (json.dumps(info, indent=2) + "\n").encode()


def swift_record(conversation: Conversation, store: ImageStore) -> tuple[dict[str, Any], int]:
    """One ms-swift line: messages (past replies of a windowed turn with ``"loss": false``), images
    as paths relative to the folder (ms-swift reads them with ``ROOT_IMAGE_DIR`` set to it)."""
    messages, images, broken = tagged_messages(conversation, store, str)
    for message, trained in zip(messages, conversation.trained, strict=True):
        if message["role"] == "assistant" and not trained:
            message["loss"] = False
    record: dict[str, Any] = {"messages": messages}
    if images:
        record["images"] = images
    return record, broken


def json_line(record: dict[str, Any]) -> bytes:
    """One JSON line (UTF-8, keys in insertion order)."""
    return (json.dumps(record, ensure_ascii=False) + "\n").encode()
