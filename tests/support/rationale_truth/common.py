"""What every truth check shares: the type of a check, and the parts of a reply it reads."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any, str, str], None]
MOVES = r"\b(Up|Down|Left|Right)\b"


def answer_text(reply: str) -> str:
    """The content of the reply's ``<answer>`` block (asserted present)."""
    match = re.search(r"<answer>(.*?)</answer>", reply)
    assert match, reply
    return match.group(1)
