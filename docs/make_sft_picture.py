"""Write docs/sft_conversation.png: the first turns of one ``make-sft --rationale`` demonstration as a
chat (Sokoban, seed 0), each message under its role, images where they stand, trained replies in green.
Run from the repository root: ``.venv/bin/python docs/make_sft_picture.py``."""

from __future__ import annotations

import textwrap
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from vlm_envs.configured import build_configured_env
from vlm_envs.sft import conversations, play_oracle

DOCS = Path(__file__).parent
WIDTH, MARGIN, WRAP = 760, 14, 96
MESSAGES = 6  # the task, then reply / observation pairs
COLOURS = {
    "system": (238, 238, 238),
    "user": (226, 236, 250),
    "tool": (250, 240, 220),
    "assistant": (222, 245, 222),
}


def _font(size: int) -> ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def render(messages: list[dict], trained: list[bool]) -> Image.Image:
    """The messages as stacked boxes, text wrapped, images inline."""
    font, label = _font(13), _font(12)
    blocks: list[tuple[str, list[str | Image.Image], bool]] = []
    for message, train in zip(messages, trained, strict=True):
        content = message["content"]
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        pieces: list[str | Image.Image] = []
        for part in parts:
            if part["type"] == "image":
                pieces.append(part["image"])
            else:
                for line in part["text"].strip("\n").split("\n"):
                    pieces += textwrap.wrap(line, WRAP) or [""]
        blocks.append((message["role"], pieces, train))
    heights = [
        24 + sum(p.height + 6 if isinstance(p, Image.Image) else 17 for p in pieces)
        for _, pieces, _ in blocks
    ]
    canvas = Image.new("RGB", (WIDTH, sum(heights) + MARGIN * (len(blocks) + 1)), "white")
    draw = ImageDraw.Draw(canvas)
    y = MARGIN
    for (role, pieces, train), height in zip(blocks, heights, strict=True):
        draw.rounded_rectangle((MARGIN, y, WIDTH - MARGIN, y + height), 8, fill=COLOURS[role])
        draw.text(
            (MARGIN + 10, y + 5), role + ("  (trained)" if train else ""), fill=(90, 90, 90), font=label
        )
        cursor = y + 24
        for piece in pieces:
            if isinstance(piece, Image.Image):
                canvas.paste(piece, (MARGIN + 10, cursor))
                cursor += piece.height + 6
            else:
                draw.text((MARGIN + 10, cursor), piece, fill="black", font=font)
                cursor += 17
        y += height + MARGIN
    return canvas


def main() -> None:
    env = build_configured_env("sokoban", 12, {})
    demo = play_oracle(env, "sokoban", 0, 12, rationale=True)
    (conversation,) = conversations(demo)
    picture = render(list(conversation.messages[:MESSAGES]), list(conversation.trained[:MESSAGES]))
    path = DOCS / "sft_conversation.png"
    picture.save(path, optimize=True)
    print(f"{path}  {path.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()
