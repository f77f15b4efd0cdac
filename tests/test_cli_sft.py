"""``vlm-envs make-sft`` through the real command: what it writes and says, and one line and exit code 2
for every request it cannot honour."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vlm_envs.cli import main


def test_oracle_data_for_two_envs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sft"
    assert main(["make-sft", "sokoban", "jigsaw", "-n", "2", "--rationale", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "sokoban: kept 2 of 2 episodes (source success 100.0%)" in printed
    assert "SFTTrainer" in printed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source"]["rationale"] is True and set(manifest["envs"]) == {"sokoban", "jigsaw"}
    assert (out / "train.parquet").is_file()


def test_from_a_run_with_a_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    argv = [
        "eval",
        "sokoban",
        "--policy",
        "oracle",
        "--max-turns",
        "2",
        "-n",
        "6",
        "--out",
        str(run),
        "--quiet",
    ]
    assert main(argv) == 0
    wins = sum(json.loads(line)["success"] for line in (run / "results.jsonl").read_text().splitlines())
    out = tmp_path / "lf"
    argv = [
        "make-sft",
        "--from",
        str(run),
        "--format",
        "llamafactory",
        "--history",
        "window:1",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"kept {wins} of 6 episodes" in printed and "--mask_history true" in printed
    assert (out / "dataset_info.json").is_file()


@pytest.mark.parametrize(
    ("argv", "piece"),
    [
        (["make-sft", "nope", "--out", "OUT"], "unknown env 'nope'"),
        (["make-sft", "--out", "OUT"], "name at least one env"),
        (["make-sft", "sokoban", "-n", "0", "--out", "OUT"], "-n must be a positive int"),
        (["make-sft", "sokoban", "--seed", "-1", "--out", "OUT"], "--seed"),
        (["make-sft", "sokoban", "--history", "window:x", "--out", "OUT"], "window:K"),
        (["make-sft", "sokoban", "--format", "alpaca", "--out", "OUT"], "invalid choice: 'alpaca'"),
        (["make-sft", "zoom_search", "-n", "1", "--out", "OUT"], "--format swift"),
        (["make-sft", "sokoban", "--config", "gridsize=[6,6]", "--out", "OUT"], "did you mean 'grid_size'"),
        (["make-sft", "sokoban", "jigsaw", "--config", "num_boxes=1", "--out", "OUT"], "one env"),
        (["make-sft", "--from", "OUT", "--out", "OUT2"], "holds no run.json"),
        (["make-sft", "sokoban", "--from", "OUT", "--out", "OUT2"], "give no ENV"),
        (["make-sft", "sokoban", "--min-reward", "1", "--out", "OUT"], "--min-reward filters"),
        (["make-sft", "sokoban", "-n", "1", "--out", "FILE"], "is a file"),
        (["make-sft", "sokoban", "-n", "1", "--out", ""], "--out is empty"),
        (["make-sft", "sokoban", "-n", "1", "--out", ".", "--force"], "the working folder"),
        (["make-sft", "sokoban", "--format", "swift", "--model", "m", "--out", "OUT"], "--format trl"),
    ],
)
def test_bad_requests_are_one_line_and_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    piece: str,
) -> None:
    monkeypatch.chdir(tmp_path)  # `--out .` names this folder
    (tmp_path / "FILE").write_text("x")
    paths = {"OUT": str(tmp_path / "out"), "OUT2": str(tmp_path / "out2"), "FILE": str(tmp_path / "FILE")}
    (tmp_path / "out").mkdir()
    with pytest.raises(SystemExit) if "invalid choice" in piece else _nothing() as caught:
        code = main([paths.get(a, a) for a in argv])
    if caught is not None:
        code = caught.value.code
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and piece in err, err
    assert not (tmp_path / "out2").exists()


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


WITHOUT_TORCH = """
import importlib.abc, sys

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, Refuse())
from vlm_envs.cli import main
sys.exit(main(["make-sft", "sokoban", "-n", "1", "--out", sys.argv[1]]))
"""


def test_the_core_install_is_told_which_extras_make_sft_needs(tmp_path: Path) -> None:
    """Without torch (the core install), make-sft is one line naming the extras and exit 2."""
    child = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 2, child.stderr
    (line,) = child.stderr.strip().splitlines()
    assert "make-sft needs the rollout and data extras" in line and "vlm-envs[rollout,data]" in line
    assert not (tmp_path / "out").exists()


def test_a_progress_bar_on_a_terminal_and_none_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os
    import pty

    master, slave = pty.openpty()
    argv = [
        sys.executable,
        "-m",
        "vlm_envs.cli",
        "make-sft",
        "sokoban",
        "-n",
        "3",
        "--out",
        str(tmp_path / "tty"),
    ]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave) as child:
        os.close(slave)
        stdout, _ = child.communicate(timeout=120)
    terminal = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        terminal += chunk
    os.close(master)
    assert child.returncode == 0, terminal
    assert b"\rmake-sft [" in terminal and b"3/3 episodes, kept 3" in terminal
    assert b"wrote 3 rows" in stdout
    assert main(["make-sft", "sokoban", "-n", "2", "--out", str(tmp_path / "pipe")]) == 0
    assert "make-sft [" not in capsys.readouterr().err
