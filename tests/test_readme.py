"""Every Python and shell block of README.md (and of the env author's guide, docs/writing_an_env.md)
runs offline, as written, so no example can rot.

Python blocks run in a fresh interpreter (a timeout each). Shell blocks run line by line where a
line is a command of this project (``vlm-envs ...``, ``python -m vlm_envs...``), with the
interpreter's ``bin`` first on ``PATH``; other lines (``make``, ``pip``, flag fragments for slime)
are not ours to run. A block that needs a GPU server says so in an HTML comment right before its
fence, ``<!-- readme-test: skip (why) -->``, and the next runnable block is its offline equivalent.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GUIDE = ROOT / "docs" / "writing_an_env.md"
SKIP_RE = re.compile(r"<!--\s*readme-test:\s*skip\s*\((?P<why>.+)\)\s*-->")
FENCE_RE = re.compile(r"^```(?P<lang>\w*)\s*$")
#: Lines of shell blocks this project runs: its command and its modules.
OURS = ("vlm-envs ", "python -m vlm_envs")
TIMEOUT_S = 600


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int  # where the fence opens, 1-based
    skip: str | None  # why it does not run here, from the marker before the fence


def readme_blocks(text: str) -> list[Block]:
    """The fenced ``python`` and ``bash`` blocks, with the skip marker before each (if any)."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        opened = FENCE_RE.match(lines[i])
        if not opened or not opened.group("lang"):
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = SKIP_RE.search(before)
        if opened.group("lang") in ("python", "bash"):
            code = "\n".join(lines[i + 1 : end]) + "\n"
            blocks.append(Block(opened.group("lang"), code, i + 1, marker.group("why") if marker else None))
        i = end + 1
    return blocks


def shell_commands(code: str) -> list[str]:
    """The project's commands in a shell block: continuation lines joined, comments dropped."""
    joined = re.sub(r"\s*\\\n\s*", " ", code)
    commands = []
    for line in joined.splitlines():
        command = line.split("  #", 1)[0].strip()
        if command.startswith(OURS):
            commands.append(command)
    return commands


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))
GUIDE_BLOCKS = readme_blocks(GUIDE.read_text(encoding="utf-8"))


def _env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    path = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "PYTHONPATH": path}


def test_the_readme_has_blocks_and_every_skipped_one_has_an_offline_equivalent_after_it():
    assert sum(b.lang == "python" for b in BLOCKS) >= 4 and sum(b.lang == "bash" for b in BLOCKS) >= 3
    for k, block in enumerate(BLOCKS):
        if block.skip and "offline equivalent follows" in block.skip:
            after = BLOCKS[k + 1] if k + 1 < len(BLOCKS) else None
            assert after is not None and after.skip is None, (
                f"README line {block.line}: no offline block after it"
            )


@pytest.mark.slow
@pytest.mark.parametrize(
    "block",
    BLOCKS + GUIDE_BLOCKS,
    ids=[f"readme-{b.lang}-line{b.line}" for b in BLOCKS]
    + [f"guide-{b.lang}-line{b.line}" for b in GUIDE_BLOCKS],
)
def test_readme_block_runs(block: Block, tmp_path: Path) -> None:
    if block.skip:
        pytest.skip(f"README line {block.line}: {block.skip}")
    if block.lang == "python":
        proc = subprocess.run(
            [sys.executable, "-c", block.code],
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 0, f"README line {block.line}:\n{proc.stderr[-3000:]}"
        return
    commands = shell_commands(block.code)
    if not commands:
        pytest.skip(f"README line {block.line}: no vlm-envs command in this block (make, pip, flags)")
    for command in commands:
        proc = subprocess.run(
            shlex.split(command),
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 0, f"README line {block.line}: {command}\n{proc.stderr[-3000:]}"


def test_the_block_reader_sees_markers_fences_and_commands():
    text = (
        "<!-- readme-test: skip (needs a GPU; the offline equivalent follows) -->\n"
        "```bash\nvllm serve x\n```\n"
        "```python\nprint(1)\n```\n```yaml\na: 1\n```\n"
        "```bash\nmake demo  # no\nvlm-envs eval a \\\n    -n 2  # yes\n  --flag x\n```\n"
    )
    gpu, offline, shell = readme_blocks(text)
    assert (gpu.skip, offline.skip, offline.code, offline.line) == (
        "needs a GPU; the offline equivalent follows",
        None,
        "print(1)\n",
        5,
    )
    assert shell_commands(shell.code) == ["vlm-envs eval a -n 2"]
