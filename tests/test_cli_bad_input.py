"""Bad command lines, tried as a user would: each one is ONE line on stderr and exit code 2.

The table runs every case through ``main`` in this process (stdin empty, no network); a case that
raised, printed a traceback or a second line, or exited 1 fails here. Cases that need a server, a
tokenizer folder or a full disk live next to the feature they test.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from vlm_envs.cli import main

TOP = str(2**64)
#: (argv, a piece of the error line). ``OUT`` stands for a fresh output path, ``FILE`` for a path
#: under a regular file (a folder cannot be made there).
CASES: list[tuple[list[str], str]] = [
    ([], "required: command"),
    (["--bogus"], "required: command"),
    (["nope"], "invalid choice: 'nope'"),
    (["play", "sokoban", "--seed", "-1"], "--seed must be in [0, 2**64), got -1"),
    (["play", "sokoban", "--seed", TOP], f"got {TOP}"),
    (["play", "sokoban", "--seed", "x"], "invalid int value: 'x'"),
    (["play", "sokoban", "--max-turns", "0"], "max_turns"),
    (["play", "sokoban", "--config", "gridsize=[6,6]"], "unknown key 'gridsize' (did you mean 'grid_size'?)"),
    (["play", "sokoban", "--config", "zzz=1"], "valid keys: "),
    (
        ["play", "zoom_search", "--config", "view=0"],
        "env 'zoom_search' rejects its config: view: Input should be greater than or equal to 224",
    ),
    (["play", "fog_maze", "--config", "view=0"], "view: Input should be 'local' or 'first_person'"),
    (["play", "sokoban", "--save-frames", "FILE"], "cannot write frames to"),
    (["play", "no-such-env"], "unknown env 'no-such-env'"),
    (["eval", "sokoban"], "required: --policy"),
    (["eval", "sokoban", "--policy", "oracle", "--config", "gridsize=[6,6]"], "did you mean 'grid_size'"),
    (["eval", "zoom_search", "--policy", "oracle", "--config", "view=0"], "rejects its config"),
    (["eval", "sokoban", "--policy", "oracle", "--config", "nonsense"], "KEY=VALUE"),
    (["eval", "sokoban", "--policy", "oracle", "-n", "0"], "-n must be at least 1"),
    (["eval", "sokoban", "--policy", "oracle", "--concurrency", "0"], "--concurrency must be at least 1"),
    (["eval", "sokoban", "--policy", "oracle", "--max-turns", "0"], "--max-turns must be at least 1"),
    (["eval", "sokoban", "--policy", "oracle", "--seed", "-1"], "--seed must keep"),
    (["eval", "sokoban", "--policy", "oracle", "--max-tokens", "0"], "--max-tokens must be at least 1"),
    (["eval", "sokoban", "--policy", "oracle", "--timeout", "0"], "--timeout must be above 0 seconds"),
    (["eval", "sokoban", "--policy", "oracle", "--temperature", "-1"], "--temperature must be a number >= 0"),
    (
        ["eval", "sokoban", "--policy", "oracle", "--temperature", "nan"],
        "--temperature must be a number >= 0",
    ),
    (["eval", "sokoban", "--policy", "oracle", "--report", "pdf"], "invalid choice: 'pdf'"),
    (["eval", "sokoban", "--policy", "genius"], "unknown policy 'genius'"),
    (["eval", "sokoban", "--policy", "openai"], "needs its server"),
    (["eval", "sokoban", "--policy", "oracle", "--base-url", "http://x"], "uses no server"),
    (["eval", "sokoban", "--policy", "oracle", "--history", "window:2"], "--history applies to sglang"),
    (["eval", "sokoban", "--policy", "oracle", "--actors", "2"], "give them with --ray"),
    (["eval", "sokoban", "--policy", "sglang:http://127.0.0.1:1"], "needs --tokenizer"),
    (
        ["eval", "sokoban", "--policy", "sglang:http://127.0.0.1:1", "--tokenizer", "/no/such/dir"],
        "does not exist",
    ),
    (["eval", "sokoban", "--policy", "openai:http://127.0.0.1:1/v1"], "needs --model"),
    (["eval", "toyenvs.colors", "--policy", "oracle"], "needs an env with oracle_response()"),
    (["eval", "sokoban", "--policy", "oracle", "--out", "FILE"], "cannot create output folder"),
    (["make-dataset", "sokoban", "-n", "2"], "required: --out"),
    (["make-dataset", "sokoban", "-n", "0", "--out", "OUT"], "-n must be at least 1"),
    (["make-dataset", "sokoban", "-n", "2", "--seed", str(2**64 - 1), "--out", "OUT"], "--seed must keep"),
    (["make-dataset", "sokoban", "-n", "2", "--config", "gridsize=[6,6]", "--out", "OUT"], "did you mean"),
    (["make-dataset", "zoom_search", "-n", "1", "--config", "view=0", "--out", "OUT"], "rejects its config"),
    (["make-dataset", "sokoban", "-n", "2", "--max-turns", "0", "--out", "OUT"], "max_turns"),
    (["make-dataset", "sokoban", "-n", "2", "--backend", "fsdp", "--out", "OUT"], "--trainer verl"),
    (["make-dataset", "sokoban", "-n", "2", "--out", "FILE"], "cannot write"),
    (["make-dataset", "no-such-env", "-n", "2", "--out", "OUT"], "unknown env"),
    (["serve", "--port", "-1"], "argument --port: must be in [0, 65535], got -1"),
    (["serve", "--port", "99999"], "argument --port: must be in [0, 65535], got 99999"),
    (["serve", "--workers", "100000"], "argument --workers: must be in [1, "),
    (["serve", "--idle-timeout", "0.001"], "argument --idle-timeout: must be a number of seconds >= 1"),
    (["serve", "--call-deadline", "0"], "argument --call-deadline: must be a number of seconds above 0"),
    (["serve", "--session-memory-mib", "0"], "argument --session-memory-mib: must be at least 1, got 0"),
    (["serve", "--worker-memory-mib", "1.5"], "argument --worker-memory-mib: not a whole number: '1.5'"),
    (["serve", "--header-timeout", "nan"], "argument --header-timeout: must be a number of seconds above 0"),
    (["serve", "--keep-alive", "inf"], "argument --keep-alive: must be a number of seconds above 0"),
    (["serve", "--max-connections", "0"], "argument --max-connections: must be at least 1, got 0"),
    (["serve", "--max-connections-per-peer", "-5"], "--max-connections-per-peer: must be at least 1"),
    (["serve", "--max-sessions", "0"], "argument --max-sessions: must be at least 1, got 0"),
    (["check", "no-such-env"], "unknown env"),
    (["check", "sokoban", "--config", "gridsize=[6,6]"], "did you mean 'grid_size'"),
]


@pytest.mark.parametrize(("argv", "expected"), CASES, ids=[" ".join(a) or "(nothing)" for a, _ in CASES])
def test_bad_input_is_one_line_and_exit_code_2(
    argv: list[str],
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder should be")
    paths = {"OUT": str(tmp_path / "out" / "train.parquet"), "FILE": str(blocker / "sub")}
    argv = [paths.get(a, a) for a in argv]
    if argv[:1] == ["eval"] and "--out" not in argv and len(argv) > 2:
        argv += ["--out", str(tmp_path / "run")]
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own exits
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("vlm-envs"), lines[0]
    assert expected in lines[0], lines[0]
