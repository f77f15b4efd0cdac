"""Write tests/docs/ms_swift_flags.txt: the flags ``swift sft`` takes, from ms-swift's own argument classes.

``swift sft`` parses its command line with ``HfArgumentParser([SftArguments])`` and refuses what is
left over (``swift/pipelines/base.py``: ``raise ValueError(f'remaining_argv: ...')``), so a flag is
``--NAME`` for a field NAME of ``SftArguments`` or of one of its bases. Their fields are read here
from the source in ms-swift's wheel (``swift/arguments/**.py`` and ``swift/trainers/arguments.py``:
every annotated field of ``SftArguments`` and of its bases defined there); the fields inherited from
transformers' ``Seq2SeqTrainingArguments`` are not listed, as the docs test reads those from the
installed transformers. Regenerate::

    .venv/bin/python -m pip download --no-deps ms-swift==4.6.0 -d /tmp/swift
    .venv/bin/python tests/docs/make_ms_swift_flags.py /tmp/swift/ms_swift-4.6.0-py3-none-any.whl \\
        > tests/docs/ms_swift_flags.txt
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

from class_fields import class_fields

ROOT_CLASS = "SftArguments"


def _sources(wheel: zipfile.ZipFile) -> list[str]:
    names = [
        n
        for n in wheel.namelist()
        if n.endswith(".py") and (n.startswith("swift/arguments/") or n == "swift/trainers/arguments.py")
    ]
    return [wheel.read(n).decode("utf-8") for n in sorted(names)]


def fields(wheel: zipfile.ZipFile) -> set[str]:
    """Every field of ``SftArguments`` and of its bases defined in the files read."""
    return class_fields(_sources(wheel), [ROOT_CLASS])


def main() -> None:
    path = Path(sys.argv[1])
    with zipfile.ZipFile(path) as wheel:
        version = next(
            line.split(":", 1)[1].strip()
            for info in wheel.namelist()
            if info.endswith(".dist-info/METADATA")
            for line in wheel.read(info).decode().splitlines()
            if line.startswith("Version:")
        )
        names = sorted(fields(wheel))
    print("# Flags of `swift sft` from ms-swift's own argument classes (SftArguments and its bases),")
    print(f"# read by tests/docs/make_ms_swift_flags.py from ms-swift {version} ({path.name})")
    print("# (flags inherited from transformers' Seq2SeqTrainingArguments: see the installed transformers)")
    print(f"[version]\n{version}")
    print("[flags]")
    print("\n".join(names))


if __name__ == "__main__":
    main()
