"""The fidelity tests again on the transformers a TRL user installs today (5.24.0: its ``generate`` encodes
the images before the prefill and passes ``mm_encoder_outputs``), where the main venv holds 5.10.4 (verl's
cap). They run in a child process with the overlay ``make install`` puts in .venv/overlays/trl-sft first on
its path, as tests/sft/test_trl_conversations.py runs TRL's SFT; verl's own test stays in the main venv.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

OVERLAY = Path(sys.prefix) / "overlays" / "trl-sft"
TESTS = Path(__file__).parent
RUN = ("test_fidelity.py", "test_fidelity_generation.py", "interop/test_trl_environment.py")
#: Prints the child's transformers, then runs pytest on the arguments.
CHILD = (
    "import pytest, transformers; print('transformers', transformers.__version__); "
    "raise SystemExit(pytest.main())"
)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_fidelity_tests_pass_on_the_newest_transformers() -> None:
    assert (OVERLAY / "transformers").is_dir(), f"{OVERLAY} is missing: run `make install`"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(OVERLAY), os.environ.get("PYTHONPATH", "")])}
    args = ["-q", "-rs", "-p", "no:cacheprovider", "-k", "not verl", *(str(TESTS / name) for name in RUN)]
    child = subprocess.run(
        [sys.executable, "-c", CHILD, *args],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        env=env,
        timeout=1100,
    )
    assert child.returncode == 0, child.stdout[-4000:] + child.stderr[-2000:]
    assert child.stdout.startswith("transformers 5.24.0\n")
    summary = child.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "skipped" not in summary, (
        summary
    )  # the pre-encoded tests ran
