"""Write tests/docs/llamafactory_keys.txt: the YAML keys ``llamafactory-cli train`` takes from
LLaMA-Factory's own argument classes, and its chat template names.

LLaMA-Factory parses a training YAML with ``HfArgumentParser`` over ModelArguments, DataArguments,
TrainingArguments, FinetuningArguments and GeneratingArguments (``hparams/parser.py``); a key is a
field of one of them. Their fields are read here from the source (``src/llamafactory/hparams/*.py``:
every annotated field of those classes and of their bases defined there); the fields they inherit
from transformers' ``Seq2SeqTrainingArguments`` are not listed, as the docs test reads those from
the installed transformers. Template names are the ``register_template(name=...)`` calls of
``src/llamafactory/data/template.py``. Regenerate::

    .venv/bin/python tests/docs/make_llamafactory_keys.py ~/src/LLaMA-Factory \\
        > tests/docs/llamafactory_keys.txt

(a checkout, or a bare git folder whose HEAD is read).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from class_fields import class_fields

TRAIN_CLASSES = (
    "ModelArguments",
    "DataArguments",
    "TrainingArguments",
    "FinetuningArguments",
    "GeneratingArguments",
)


def _read(repo: Path, path: str) -> str:
    if (repo / path).is_file():
        return (repo / path).read_text(encoding="utf-8")
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"HEAD:{path}"], capture_output=True, text=True, check=True
    ).stdout


def _files(repo: Path, folder: str) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "--name-only", "HEAD", folder + "/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [p for p in out.split() if p.endswith(".py")]


def fields(repo: Path) -> set[str]:
    """Every field of :data:`TRAIN_CLASSES` and of their bases defined in ``hparams``."""
    return class_fields((_read(repo, p) for p in _files(repo, "src/llamafactory/hparams")), TRAIN_CLASSES)


def templates(repo: Path) -> set[str]:
    """The names ``register_template`` is called with."""
    tree = ast.parse(_read(repo, "src/llamafactory/data/template.py"))
    return {
        kw.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "register_template"
        for kw in node.keywords
        if kw.arg == "name" and isinstance(kw.value, ast.Constant)
    }


def main() -> None:
    repo = Path(sys.argv[1])
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    print("# YAML keys of llamafactory-cli train from LLaMA-Factory's own argument classes, and its")
    print(
        f"# chat templates, read by tests/docs/make_llamafactory_keys.py from hiyouga/LLaMA-Factory@{commit}"
    )
    print("# (keys inherited from transformers' Seq2SeqTrainingArguments: see the installed transformers)")
    print("[keys]")
    print("\n".join(sorted(fields(repo))))
    print("[templates]")
    print("\n".join(sorted(templates(repo))))


if __name__ == "__main__":
    main()
