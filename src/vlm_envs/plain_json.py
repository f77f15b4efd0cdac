"""Any value an env or a client hands over, as plain JSON data: what eval records and the server send."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: Deeper than this, a value is written as its ``str``: a self-referencing or hostile structure ends.
MAX_DEPTH = 20


def json_safe(value: Any, depth: int = 0) -> Any:
    """``value`` as plain JSON data: non-finite floats become ``None``, unknown objects their ``str``."""
    if depth > MAX_DEPTH:
        return str(value)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v, depth + 1) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return json_safe(value.tolist(), depth + 1)
    return str(value)
