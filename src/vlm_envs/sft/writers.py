"""Streaming writers: each format's data file, written row by row as episodes finish.

Nothing grows with the number of episodes but the set of image names: TRL rows go to parquet in row
groups of :data:`ROW_GROUP`, ShareGPT records into a JSON array written record by record, ms-swift
lines as they come, and image files as soon as they are first seen.
"""

from __future__ import annotations

import abc
import json
from pathlib import Path
from typing import Any, BinaryIO

from vlm_envs.sft import formats
from vlm_envs.sft.samples import Conversation

#: The data file of each format, inside the output folder.
DATA_FILES = {
    "trl": "train.parquet",
    "llamafactory": "data.json",
    "sharegpt": "data.json",
    "swift": "data.jsonl",
}
#: TRL rows per parquet row group (what is held in memory before it is written).
ROW_GROUP = 64


class Writer(abc.ABC):
    """One format's data file in ``root``; :meth:`add` a conversation, :meth:`close` at the end."""

    def __init__(self, fmt: str, root: Path, per_reply: bool) -> None:
        self.fmt, self.root, self.per_reply = fmt, root, per_reply
        self.rows = self.conversations = self.broken_tags = self.tool_turns = 0

    def add(self, conversation: Conversation, env: str, seed: int) -> None:
        """Write ``conversation`` (from episode ``seed`` of ``env``)."""
        self.conversations += 1
        self.tool_turns += sum(m["role"] == "tool" for m in conversation.messages)

    @abc.abstractmethod
    def close(self) -> None:
        """Finish the files (the data is complete only after this)."""


class TrlWriter(Writer):
    """``train.parquet``: one ``messages`` row per episode, or prompt-completion rows per reply."""

    def __init__(self, fmt: str, root: Path, per_reply: bool) -> None:
        import datasets  # noqa: F401 (the data extra: its features name the image columns)
        import pyarrow.parquet as pq

        super().__init__(fmt, root, per_reply)
        self.schema = formats.trl_features(per_reply).arrow_schema
        self.file = pq.ParquetWriter(root / DATA_FILES["trl"], self.schema)
        self.pending: list[dict[str, Any]] = []

    def add(self, conversation: Conversation, env: str, seed: int) -> None:
        super().add(conversation, env, seed)
        if not self.per_reply:
            self.pending.append({**formats.trl_conversation(conversation), "env": env, "seed": seed})
        else:
            rows = formats.trl_rows(conversation)
            first_turn = sum(m["role"] == "assistant" for m in conversation.messages) - len(rows)
            for k, row in enumerate(rows):
                self.pending.append({**row, "env": env, "seed": seed, "turn": first_turn + k})
        if len(self.pending) >= ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self.pending:
            rows = [formats.trl_arrow_row(r) for r in self.pending]
            self.file.write_table(pa.Table.from_pylist(rows, schema=self.schema))
            self.rows += len(rows)
            self.pending = []

    def close(self) -> None:
        self._flush()
        self.file.close()


class TaggedWriter(Writer):
    """LLaMA-Factory's ``data.json`` (a JSON array) or ms-swift's ``data.jsonl``, images as files."""

    def __init__(self, fmt: str, root: Path, per_reply: bool) -> None:
        super().__init__(fmt, root, per_reply)
        self.store = formats.ImageStore(root)
        self.file: BinaryIO = (root / DATA_FILES[fmt]).open("wb")
        if fmt != "swift":
            self.file.write(b"[")

    def add(self, conversation: Conversation, env: str, seed: int) -> None:
        super().add(conversation, env, seed)
        if self.fmt == "swift":
            record, broken = formats.swift_record(conversation, self.store)
            self.file.write(formats.json_line(record))
        else:
            record, broken = formats.llamafactory_record(conversation, self.store)
            self.file.write(
                (b",\n" if self.rows else b"\n") + json.dumps(record, ensure_ascii=False).encode()
            )
        self.broken_tags += broken
        self.rows += 1

    def close(self) -> None:
        if self.fmt != "swift":
            self.file.write(b"\n]\n")
            info = formats.llamafactory_info(DATA_FILES[self.fmt], bool(self.store.names))
            (self.root / "dataset_info.json").write_bytes(info)
        self.file.close()


def open_writer(fmt: str, root: Path, per_reply: bool) -> Writer:
    """The writer of ``fmt`` into the folder ``root``."""
    return (TrlWriter if fmt == "trl" else TaggedWriter)(fmt, root, per_reply)
