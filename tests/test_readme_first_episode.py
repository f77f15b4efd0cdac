"""The README's first episode shows a sound play: every move of its reply valid, and the level won
(it printed ``action_valid: False`` beside ``success: True``: its first move hit a wall)."""

from __future__ import annotations

import contextlib
import io
import re
import runpy
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_first_episode_plays_valid_moves_and_wins(tmp_path: Path) -> None:
    section = README.read_text(encoding="utf-8").split("## A first episode", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None and "env.step(" in code.group(1)
    script = tmp_path / "first_episode.py"
    script.write_text(code.group(1))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        runpy.run_path(str(script), run_name="__main__")
    lines = printed.getvalue().splitlines()
    reward, metrics_and_done = lines[1].split(" ", 1)
    assert float(reward) == 1.0 and metrics_and_done.endswith(" True")  # the step won; the episode ended
    assert "'action_valid': True" in metrics_and_done and "'success': True" in metrics_and_done
    assert float(lines[2]) == 1.0
