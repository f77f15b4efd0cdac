"""What the docs-data scripts read from another project's source: the annotated fields of a class and
of its bases (an ``HfArgumentParser`` dataclass takes one option per such field)."""

from __future__ import annotations

import ast
from collections.abc import Iterable


def class_fields(sources: Iterable[str], roots: Iterable[str]) -> set[str]:
    """Every annotated field of the classes named ``roots`` and of their bases, by class name, among
    the classes defined in ``sources`` (Python source texts); bases defined elsewhere add nothing."""
    classes: dict[str, tuple[list[str], list[str]]] = {}  # name -> (bases, fields)
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
                names = [
                    s.target.id
                    for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                ]
                classes[node.name] = (bases, names)
    found: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in classes:
            bases, names = classes[name]
            found.update(names)
            todo.extend(bases)
    return found
